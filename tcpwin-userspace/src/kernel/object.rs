//! The kernel side as an object: embedded at build time, checked for privileges, loaded with the
//! running kernel's offsets and the session's settings.
use std::{borrow::Cow, path::Path};

use anyhow::{bail, Context, Result};
use aya::{Ebpf, EbpfLoader};
use tcpwin_common::{names, Config};

use super::btf::Layout;

#[repr(C, align(32))]
pub struct Aligned<B: ?Sized>(pub B);

/// The kernel side, built by `cargo xtask build-ebpf` (see build.rs).
pub static EMBEDDED: &Aligned<[u8]> = &Aligned(*include_bytes!(env!("TCPWIN_EBPF_OBJ_PATH")));

/// Refuses early, with the fix, when the process cannot load tracing programs. Root is not
/// enough on its own: root in a container whose capabilities were dropped gets EPERM on the
/// first map, so the effective capabilities are what is checked.
pub fn check_privileges() -> Result<()> {
    let cap_eff = crate::host::process::cap_eff();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match missing_caps(cap_eff, root) {
        None => Ok(()),
        Some(why) => bail!("{why}"),
    }
}

/// Why a process with effective capabilities `cap_eff` (None: not readable) cannot load tracing
/// programs, with the fix; None when it can.
fn missing_caps(cap_eff: Option<u64>, root: bool) -> Option<String> {
    const CAP_SYS_ADMIN: u64 = 21;
    const CAP_PERFMON: u64 = 38;
    const CAP_BPF: u64 = 39;
    let Some(cap_eff) = cap_eff else {
        // no /proc/self/status: trust root, the kernel says the rest
        return (!root).then(|| "tcpwin-trace loads kernel tracing programs: run it as root (sudo), or give it CAP_BPF and CAP_PERFMON".into());
    };
    let has = |c: u64| cap_eff & (1 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    Some(if root {
        format!(
            "tcpwin-trace loads kernel tracing programs: this root has neither CAP_SYS_ADMIN nor CAP_BPF and CAP_PERFMON (effective capabilities {cap_eff:#x}: a container that dropped them); add them (podman or docker: --cap-add BPF --cap-add PERFMON --cap-add SYS_PTRACE; Kubernetes: securityContext.capabilities.add: [BPF, PERFMON, SYS_PTRACE])"
        )
    } else {
        "tcpwin-trace loads kernel tracing programs: run it as root (sudo), or give it CAP_BPF and CAP_PERFMON (setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep)".into()
    })
}

/// What to load: the embedded object or a file, and the session's settings.
pub struct LoadOpts<'a> {
    pub obj: Option<&'a Path>,
    pub config: Config,
    /// ring buffer size in bytes (a power of two)
    pub ringbuf_bytes: u32,
}

/// Loads the object (programs not yet loaded into the kernel: see `attach`), with the offsets of
/// the running kernel and the settings written into `.rodata`.
pub fn load(opts: &LoadOpts, layout: &Layout, btf: &aya::Btf) -> Result<Ebpf> {
    let bytes: Cow<[u8]> = match opts.obj {
        Some(p) => {
            Cow::Owned(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)
        }
        None if EMBEDDED.0.is_empty() => bail!(
            "this tcpwin-trace was built without its kernel side (the eBPF object was missing when it was compiled): build it with `cargo xtask build`, or pass --obj FILE"
        ),
        None => Cow::Borrowed(&EMBEDDED.0),
    };
    let _ = raise_memlock();
    EbpfLoader::new()
        .btf(Some(btf))
        .override_global(names::OFFSETS, &layout.offsets, true)
        .override_global(names::CONFIG, &opts.config, true)
        // aya-log's level: 0 (off) unless --ebpf-log asks; an object without it logs nothing
        .override_global(names::AYA_LOG_LEVEL, &super::log::level().aya(), false)
        .map_max_entries(names::EVENTS, opts.ringbuf_bytes)
        .load(&bytes)
        .map_err(|e| {
            let text = format!("{e:#}");
            if text.contains("Operation not permitted") {
                anyhow::anyhow!("creating BPF maps was refused ({text}): run as root (sudo)")
            } else {
                anyhow::anyhow!("loading the eBPF object failed: {text}")
            }
        })
}

/// Whether a load failed because the kernel refuses `bpf_get_socket_cookie` in tracing programs
/// (before 5.12).
fn refuses_cookie_helper(e: &anyhow::Error) -> bool {
    format!("{e:#}").contains("bpf_get_socket_cookie")
}

/// Runs `load(false)` (load and attach, cookies from the helper); where the kernel refuses the
/// cookie helper in tracing programs (before 5.12), again as `load(true)`, with
/// `Config::cookie_by_read`. The second value: whether cookies are read from the socket.
pub fn load_reading_cookies<T>(mut load: impl FnMut(bool) -> Result<T>) -> Result<(T, bool)> {
    match load(false) {
        Err(e) if refuses_cookie_helper(&e) => load(true).map(|t| (t, true)),
        r => r.map(|t| (t, false)),
    }
}

/// What a user is told when cookies are read from the socket.
pub const COOKIE_BY_READ_NOTE: &str = "this kernel refuses bpf_get_socket_cookie in tracing programs (before 5.12): cookies are read from the socket, null until something asked for one (SO_COOKIE, ss, sock_diag)";

/// Harmless where it fails (5.11+ charges BPF memory to the cgroup instead).
fn raise_memlock() -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One BPF instruction, as the ELF holds it (8 bytes, little-endian).
    #[derive(Clone, Copy)]
    struct Insn {
        code: u8,
        dst: u8,
        src: u8,
        off: i16,
        imm: i32,
    }

    fn insns(bytes: &[u8]) -> Vec<Insn> {
        bytes
            .chunks_exact(8)
            .map(|b| Insn {
                code: b[0],
                dst: b[1] & 0x0f,
                src: b[1] >> 4,
                off: i16::from_le_bytes([b[2], b[3]]),
                imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            })
            .collect()
    }

    /// A BPF-to-BPF call (`call` with the pseudo-call source register).
    fn is_call(i: &Insn) -> bool {
        i.code == 0x85 && i.src == 1
    }

    /// The deepest byte below the frame pointer (r10) a function reaches: its loads and stores
    /// there, and the pointers it makes from r10 to hand a helper a buffer (`r1 = r10; r1 +=
    /// -16`) or to address through. What the verifier counts as the function's stack depth,
    /// read off the instructions in order (a bound: every path at once).
    fn stack_depth(insns: &[Insn]) -> u32 {
        const R10: u8 = 10;
        // registers holding r10 + offset
        let mut at: [Option<i32>; 11] = [None; 11];
        let mut deepest = 0i32;
        for i in insns {
            let class = i.code & 0x07;
            let base = |r: u8, at: &[Option<i32>; 11]| {
                if r == R10 {
                    Some(0)
                } else {
                    at.get(r as usize).copied().flatten()
                }
            };
            let reached = match class {
                // LDX: dst = *(src + off)
                0x01 => base(i.src, &at).map(|b| b + i.off as i32),
                // ST, STX: *(dst + off) = ...
                0x02 | 0x03 => base(i.dst, &at).map(|b| b + i.off as i32),
                _ => None,
            };
            let dst = i.dst as usize;
            match i.code {
                // mov64 dst, src (register): a copy of r10 or of a pointer made from it
                0xbf => at[dst] = base(i.src, &at),
                // add64 dst, imm
                0x07 => at[dst] = at[dst].map(|b| b + i.imm),
                // a call clobbers r0-r5
                0x85 => at[..6].fill(None),
                // any other write to a register forgets what it held
                _ if matches!(class, 0x00 | 0x01 | 0x04 | 0x07) && dst < 10 => at[dst] = None,
                _ => {}
            }
            let made = (i.code == 0x07).then_some(at[dst]).flatten();
            for off in reached.into_iter().chain(made) {
                deepest = deepest.max(-off);
            }
        }
        deepest.max(0) as u32
    }

    /// A function of a BPF object: a program (its section named for its hook) or a function
    /// programs call (in `.text`), its instructions and the functions it calls.
    struct Function {
        name: String,
        program: bool,
        code: Vec<Insn>,
        calls: Vec<(usize, u64)>,
    }

    /// Each function by section and offset. A call to another section goes through a relocation
    /// (a function's symbol, or the section's with the offset in the instruction), one within
    /// its section is relative to the next instruction.
    type Functions = std::collections::BTreeMap<(usize, u64), Function>;

    fn functions(elf: &[u8]) -> Functions {
        use object::{
            Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionKind, SymbolKind,
        };
        let file = object::File::parse(elf).expect("the embedded object parses");
        let mut out = Functions::new();
        for sym in file.symbols() {
            let (Some(si), SymbolKind::Text) = (sym.section_index(), sym.kind()) else {
                continue;
            };
            let section = file.section_by_index(si).unwrap();
            if section.kind() != SectionKind::Text || sym.size() == 0 {
                continue;
            }
            let data = section.data().unwrap();
            let (start, end) = (
                sym.address() as usize,
                (sym.address() + sym.size()) as usize,
            );
            let code = insns(&data[start..end]);
            let relocs: std::collections::HashMap<u64, _> = section.relocations().collect();
            let mut calls = Vec::new();
            for (k, i) in code.iter().enumerate().filter(|(_, i)| is_call(i)) {
                let at = start as u64 + k as u64 * 8;
                let callee = match relocs.get(&at).map(|r| r.target()) {
                    Some(RelocationTarget::Symbol(t)) => {
                        let t = file.symbol_by_index(t).unwrap();
                        let base = t.address();
                        let addr = if t.kind() == SymbolKind::Section {
                            base.wrapping_add(((i.imm as i64 + 1) * 8) as u64)
                        } else {
                            base
                        };
                        (t.section_index().unwrap().0, addr)
                    }
                    _ => (si.0, (at as i64 + (i.imm as i64 + 1) * 8) as u64),
                };
                calls.push(callee);
            }
            let function = Function {
                name: sym.name().unwrap_or("?").to_string(),
                program: section.name() != Ok(".text"),
                code,
                calls,
            };
            out.insert((si.0, sym.address()), function);
        }
        out
    }

    /// A function's stack with the deepest chain of calls under it, each frame rounded up to
    /// `unit` bytes as the verifier rounds it.
    fn chain_depth(f: &Functions, key: (usize, u64), unit: u32) -> u32 {
        let g = f
            .get(&key)
            .unwrap_or_else(|| panic!("a call to {key:?}: no function there"));
        assert!(!g.calls.contains(&key), "{} calls itself", g.name);
        let own = stack_depth(&g.code).max(1).div_ceil(unit) * unit;
        let below = g.calls.iter().map(|c| chain_depth(f, *c, unit)).max();
        own + below.unwrap_or(0)
    }

    /// Every program of the kernel side fits the verifier's 512-byte stack with room to spare,
    /// counted as the strictest verifier counts it: each frame rounded up to 32 bytes (the
    /// interpreter's unit; a JIT rounds to 16), along the deepest chain of calls. The kernel
    /// 6.18.44-fc-v1252 refused `tcp_probe` built for `--pid` with `--ebpf-log debug` at 528
    /// bytes where the kernel before it had loaded it: a change that eats the headroom fails
    /// here, whatever kernel runs the tests.
    #[test]
    fn every_program_fits_the_verifier_stack_with_room_to_spare() {
        const LIMIT: u32 = 512;
        const HEADROOM: u32 = 32;
        assert!(
            !EMBEDDED.0.is_empty(),
            "built without the kernel side: `cargo xtask build` first"
        );
        let f = functions(&EMBEDDED.0);
        let mut worst = (0, String::new());
        for (key, g) in f.iter().filter(|(_, g)| g.program) {
            let (strict, jit) = (chain_depth(&f, *key, 32), chain_depth(&f, *key, 16));
            eprintln!("{}: {strict} B ({jit} B where a JIT rounds to 16)", g.name);
            if strict > worst.0 {
                worst = (strict, g.name.clone());
            }
        }
        assert!(worst.0 > 0, "no program found in the object");
        assert!(
            worst.0 + HEADROOM <= LIMIT,
            "{} reaches {} B of the verifier's {LIMIT} (wanted {HEADROOM} B to spare): move state off its stack (a per-CPU slot, as `track::fresh_entry` does)",
            worst.1,
            worst.0
        );
    }

    /// The stack reader on hand-made instructions: a store at r10-16, a helper's buffer made at
    /// r10-40 through r1, an address made from a copy; a register overwritten forgets r10.
    #[test]
    fn stack_depth_reads_stores_and_pointers() {
        let insn = |code: u8, dst: u8, src: u8, off: i16, imm: i32| Insn {
            code,
            dst,
            src,
            off,
            imm,
        };
        // *(u64 *)(r10 - 16) = r1
        assert_eq!(stack_depth(&[insn(0x7b, 10, 1, -16, 0)]), 16);
        // r1 = r10; r1 += -40
        assert_eq!(
            stack_depth(&[insn(0xbf, 1, 10, 0, 0), insn(0x07, 1, 0, 0, -40)]),
            40
        );
        // r2 = r10; r2 += -8; r3 = r2; r0 = *(u32 *)(r3 - 64)
        assert_eq!(
            stack_depth(&[
                insn(0xbf, 2, 10, 0, 0),
                insn(0x07, 2, 0, 0, -8),
                insn(0xbf, 3, 2, 0, 0),
                insn(0x61, 0, 3, -64, 0),
            ]),
            72
        );
        // r1 = r10; r1 = 5 (mov64 imm); *(u64 *)(r1 - 100) = r2: not the stack
        assert_eq!(
            stack_depth(&[
                insn(0xbf, 1, 10, 0, 0),
                insn(0xb7, 1, 0, 0, 5),
                insn(0x7b, 1, 2, -100, 0),
            ]),
            0
        );
        assert!(is_call(&insn(0x85, 0, 1, 0, 3)));
        assert!(!is_call(&insn(0x85, 0, 0, 0, 1)));
        // the instruction bytes: code, registers (dst low, src high), offset, immediate
        let i = insns(&[0x7b, 0x1a, 0xf0, 0xff, 0, 0, 0, 0])[0];
        assert_eq!((i.code, i.dst, i.src, i.off), (0x7b, 10, 1, -16));
    }

    /// Root with every capability, or CAP_BPF and CAP_PERFMON alone, loads; root in a container
    /// that dropped them is told which to add, not a map's name.
    #[test]
    fn privileges_are_the_capabilities_not_the_uid() {
        let all = u64::MAX >> 23;
        assert_eq!(missing_caps(Some(all), true), None);
        assert_eq!(missing_caps(Some((1 << 39) | (1 << 38)), false), None);
        // podman's default set for root: no SYS_ADMIN, BPF or PERFMON
        let dropped = missing_caps(Some(0x8004_05fb), true).unwrap();
        assert!(
            dropped.contains("--cap-add BPF --cap-add PERFMON"),
            "{dropped}"
        );
        assert!(dropped.contains("0x800405fb"), "{dropped}");
        let user = missing_caps(Some(0), false).unwrap();
        assert!(user.contains("sudo"), "{user}");
        assert_eq!(missing_caps(None, true), None);
    }
}
