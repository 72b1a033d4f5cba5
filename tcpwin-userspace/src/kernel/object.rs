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
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
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
