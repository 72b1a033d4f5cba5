//! Backend probing and selection: function hooks (fentry/fexit, then kprobe/kretprobe) or
//! tracepoints, with per-hook fallbacks. Each program is loaded on its own, so a hook the kernel
//! lacks (an inlined function, a tracepoint that came later) never stops the others.
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{bail, Result};
use aya::{
    programs::{BtfTracePoint, FEntry, FExit, KProbe, ProgramError},
    Btf, Ebpf,
};

/// Which kind of kernel hooks to trace with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Auto,
    Fentry,
    Kprobe,
    Tracepoint,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Fentry => "fentry",
            Backend::Kprobe => "kprobe",
            Backend::Tracepoint => "tracepoint",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    TpBtf,
    FEntry,
    FExit,
    KProbe,
    KRetProbe,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::TpBtf => "tp_btf",
            Method::FEntry => "fentry",
            Method::FExit => "fexit",
            Method::KProbe => "kprobe",
            Method::KRetProbe => "kretprobe",
        }
    }
}

/// One program attached to one kernel target.
#[derive(Clone, Copy, Debug)]
pub struct Hook {
    pub prog: &'static str,
    pub method: Method,
    pub target: &'static str,
}

const fn h(prog: &'static str, method: Method, target: &'static str) -> Hook {
    Hook {
        prog,
        method,
        target,
    }
}

/// A job the tracer needs done, with alternatives in order of preference. All hooks of an
/// alternative attach together (entry + exit pairs).
struct Need {
    what: &'static str,
    required: bool,
    alternatives: &'static [&'static [Hook]],
}

use Method::*;

/// The initial window's arguments through kprobes: the kprobe backend's hooks, and the fentry
/// backend's fallback where fentry refuses 8-argument functions (6.1).
const KPROBE_INITIAL_WINDOW: &[Hook] = &[
    h(
        "kprobe_tcp_openreq_init_rwin",
        KProbe,
        "tcp_openreq_init_rwin",
    ),
    h(
        "kprobe_tcp_select_initial_window",
        KProbe,
        "tcp_select_initial_window",
    ),
    h(
        "kretprobe_tcp_select_initial_window",
        KRetProbe,
        "tcp_select_initial_window",
    ),
];

/// Used by every backend: the initial window at ESTABLISHED, listeners and connects of the PID,
/// and forgetting destroyed sockets.
const COMMON: &[Need] = &[
    Need {
        what: "state changes",
        required: true,
        alternatives: &[&[h("inet_sock_set_state", TpBtf, "inet_sock_set_state")]],
    },
    Need {
        what: "socket teardown",
        required: true,
        alternatives: &[&[h("tcp_destroy_sock", TpBtf, "tcp_destroy_sock")]],
    },
];

/// With `--pid`: the process's forks, followed from the fork (without it a child is found at
/// the next look at /proc, 100 ms on).
const FORKS: &[Need] = &[Need {
    what: "forks of the traced process",
    required: false,
    alternatives: &[&[h("follow_fork", TpBtf, "sched_process_fork")]],
}];

const FENTRY: &[Need] = &[
    Need {
        what: "ratio updates",
        required: true,
        alternatives: &[
            &[h("fexit_tcp_measure_rcv_mss", FExit, "tcp_measure_rcv_mss")],
            // tcp_measure_rcv_mss is static and inlined on some kernels (6.1)
            &[h("fexit_tcp_event_data_recv", FExit, "tcp_event_data_recv")],
        ],
    },
    Need {
        what: "autotuning",
        required: true,
        alternatives: &[&[
            h(
                "fentry_tcp_rcv_space_adjust",
                FEntry,
                "tcp_rcv_space_adjust",
            ),
            h("fexit_tcp_rcv_space_adjust", FExit, "tcp_rcv_space_adjust"),
        ]],
    },
    Need {
        what: "initial window arguments",
        required: false,
        alternatives: &[
            &[
                h(
                    "fentry_tcp_openreq_init_rwin",
                    FEntry,
                    "tcp_openreq_init_rwin",
                ),
                h(
                    "fexit_tcp_select_initial_window",
                    FExit,
                    "tcp_select_initial_window",
                ),
            ],
            // fentry refuses functions with more than 6 arguments on older kernels (6.1)
            KPROBE_INITIAL_WINDOW,
        ],
    },
];

const KPROBE: &[Need] = &[
    Need {
        what: "ratio updates",
        required: true,
        alternatives: &[
            &[
                h("kprobe_tcp_measure_rcv_mss", KProbe, "tcp_measure_rcv_mss"),
                h(
                    "kretprobe_tcp_measure_rcv_mss",
                    KRetProbe,
                    "tcp_measure_rcv_mss",
                ),
            ],
            &[
                h("kprobe_tcp_measure_rcv_mss", KProbe, "tcp_event_data_recv"),
                h(
                    "kretprobe_tcp_measure_rcv_mss",
                    KRetProbe,
                    "tcp_event_data_recv",
                ),
            ],
        ],
    },
    Need {
        what: "autotuning",
        required: true,
        alternatives: &[&[
            h(
                "kprobe_tcp_rcv_space_adjust",
                KProbe,
                "tcp_rcv_space_adjust",
            ),
            h(
                "kretprobe_tcp_rcv_space_adjust",
                KRetProbe,
                "tcp_rcv_space_adjust",
            ),
        ]],
    },
    Need {
        what: "initial window arguments",
        required: false,
        alternatives: &[KPROBE_INITIAL_WINDOW],
    },
];

const TRACEPOINT: &[Need] = &[
    Need {
        what: "packets (ratio updates)",
        required: true,
        alternatives: &[&[h("tcp_probe", TpBtf, "tcp_probe")]],
    },
    Need {
        what: "autotuning",
        required: true,
        alternatives: &[&[h("tp_tcp_rcv_space_adjust", TpBtf, "tcp_rcv_space_adjust")]],
    },
    Need {
        what: "buffer growth (6.16+)",
        required: false,
        alternatives: &[&[h("tp_tcp_rcvbuf_grow", TpBtf, "tcp_rcvbuf_grow")]],
    },
];

/// What got attached, and why the rest did not.
#[derive(Debug, Default)]
pub struct Attached {
    pub backend: &'static str,
    pub hooks: Vec<Hook>,
    /// backends tried before this one and why they failed
    pub rejected: Vec<(&'static str, String)>,
    /// optional jobs left undone, fallbacks taken
    pub notes: Vec<String>,
}

impl Attached {
    /// `tcp_measure_rcv_mss:fexit,...`
    pub fn hook_list(&self) -> String {
        let mut v: Vec<String> = self
            .hooks
            .iter()
            .map(|h| format!("{}:{}", h.target, h.method.name()))
            .collect();
        v.dedup();
        v.join(",")
    }
}

/// A refused backend in a few words, for the line that names the one chosen.
pub fn short_reason(why: &str) -> String {
    if why.contains("Operation not permitted") || why.contains("os error 1)") {
        "refused by this kernel (EPERM)".into()
    } else if why.contains("no kprobe support") {
        "not built into this kernel".into()
    } else if why.contains("ENOTSUPP") || why.contains("not supported") {
        "not supported by this kernel for these functions".into()
    } else if why.contains("no such function") {
        "functions inlined or missing".into()
    } else {
        let first = why.split(": ").take(2).collect::<Vec<_>>().join(": ");
        format!("failed ({first})")
    }
}

/// The kernel's words for a failed load/attach: errno and the verifier's last lines.
pub fn reason(e: &ProgramError) -> String {
    match e {
        ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            let log = verifier_log.to_string();
            if std::env::var_os("TCPWIN_VERIFIER_LOG").is_some() {
                eprintln!("{log}");
            }
            // the verifier's complaint, without its closing statistics
            let tail: Vec<&str> = log
                .lines()
                .rev()
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("processed ")
                        && !l.starts_with("stack depth ")
                        && !l.starts_with("verification time ")
                })
                .take(2)
                .collect();
            let hint = match io_error.raw_os_error() {
                Some(libc::EPERM) => {
                    " (the kernel refuses this program type: lockdown, or no CAP_BPF/CAP_PERFMON)"
                }
                Some(524) | Some(libc::EOPNOTSUPP) => {
                    " (not supported by this kernel for this function)"
                }
                Some(libc::ESRCH) | Some(libc::ENOENT) => {
                    " (no such function: inlined or not built)"
                }
                _ => "",
            };
            if tail.is_empty() {
                format!("{io_error}{hint}")
            } else {
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("{io_error}{hint}; verifier: {}", tail.join(" / "))
            }
        }
        other => {
            let mut s = other.to_string();
            let mut src = std::error::Error::source(other);
            while let Some(e) = src {
                s.push_str(": ");
                s.push_str(&e.to_string());
                src = e.source();
            }
            if s.contains("os error 524") {
                s.push_str(" (ENOTSUPP: this kernel cannot attach a trampoline to this function, e.g. more than 6 arguments before 6.x)");
            }
            if s.contains("devices/kprobe/type") {
                s.push_str(" (this kernel has no kprobe support: CONFIG_KPROBE_EVENTS is off)");
            }
            s
        }
    }
}

fn attach_one(bpf: &mut Ebpf, btf: &Btf, hook: &Hook) -> Result<(), String> {
    let prog = bpf
        .program_mut(hook.prog)
        .ok_or_else(|| format!("program {} missing from the eBPF object", hook.prog))?;
    let r: Result<(), ProgramError> = (|| {
        match hook.method {
            TpBtf => {
                let p: &mut BtfTracePoint = prog.try_into()?;
                if p.fd().is_err() {
                    p.load(hook.target, btf)?;
                }
                p.attach()?;
            }
            FEntry => {
                let p: &mut FEntry = prog.try_into()?;
                if p.fd().is_err() {
                    p.load(hook.target, btf)?;
                }
                p.attach()?;
            }
            FExit => {
                let p: &mut FExit = prog.try_into()?;
                if p.fd().is_err() {
                    p.load(hook.target, btf)?;
                }
                p.attach()?;
            }
            KProbe | KRetProbe => {
                let p: &mut KProbe = prog.try_into()?;
                if p.fd().is_err() {
                    p.load()?;
                }
                p.attach(hook.target, 0)?;
            }
        }
        Ok(())
    })();
    r.map_err(|e| format!("{} {}: {}", hook.method.name(), hook.target, reason(&e)))
}

/// Runs of the attached programs the kernel skipped: a tracing program does not nest on one CPU,
/// so a hook that fires while the same program runs there (a softirq interrupting it in process
/// context) is not run at all (`bpf_prog_info.recursion_misses`, Linux 5.12+; 0 where unknown).
/// Read before [`release`].
pub fn recursion_misses(bpf: &Ebpf, hooks: &[Hook]) -> u64 {
    recursion_misses_by_hook(bpf, hooks)
        .iter()
        .map(|(_, n)| n)
        .sum()
}

/// [`recursion_misses`] per program (each once).
pub fn recursion_misses_by_hook(bpf: &Ebpf, hooks: &[Hook]) -> Vec<(Hook, u64)> {
    let mut seen = std::collections::HashSet::new();
    hooks
        .iter()
        .filter(|h| seen.insert(h.prog))
        .filter_map(|h| {
            let fd = bpf.program(h.prog)?.fd().ok()?;
            Some((*h, prog_recursion_misses(fd.as_fd().as_raw_fd())))
        })
        .collect()
}

/// Which attached program serves each hook id (`tcpwin_common::hook`), as a log line names
/// it: `tcp_probe (tp_btf tcp:tcp_probe)`. A tracepoint's id names it `category:event`; a
/// function hook's names the function, `(entry)` / `(exit)` for a pair.
pub fn hook_programs(hooks: &[Hook]) -> Vec<(u8, String)> {
    let mut v = Vec::new();
    for (id, name) in tcpwin_common::hook::NAMES.iter().enumerate() {
        let (tracepoint, target) = match name.split_once(':') {
            Some((_, event)) => (true, event),
            None => (false, name.split('(').next().unwrap_or(name)),
        };
        let side = if name.ends_with("(exit)") {
            Some(true)
        } else if name.ends_with("(entry)") {
            Some(false)
        } else {
            None
        };
        let found = hooks.iter().find(|h| {
            h.target == target
                && (h.method == TpBtf) == tracepoint
                && side.is_none_or(|exit| matches!(h.method, FExit | KRetProbe) == exit)
        });
        if let Some(h) = found {
            v.push((id as u8, format!("{} ({} {name})", h.prog, h.method.name())));
        }
    }
    v
}

fn prog_recursion_misses(fd: std::os::fd::RawFd) -> u64 {
    /// `union bpf_attr` as `BPF_OBJ_GET_INFO_BY_FD` reads it
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    // SAFETY: bpf_prog_info is plain data, valid all-zero.
    let mut info: aya_obj::generated::bpf_prog_info = unsafe { std::mem::zeroed() };
    let attr = InfoAttr {
        bpf_fd: fd as u32,
        info_len: std::mem::size_of_val(&info) as u32,
        info: &mut info as *mut _ as u64,
    };
    // SAFETY: the kernel writes at most info_len bytes into `info`, which outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &attr as *const InfoAttr,
            std::mem::size_of::<InfoAttr>(),
        )
    };
    if rc != 0 {
        return 0;
    }
    info.recursion_misses
}

/// Unloads (and so detaches) these programs: at the end of a trace, or after a failed attempt.
pub fn release(bpf: &mut Ebpf, hooks: &[Hook]) {
    for h in hooks {
        if let Some(prog) = bpf.program_mut(h.prog) {
            let _ = match h.method {
                TpBtf => <&mut BtfTracePoint>::try_from(prog).map(|p| p.unload()),
                FEntry => <&mut FEntry>::try_from(prog).map(|p| p.unload()),
                FExit => <&mut FExit>::try_from(prog).map(|p| p.unload()),
                KProbe | KRetProbe => <&mut KProbe>::try_from(prog).map(|p| p.unload()),
            };
        }
    }
}

/// Attaches every job of one backend; on a required job that cannot be done, releases what it
/// attached and returns why.
fn attach_set(bpf: &mut Ebpf, btf: &Btf, needs: &[Need], out: &mut Attached) -> Result<(), String> {
    let mut done: Vec<Hook> = Vec::new();
    for need in needs {
        let mut errors = Vec::new();
        let mut ok = false;
        for (i, alt) in need.alternatives.iter().enumerate() {
            let mut attached_here = Vec::new();
            let mut err = None;
            for hook in alt.iter() {
                match attach_one(bpf, btf, hook) {
                    Ok(()) => attached_here.push(*hook),
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            match err {
                None => {
                    if i > 0 {
                        out.notes.push(format!(
                            "{}: fell back to {} ({})",
                            need.what,
                            alt.iter()
                                .map(|h| format!("{}:{}", h.target, h.method.name()))
                                .collect::<Vec<_>>()
                                .join("+"),
                            errors.join("; ")
                        ));
                    }
                    done.extend(attached_here);
                    ok = true;
                    break;
                }
                Some(e) => {
                    // the hook that failed may be loaded (attach refused): unload it too
                    release(bpf, &alt[..attached_here.len() + 1]);
                    errors.push(e);
                }
            }
        }
        if !ok {
            if need.required {
                release(bpf, &done);
                return Err(format!("{}: {}", need.what, errors.join("; ")));
            }
            out.notes
                .push(format!("{} not traced: {}", need.what, errors.join("; ")));
        }
    }
    out.hooks.extend(done);
    Ok(())
}

/// Attaches the common hooks (with `follow_forks`, the fork hook `--pid` uses) and the chosen
/// (or first working) backend.
pub fn attach(bpf: &mut Ebpf, btf: &Btf, wanted: Backend, follow_forks: bool) -> Result<Attached> {
    let mut out = Attached::default();
    if let Err(e) = attach_set(bpf, btf, COMMON, &mut out) {
        bail!("cannot attach the tracepoints every backend needs ({e}); tcpwin-trace needs BTF tracepoints (Linux 5.5+)");
    }
    if follow_forks {
        // optional: where it cannot attach, a note says so and /proc finds the children
        let _ = attach_set(bpf, btf, FORKS, &mut out);
    }
    let order: &[(Backend, &[Need])] = match wanted {
        Backend::Auto => &[
            (Backend::Fentry, FENTRY),
            (Backend::Kprobe, KPROBE),
            (Backend::Tracepoint, TRACEPOINT),
        ],
        Backend::Fentry => &[(Backend::Fentry, FENTRY)],
        Backend::Kprobe => &[(Backend::Kprobe, KPROBE)],
        Backend::Tracepoint => &[(Backend::Tracepoint, TRACEPOINT)],
    };
    for (backend, needs) in order {
        match attach_set(bpf, btf, needs, &mut out) {
            Ok(()) => {
                out.backend = backend.name();
                return Ok(out);
            }
            Err(e) => out.rejected.push((backend.name(), e)),
        }
    }
    let why: Vec<String> = out
        .rejected
        .iter()
        .map(|(b, e)| format!("{b}: {e}"))
        .collect();
    if wanted == Backend::Auto {
        bail!("no backend could attach: {}", why.join(" | "));
    }
    bail!(
        "--backend {} cannot attach on this kernel: {} (try --backend auto)",
        wanted.name(),
        why.join(" | ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_common::hook;

    /// A log line's hook id names the program the backend attached there.
    #[test]
    fn hook_ids_name_their_programs() {
        let tp = hook_programs(&[
            h("tcp_probe", TpBtf, "tcp_probe"),
            h("tp_tcp_rcv_space_adjust", TpBtf, "tcp_rcv_space_adjust"),
            h("inet_sock_set_state", TpBtf, "inet_sock_set_state"),
        ]);
        let name =
            |v: &[(u8, String)], id: u8| v.iter().find(|(i, _)| *i == id).map(|(_, s)| s.clone());
        assert_eq!(
            name(&tp, hook::TP_TCP_PROBE).as_deref(),
            Some("tcp_probe (tp_btf tcp:tcp_probe)")
        );
        assert_eq!(
            name(&tp, hook::TP_RCV_SPACE_ADJUST).as_deref(),
            Some("tp_tcp_rcv_space_adjust (tp_btf tcp:tcp_rcv_space_adjust)")
        );
        // a tracepoint on tcp_rcv_space_adjust is not its function hook
        assert_eq!(name(&tp, hook::FN_RCV_SPACE_ADJUST_ENTRY), None);
        let fx = hook_programs(&[
            h(
                "fentry_tcp_rcv_space_adjust",
                FEntry,
                "tcp_rcv_space_adjust",
            ),
            h("fexit_tcp_rcv_space_adjust", FExit, "tcp_rcv_space_adjust"),
        ]);
        assert_eq!(
            name(&fx, hook::FN_RCV_SPACE_ADJUST_EXIT).as_deref(),
            Some("fexit_tcp_rcv_space_adjust (fexit tcp_rcv_space_adjust(exit))")
        );
        assert_eq!(
            name(&fx, hook::FN_RCV_SPACE_ADJUST_ENTRY).as_deref(),
            Some("fentry_tcp_rcv_space_adjust (fentry tcp_rcv_space_adjust(entry))")
        );
        assert_eq!(name(&fx, hook::TP_RCV_SPACE_ADJUST), None);
    }
}
