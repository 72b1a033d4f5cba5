//! The observers a traced run is measured with: the tracer itself, the empty program on the same
//! hook (the floor), bpftrace reading the same fields, and `ss -tinm` polling.
use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use tcpwin_lab::{harness::Tracer, pair::Pair};

use crate::{measure::wait_with_output_rusage, Env, Mode, FLOOR_PROG, PORT};

/// A running observer for one traced run.
pub enum Observer {
    None,
    /// held for its attached program; dropping it detaches
    Empty(Box<aya::Ebpf>),
    Tracer(Tracer),
    /// bpftrace and the rest of its stdout (read on a thread), for its changes count
    Bpftrace(Child, mpsc::Receiver<String>),
    Ss {
        stop: Arc<AtomicBool>,
        handle: std::thread::JoinHandle<(u64, f64)>,
    },
    /// `tcpwin-trace exporter`, listening (SIGTERM stops it)
    Exporter(tcpwin_lab::harness::Proc),
}

/// Starts `tcpwin-trace exporter` on a free port with `args`; returns once it listens, with
/// the port.
pub fn start_exporter(env: &Env, args: &[&str]) -> Result<(tcpwin_lab::harness::Proc, u16)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = tcpwin_lab::harness::Proc(
        Command::new(&env.tracer)
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .stderr(Stdio::null())
            .spawn()
            .context("starting the exporter")?,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("the exporter did not listen within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((child, port))
}

const BPFTRACE_SCRIPT: &str = r#"
tracepoint:tcp:tcp_probe /args->sport == PORT || args->dport == PORT/ {
  $tp = (struct tcp_sock *)args->skaddr;
  $v = ((uint64)$tp->scaling_ratio << 56) | ((uint64)$tp->window_clamp << 24) ^ (uint64)$tp->rcv_ssthresh;
  if (@last[args->sock_cookie] != $v) { @changes = count(); @last[args->sock_cookie] = $v; }
}
tracepoint:tcp:tcp_rcv_space_adjust /args->sport == PORT || args->dport == PORT/ {
  $tp = (struct tcp_sock *)args->skaddr;
  $v = ((uint64)$tp->scaling_ratio << 56) | ((uint64)$tp->window_clamp << 24) ^ (uint64)$tp->rcv_ssthresh;
  if (@last[args->sock_cookie] != $v) { @changes = count(); @last[args->sock_cookie] = $v; }
}
END { clear(@last); }
"#;

/// bpftrace's `tcplife` (Brendan Gregg's, as Debian ships it in /usr/sbin/tcplife.bt), on the
/// tracepoint BCC's tcplife uses since Linux 4.16 (`sock:inet_sock_set_state`) where Debian's
/// script attaches a kprobe (`tcp_set_state`), which kernels without CONFIG_KPROBES refuse: the
/// same three maps, the same line per closed connection. The cost a tool that reports each
/// short connection once pays.
const TCPLIFE_SCRIPT: &str = r#"
tracepoint:sock:inet_sock_set_state /args->protocol == 6/ {
  $sk = args->skaddr;
  $newstate = args->newstate;
  if ($newstate < 4 && @birth[$sk] == 0) { @birth[$sk] = nsecs; }
  if ($newstate == 2 || $newstate == 9) { @skpid[$sk] = pid; @skcomm[$sk] = comm; }
  if ($newstate == 7 && @birth[$sk]) {
    $delta_ms = (nsecs - @birth[$sk]) / 1e6;
    $tp = (struct tcp_sock *)$sk;
    $pid = @skpid[$sk];
    $comm = @skcomm[$sk];
    if ($comm == "") { $pid = pid; $comm = comm; }
    printf("%-5d %-10.10s %-15s %-5d %-15s %-5d ", $pid, $comm,
      ntop(args->saddr), args->sport, ntop(args->daddr), args->dport);
    printf("%5d %5d %d\n", $tp->bytes_acked >> 10, $tp->bytes_received >> 10, $delta_ms);
    delete(@birth[$sk]);
    delete(@skpid[$sk]);
    delete(@skcomm[$sk]);
  }
}
END { clear(@birth); clear(@skpid); clear(@skcomm); }
"#;

fn ensure_tracefs() {
    if !std::path::Path::new("/sys/kernel/tracing/events").exists() {
        let _ = Command::new("mount")
            .args(["-t", "tracefs", "tracefs", "/sys/kernel/tracing"])
            .status();
    }
}

/// bpftrace running `script` (the fields' changes, or tcplife), once attached.
pub fn start_bpftrace(tcplife: bool) -> Result<(Child, mpsc::Receiver<String>)> {
    ensure_tracefs();
    let script = if tcplife {
        TCPLIFE_SCRIPT.to_string()
    } else {
        BPFTRACE_SCRIPT.replace("PORT", &PORT.to_string())
    };
    let mut child = Command::new("bpftrace")
        .args(["-e", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("bpftrace (apt-get install bpftrace)")?;
    // wait for "Attaching N probes..."
    let so = child.stdout.take().expect("piped");
    let mut r = BufReader::new(so);
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            bail!("bpftrace exited before attaching");
        }
        if line.contains("Attaching") {
            break;
        }
    }
    // keep the rest of stdout for the changes count
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut r, &mut s);
        let _ = tx.send(s);
    });
    Ok((child, rx))
}

/// Polls `ss -tinm` in the receiver's namespace every 100 ms; returns (changes of rcv_ssthresh
/// seen, CPU seconds the polling cost).
fn start_ss(ns: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, f64)> {
    std::thread::spawn(move || {
        let mut last: HashMap<String, String> = HashMap::new();
        let (mut changes, mut cpu) = (0u64, 0.0f64);
        while !stop.load(Ordering::SeqCst) {
            let t0 = Instant::now();
            let Ok(child) = Pair::exec(&ns, "ss")
                .args(["-tinmH", "state", "established"])
                .stdout(Stdio::piped())
                .spawn()
            else {
                break;
            };
            let pid = child.id() as i32;
            let (text, child_cpu, _) = wait_with_output_rusage(child, pid);
            cpu += child_cpu;
            let mut key = String::new();
            for l in text.lines() {
                if !l.starts_with(char::is_whitespace) {
                    key = l
                        .split_whitespace()
                        .skip(2)
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" ");
                    continue;
                }
                if let Some(v) = l
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("rcv_ssthresh:"))
                {
                    if last.get(&key).map(String::as_str) != Some(v) {
                        changes += 1;
                        last.insert(key.clone(), v.to_string());
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100).saturating_sub(t0.elapsed()));
        }
        (changes, cpu)
    })
}

/// Loads the object and attaches only its empty `calib_tcp_probe` program.
pub fn load_empty(obj: &Path) -> Result<aya::Ebpf> {
    load_empties(obj, &[(FLOOR_PROG, "tcp_probe")])
}

/// The empty programs on every hook the tracer attaches (tracepoint backend).
pub fn load_empty_all(obj: &Path) -> Result<aya::Ebpf> {
    load_empties(
        obj,
        &[
            (FLOOR_PROG, "tcp_probe"),
            ("calib_set_state", "inet_sock_set_state"),
            ("calib_destroy", "tcp_destroy_sock"),
            ("calib_space_adj", "tcp_rcv_space_adjust"),
        ],
    )
}

fn load_empties(obj: &Path, progs: &[(&str, &str)]) -> Result<aya::Ebpf> {
    let btf = aya::Btf::from_sys_fs().context("kernel BTF")?;
    let mut bpf = aya::EbpfLoader::new()
        .btf(Some(&btf))
        .load_file(obj)
        .with_context(|| format!("loading the eBPF object {}", obj.display()))?;
    for (prog, tp) in progs {
        let p: &mut aya::programs::BtfTracePoint = bpf
            .program_mut(prog)
            .with_context(|| format!("{prog} missing from the object"))?
            .try_into()?;
        p.load(tp, &btf)?;
        p.attach()?;
    }
    Ok(bpf)
}

pub fn start_observer(mode: Mode, pair: &Pair, env: &Env) -> Result<Observer> {
    Ok(match mode {
        Mode::Untraced => Observer::None,
        Mode::Empty => Observer::Empty(Box::new(load_empty(&env.obj)?)),
        Mode::EmptyAll => Observer::Empty(Box::new(load_empty_all(&env.obj)?)),
        Mode::Default => Observer::Tracer(Tracer::start(
            &env.tracer,
            &[
                "--netns",
                "all",
                "--port",
                &PORT.to_string(),
                "-q",
                "--json",
            ],
            Stdio::piped(),
            Duration::from_secs(60),
        )?),
        Mode::Filtered => Observer::Tracer(Tracer::start(
            &env.tracer,
            &[
                "--netns",
                "all",
                "--port",
                &(PORT + 1).to_string(),
                "-q",
                "--json",
            ],
            Stdio::piped(),
            Duration::from_secs(60),
        )?),
        Mode::OtherPid => {
            let pid = env
                .idle_pid
                .context("other-pid runs follow the idle process the churn table starts")?;
            Observer::Tracer(Tracer::start(
                &env.tracer,
                &["--netns", "all", "--pid", &pid.to_string(), "-q", "--json"],
                Stdio::piped(),
                Duration::from_secs(60),
            )?)
        }
        Mode::Bpftrace | Mode::Tcplife => {
            let (child, out) = start_bpftrace(mode == Mode::Tcplife)?;
            Observer::Bpftrace(child, out)
        }
        Mode::Exporter => Observer::Exporter(start_exporter(env, &[])?.0),
        Mode::SsPoll => {
            let stop = Arc::new(AtomicBool::new(false));
            let handle = start_ss(pair.b.clone(), stop.clone());
            Observer::Ss { stop, handle }
        }
    })
}
