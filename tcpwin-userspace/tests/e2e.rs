//! End-to-end: the tracer against transfers it does not generate itself, in two network
//! namespaces joined by veth (created and always removed by each test). Every number compared
//! comes from the kernel through another door: getsockopt(TCP_WINDOW_CLAMP), TCP_INFO and
//! SO_COOKIE read by the receiving process, the sysctls the test pinned, and the kernel's own
//! formulas. These tests need root and a kernel that accepts BPF tracing programs: they fail,
//! never skip, when that is missing.
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::Stdio,
    time::Duration,
};

use tcpwin_common::formula::{self, win_from_space};
use tcpwin_lab::rows::EndpointReport;
use tcpwin_lab::{
    endpoints::ground_truth,
    harness::{wait_bounded, Proc, Tracer, Transfer},
    pair::{in_netns, Pair},
};
use tcpwin_model::{
    kind::EventKind,
    schema::{parse_line, EventLine, Family, Line, SummaryLine},
};

const PINNED: u64 = 1 << 20;

fn exe() -> PathBuf {
    PathBuf::from(tcpwin_lab::harness::bin_exe(
        "tcpwin-trace",
        env!("CARGO_BIN_EXE_tcpwin-trace"),
    ))
}

fn require_root() {
    tcpwin_lab::harness::tests_need_root("END-TO-END eBPF TESTS");
}

fn pair(tag: &str, mtu: u32) -> Pair {
    require_root();
    Pair::create(&format!("tcpwt-{tag}-{}", std::process::id()), mtu).expect("creating namespaces")
}

fn start_tracer(args: &[&str]) -> Tracer {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    Tracer::start(&exe(), &all, Stdio::piped(), Duration::from_secs(60)).expect("tracer starts")
}

/// Every line is an event or the summary, with every key of the schema (null where absent)
/// and no other.
fn parse_complete(l: &str) -> Line {
    let raw: serde_json::Value =
        serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
    let line = parse_line(l).unwrap_or_else(|e| panic!("{e:#}"));
    let back = match &line {
        Line::Event(e) => serde_json::to_value(e),
        Line::Verdict(v) => serde_json::to_value(v),
        Line::Summary(s) => serde_json::to_value(s),
    }
    .unwrap();
    let keys = |v: &serde_json::Value| {
        v.as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(keys(&raw), keys(&back), "keys of {l}");
    line
}

/// Stops the tracer and returns (events, summary).
fn finish(t: Tracer) -> (Vec<EventLine>, SummaryLine) {
    let (status, out, stderr) = t.stop(Duration::from_secs(30)).expect("tracer stops");
    assert!(
        status.success(),
        "tracer failed: {status}\n{}",
        stderr.join("\n")
    );
    let mut events = Vec::new();
    let mut summary = None;
    for l in out.lines() {
        assert!(summary.is_none(), "a line after the summary: {l}");
        match parse_complete(l) {
            Line::Event(e) => events.push(*e),
            Line::Verdict(_) => {}
            Line::Summary(s) => summary = Some(*s),
        }
    }
    let summary = summary.expect("a summary line");
    let missed = summary.counters.hook_runs_missed;
    if missed != 0 {
        eprintln!("note: the kernel skipped {missed} hook runs in this trace (recursion)");
    }
    assert_eq!(
        summary.events_lost,
        0,
        "events lost: {summary:?}\n{}",
        stderr.join("\n")
    );
    (events, summary)
}

fn of_cookie(events: &[EventLine], cookie: u64) -> Vec<EventLine> {
    events
        .iter()
        .filter(|e| e.id.cookie == Some(cookie))
        .cloned()
        .collect()
}

fn transfer<'a>(pair: &'a Pair, port: u16, conns: u32, ipv6: bool) -> Transfer<'a> {
    Transfer {
        exe: exe(),
        pair,
        port,
        bytes: 16 << 20,
        conns,
        ipv6,
        rcvbuf: None,
        timeout: Duration::from_secs(60),
        send: Default::default(),
    }
}

/// A transfer in fresh namespaces traced with `--port`: (receiver's ground truth, events, summary).
fn traced_transfer(
    tag: &str,
    port: u16,
    conns: u32,
    ipv6: bool,
) -> (Vec<EndpointReport>, Vec<EventLine>, SummaryLine) {
    let p = pair(tag, 1500);
    let tracer = start_tracer(&["--netns", "all", "--port", &port.to_string()]);
    let truths = transfer(&p, port, conns, ipv6).run().expect("transfer");
    std::thread::sleep(Duration::from_millis(300));
    let (events, summary) = finish(tracer);
    (truths, events, summary)
}

/// The last values the tracer reported for a socket equal what its owner reads itself.
fn assert_last_values(mine: &[EventLine], truth: &EndpointReport) {
    let last = mine.last().expect("events for the socket");
    for (k, mine, t) in [
        ("window_clamp", last.window_clamp, truth.window_clamp),
        ("rcv_ssthresh", last.rcv_ssthresh, truth.rcv_ssthresh),
        ("rcvq_space", last.rcvq_space, truth.rcv_space),
    ] {
        assert_eq!(mine, t, "{k}: {last:?} vs getsockopt/TCP_INFO {truth:?}");
    }
}

/// The last values the tracer reported for each receiving socket equal what its owner reads.
/// `summary` goes into failure messages: its hook hits and counters say whether a hook ran at all.
fn assert_final_values_match(
    events: &[EventLine],
    truths: &[EndpointReport],
    summary: &SummaryLine,
) {
    assert!(!truths.is_empty());
    for t in truths {
        let mine = of_cookie(events, t.cookie);
        assert!(!mine.is_empty(), "no events for receiver socket {t:?}");
        assert!(
            mine.iter().any(|e| e.event == EventKind::Init),
            "no init event for {t:?}: {mine:?}\nhook hits {:?}, counters {:?}",
            summary.hook_hits,
            summary.counters
        );
        assert!(
            mine.iter().any(|e| e.event == EventKind::Ratio),
            "no ratio event for {t:?}"
        );
        assert_last_values(&mine, t);
        let init = mine.iter().find(|e| e.event == EventKind::Init).unwrap();
        assert_eq!(
            init.init.as_ref().map(|i| i.rcv_wscale),
            Some(t.rcv_wscale),
            "rcv_wscale: {init:?} vs tcp_info {t:?}"
        );
    }
}

#[test]
fn final_values_match_getsockopt_and_json_is_complete() {
    let port = 5311;
    let (truths, events, summary) = traced_transfer("final", port, 3, false);
    assert_eq!(truths.len(), 3);
    assert_final_values_match(&events, &truths, &summary);
    for e in &events {
        assert!(
            e.id.lport == port || e.id.rport == port,
            "port filter leaked: {e:?}"
        );
        // kind-specific parts present exactly on their kinds (key completeness: parse_complete)
        assert_eq!(e.cause.is_some(), e.event == EventKind::Ratio, "{e:?}");
        assert_eq!(e.init.is_some(), e.event == EventKind::Init, "{e:?}");
        assert_eq!(e.prev.is_some(), e.event.has_prev(), "{e:?}");
    }
    let hist = &summary.histograms;
    assert!(
        hist.packet_ratio.keys().any(|k| k.contains("veth-b")),
        "{hist:?}"
    );
    assert!(hist.scaling_ratio.count >= 3, "{hist:?}");
}

/// Rounds of the IPv6 final-values case in one run (the case where about one run in fifteen
/// used to end with the last rcv_ssthresh behind the kernel's).
const IPV6_ROUNDS: u16 = 8;

/// State changes of one connection the set_state program must run for: the listener's LISTEN,
/// the client's SYN_SENT and both ends' ESTABLISHED.
const SET_STATE_RUNS_PER_CONN: u64 = 4;

/// Whether the set_state program ran fewer times than the handshake fires the tracepoint: a
/// receiver without an init event is then the kernel not running the program (it counts each
/// LISTEN, SYN_SENT and ESTABLISHED change before anything can stop it), not the tracer
/// dropping what it was given.
fn set_state_runs_short(summary: &SummaryLine, conns: u32) -> bool {
    let ran = summary
        .hook_hits
        .get("sock:inet_sock_set_state")
        .copied()
        .unwrap_or(0);
    ran < SET_STATE_RUNS_PER_CONN * conns as u64
}

#[test]
fn ipv6_final_values_match_getsockopt() {
    let mut reruns = 0;
    for round in 0..IPV6_ROUNDS {
        let (mut truths, mut events, mut summary) =
            traced_transfer("v6", 5312 + 100 * round, 1, true);
        let no_init = |events: &[EventLine], truths: &[EndpointReport]| {
            truths.iter().any(|t| {
                !of_cookie(events, t.cookie)
                    .iter()
                    .any(|e| e.event == EventKind::Init)
            })
        };
        // Seen about once in 300 rounds on a 2-vCPU VM: the program ran 2 of the 4 times (no
        // recursion miss counted) and neither end's ESTABLISHED reached it.
        // Such a round is said and run again once; a second one in the run fails.
        if no_init(&events, &truths) && set_state_runs_short(&summary, 1) && reruns == 0 {
            reruns += 1;
            eprintln!(
                "RERUN round {round}: the kernel ran inet_sock_set_state {:?} times for one connection (4 expected), so no init could be reported; counters {:?}",
                summary.hook_hits.get("sock:inet_sock_set_state"),
                summary.counters
            );
            (truths, events, summary) = traced_transfer("v6", 5362 + 100 * round, 1, true);
        }
        assert_final_values_match(&events, &truths, &summary);
        let mine = of_cookie(&events, truths[0].cookie);
        assert!(mine.iter().all(|e| e.family == Family::Ipv6), "{mine:?}");
        assert_eq!(mine[0].id.laddr.unwrap().to_string(), "fd00:248::2");
    }
}

/// With the receive buffer pinned at 1 MiB: window_clamp == 1 MiB * ratio >> 8 (the kernel's
/// tcp_win_from_space), and the ratio is the reported packet's (len << 8) / truesize (the rule in
/// tcp_measure_rcv_mss). GRO on gives bigger packets and a higher ratio than everything off.
#[test]
fn pinned_buffer_ratio_identities_gro_off_and_on() {
    let p = pair("pin", 1500);
    p.pin_receiver_buffer(PINNED as u32).unwrap();
    let port = 5313;
    let mut settled = Vec::new();
    for gro in [false, true] {
        p.set_offloads(false, gro).unwrap();
        let tracer = start_tracer(&["--netns", "all", "--port", &port.to_string()]);
        let truths = transfer(&p, port, 1, false).run().expect("transfer");
        std::thread::sleep(Duration::from_millis(300));
        let (events, _) = finish(tracer);
        let t = &truths[0];
        let mine = of_cookie(&events, t.cookie);
        let ratios: Vec<&EventLine> = mine
            .iter()
            .filter(|e| e.event == EventKind::Ratio)
            .collect();
        assert!(!ratios.is_empty(), "gro={gro}: no ratio event: {mine:?}");
        for r in &ratios {
            let ratio = r.scaling_ratio.expect("scaling_ratio on 6.18");
            assert_eq!(r.sk_rcvbuf as u64, PINNED, "{r:?}");
            assert_eq!(
                r.window_clamp as u64,
                win_from_space(PINNED, ratio),
                "gro={gro}: {r:?}"
            );
            let c = r.cause.as_ref().expect("a ratio event names its packet");
            let (len, truesize) = (c.skb_len.unwrap(), c.skb_truesize.unwrap());
            assert_eq!(
                formula::ratio(len, truesize),
                Some(ratio as u64),
                "gro={gro}: {r:?}"
            );
            // GSO fields, when read: a coalesced packet is ceil(len / gso_size) segments, and
            // the kernel set rcv_mss from its gso_size (min(len, advmss)). With GRO off a packet
            // can still be coalesced: tcp_add_backlog merges segments that arrive while the
            // reader holds the socket lock and sets gso_size/gso_segs on the merged skb. Those
            // segments were wire-sized, so GRO off never shows a gso_size above the MSS.
            if let (Some(size), Some(segs)) = (c.gso_size, c.gso_segs) {
                if size > 0 {
                    assert_eq!(segs as u32, len.div_ceil(size as u32), "{r:?}");
                    assert_eq!(r.rcv_mss, (size as u32).min(r.advmss), "{r:?}");
                    if !gro {
                        assert!(size as u32 <= r.advmss, "GRO off, size above MSS: {r:?}");
                    }
                }
            }
        }
        assert!(
            ratios
                .iter()
                .any(|r| r.cause.as_ref().is_some_and(|c| c.gso_size.is_some())),
            "gro={gro}: no ratio event with its packet's GSO fields: {ratios:?}"
        );
        // independent: the receiver's own TCP_WINDOW_CLAMP follows the same formula with the
        // ratio the tracer saw last
        let last_ratio = ratios.last().unwrap().scaling_ratio.unwrap();
        assert_eq!(
            t.window_clamp as u64,
            win_from_space(PINNED, last_ratio),
            "{t:?}"
        );
        assert_eq!(t.so_rcvbuf as u64, PINNED, "{t:?}");
        settled.push(last_ratio);
    }
    assert!(
        settled[1] > settled[0],
        "GRO on should raise the ratio: off={} on={}",
        settled[0],
        settled[1]
    );
}

/// `--pid` of one receiver reports all its sockets, from their first event, and none of a
/// second receiver running at the same time.
#[test]
fn pid_filter_follows_socket_ownership() {
    let p = pair("pid", 1500);
    let (p1, p2) = (5314, 5315);
    let t1 = transfer(&p, p1, 2, false);
    let t2 = transfer(&p, p2, 2, false);
    let (mut rx1, mut out1) = t1.start_receiver().unwrap();
    let (mut rx2, mut out2) = t2.start_receiver().unwrap();
    let pid1 = rx1.id().to_string();
    let tracer = start_tracer(&["--pid", &pid1]);
    t1.run_sender().unwrap();
    t2.run_sender().unwrap();
    let read_all = |out: &mut std::io::BufReader<std::process::ChildStdout>| {
        let mut s = String::new();
        std::io::Read::read_to_string(out, &mut s).unwrap();
        s.lines()
            .map(|l| serde_json::from_str::<EndpointReport>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let truths1 = read_all(&mut out1);
    let truths2 = read_all(&mut out2);
    wait_bounded(&mut rx1, Duration::from_secs(30), "receiver 1").unwrap();
    wait_bounded(&mut rx2, Duration::from_secs(30), "receiver 2").unwrap();
    let (events, summary) = finish(tracer);
    assert_eq!(truths1.len(), 2);
    assert_eq!(truths2.len(), 2);
    assert_final_values_match(&events, &truths1, &summary);
    for t in &truths2 {
        assert!(
            of_cookie(&events, t.cookie).is_empty(),
            "second receiver leaked: {t:?}"
        );
    }
    for e in &events {
        assert_eq!(e.id.lport, p1, "only the traced receiver's sockets: {e:?}");
        assert_eq!(e.pid.map(|p| p.to_string()), Some(pid1.clone()), "{e:?}");
    }
    assert!(summary.counters.filtered_hits > 0, "{summary:?}");
}

/// `--pid` with `--port`: a process that reads from connections on two ports is traced on the
/// one port asked for, and its reads on the other (process context, where the current task is
/// the traced process) do not bring that connection in.
#[test]
fn pid_and_port_filters_hold_together() {
    let p = pair("pidport", 1500);
    let (p1, p2) = (5330, 5331);
    // one receiver process, a thread per port reading its connection to the end
    let script = format!(
        "import socket, threading\n\
         def serve(port):\n\
         \x20   l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         \x20   l.bind(('0.0.0.0', port)); l.listen()\n\
         \x20   c, _ = l.accept()\n\
         \x20   while c.recv(65536): pass\n\
         ts = [threading.Thread(target=serve, args=(q,)) for q in ({p1}, {p2})]\n\
         [t.start() for t in ts]\n\
         print('ready', flush=True)\n\
         [t.join() for t in ts]\n"
    );
    let mut rx = Proc(
        Pair::exec(&p.b, "python3")
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 (a test package)"),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(rx.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains("ready"), "receiver said: {line}");
    let tracer = start_tracer(&["--pid", &rx.id().to_string(), "--port", &p1.to_string()]);
    for port in [p1, p2] {
        let mut t = transfer(&p, port, 1, false);
        t.bytes = 4 << 20;
        t.run_sender().expect("sender");
    }
    wait_bounded(&mut rx, Duration::from_secs(30), "receiver").unwrap();
    let (events, summary) = finish(tracer);
    assert!(
        events
            .iter()
            .any(|e| e.id.lport == p1 && e.event == EventKind::Init),
        "the connection on --port is traced from its init: {events:?}"
    );
    for e in &events {
        assert!(
            e.id.lport == p1 || e.id.rport == p1,
            "only the --port connection of the traced process: {e:?}"
        );
    }
    assert!(summary.counters.filtered_hits > 0, "{summary:?}");
}

/// `--pid` of a process that connects after the trace started: its connection is caught in the
/// kernel at connect() (process context), before any /proc refresh, and reported from `init` on.
#[test]
fn pid_filter_catches_a_connection_opened_and_used_at_once() {
    let p = pair("conn", 1500);
    let port = 5316;
    let t = transfer(&p, port, 1, false);
    let (mut rx, mut rx_out) = t.start_receiver().unwrap();
    let mut sender = Proc(
        Pair::exec(&p.a, exe())
            .args([
                "transfer",
                "send",
                "--connect",
                &format!("{}:{port}", p.ip_b),
            ])
            .args([
                "--bytes",
                &(8u64 << 20).to_string(),
                "--delay-ms",
                "1500",
                "--report",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = sender.id().to_string();
    let tracer = start_tracer(&["--pid", &pid]);
    let mut out = String::new();
    std::io::Read::read_to_string(sender.stdout.as_mut().unwrap(), &mut out).unwrap();
    wait_bounded(&mut sender, Duration::from_secs(60), "sender").unwrap();
    let mut rx_text = String::new();
    std::io::Read::read_to_string(&mut rx_out, &mut rx_text).unwrap();
    wait_bounded(&mut rx, Duration::from_secs(30), "receiver").unwrap();
    let (events, _) = finish(tracer);
    let truth: EndpointReport = serde_json::from_str(out.trim()).expect("sender report");
    let mine = of_cookie(&events, truth.cookie);
    assert_eq!(
        mine.first().map(|e| e.event),
        Some(EventKind::Init),
        "{events:?}"
    );
    assert_last_values(&mine, &truth);
    let receiver: EndpointReport = serde_json::from_str(rx_text.trim()).unwrap();
    assert!(
        of_cookie(&events, receiver.cookie).is_empty(),
        "receiver is not the traced PID"
    );
    assert!(events.iter().all(|e| e.id.rport == port), "{events:?}");
}

/// `--pid` of a shell that runs five short clients, one after the other: each is a process the
/// shell forked after the trace started, and each connection opens, sends 64 KiB and closes in
/// a few milliseconds, well within the trace's 100 ms between looks at /proc. The kernel follows
/// the shell's forks (`sched:sched_process_fork`): every client's connection is traced from its
/// `init`, with the values the client's own getsockopt read. Without the fork hook a look at
/// /proc could only find a client whose connection was already open, never its `init`.
#[test]
fn pid_filter_follows_the_processes_it_forks() {
    let p = pair("fork", 1500);
    let port = 5324;
    let conns = 5;
    let t = transfer(&p, port, conns, false);
    let (mut rx, mut rx_out) = t.start_receiver().unwrap();
    let client = format!(
        "{} transfer send --connect {}:{port} --bytes 65536 --report",
        exe().to_string_lossy(),
        p.ip_b
    );
    // the shell starts its clients once the trace is attached (it waits for `go`)
    let go = std::env::temp_dir().join(format!("tcpwt-fork-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let mut shell = Proc(
        Pair::exec(&p.a, "sh")
            .args([
                "-c",
                &format!(
                    "while [ ! -e {} ]; do sleep 0.05; done; for i in $(seq {conns}); do {client}; done",
                    go.display()
                ),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = shell.id().to_string();
    let tracer = start_tracer(&["--pid", &pid]);
    std::fs::write(&go, b"").unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(shell.stdout.as_mut().unwrap(), &mut out).unwrap();
    wait_bounded(&mut shell, Duration::from_secs(60), "the shell").unwrap();
    let _ = std::fs::remove_file(&go);
    let mut rx_text = String::new();
    std::io::Read::read_to_string(&mut rx_out, &mut rx_text).unwrap();
    wait_bounded(&mut rx, Duration::from_secs(30), "receiver").unwrap();
    let (events, summary) = finish(tracer);
    let truths: Vec<EndpointReport> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a client's report"))
        .collect();
    assert_eq!(truths.len(), conns as usize, "{out}");
    assert!(
        summary.hooks.contains("sched_process_fork:tp_btf"),
        "{}",
        summary.hooks
    );
    for truth in &truths {
        let mine = of_cookie(&events, truth.cookie);
        assert_eq!(
            mine.first().map(|e| e.event),
            Some(EventKind::Init),
            "client {truth:?} not traced from its init: {events:?}"
        );
        assert_last_values(&mine, truth);
    }
    // the receiver is no process of the shell's
    for l in rx_text.lines().filter(|l| l.starts_with('{')) {
        let r: EndpointReport = serde_json::from_str(l).unwrap();
        assert!(of_cookie(&events, r.cookie).is_empty(), "receiver traced");
    }
}

/// A connection opened before the trace is found by whichever hook sees it first: the receiving
/// end by its data, the sending end by the pure ACKs it gets (which re-check a socket at most
/// every 25 jiffies and count the rest as `recheck_skipped`). Both show up while the tracer
/// runs (the reader collects on its tick; nothing waits for the end), and both report what their
/// owners read. Loopback in the test's own process, so the owners are at hand. Tracepoint backend:
/// function hooks see data packets only.
#[test]
fn connection_from_before_the_trace_is_seen_live_from_data_and_acks() {
    require_root();
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
    let port = listener.local_addr().unwrap().port();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
    let (mut server, _) = listener.accept().expect("accept");
    // the receiving end locks its buffer (SO_RCVBUF, doubled by the kernel); the sender does not
    let locked: libc::c_int = 256 << 10;
    // SAFETY: plain int option on an open socket.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&server),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &locked as *const libc::c_int as *const _,
            4,
        )
    };
    assert_eq!(rc, 0, "setsockopt(SO_RCVBUF)");
    // the packet tracepoint sees ACKs; the function hooks (fexit tcp_measure_rcv_mss) only data
    let mut tracer = start_tracer(&[
        "--netns",
        "all",
        "--port",
        &port.to_string(),
        "--backend",
        "tracepoint",
    ]);

    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        while total < 64 << 20 {
            match server.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        server
    });
    let chunk = vec![7u8; 1 << 16];
    for _ in 0..1024 {
        client.write_all(&chunk).expect("send");
    }
    let server = reader.join().expect("reader thread");
    let truths = [
        ground_truth(&server).expect("receiver's getsockopt"),
        ground_truth(&client).expect("sender's getsockopt"),
    ];
    let seen_both = |lines: &[String]| {
        truths.iter().all(|t| {
            lines.iter().any(|l| {
                matches!(parse_line(l), Ok(Line::Event(e))
                    if e.event == EventKind::Seen && e.id.cookie == Some(t.cookie))
            })
        })
    };
    let live = tracer.wait_stdout(Duration::from_secs(5), seen_both);
    drop((client, server));
    std::thread::sleep(Duration::from_millis(300));
    let (events, summary) = finish(tracer);
    assert!(
        live,
        "seen events for both ends did not arrive while tracing: {events:?}"
    );
    for t in &truths {
        let mine = of_cookie(&events, t.cookie);
        assert!(
            mine.iter().any(|e| e.event == EventKind::Close),
            "no close for {t:?}: {mine:?}"
        );
        assert_last_values(&mine, t);
        let close = mine.iter().find(|e| e.event == EventKind::Close).unwrap();
        assert_eq!(close.sk_rcvbuf, t.so_rcvbuf, "{close:?} vs {t:?}");
    }
    // SOCK_RCVBUF_LOCK, as the owners set it: on every event of the receiving end, none of the other
    for (t, want) in [(&truths[0], true), (&truths[1], false)] {
        for e in of_cookie(&events, t.cookie) {
            assert_eq!(e.rcvbuf_locked, want, "{e:?}");
        }
    }
    let sender_seen = of_cookie(&events, truths[1].cookie)
        .into_iter()
        .find(|e| e.event == EventKind::Seen)
        .unwrap();
    assert_eq!(sender_seen.hook, "tcp:tcp_probe", "{sender_seen:?}");
    assert!(
        summary.counters.recheck_skipped > 0,
        "ACKs within 25 jiffies of a check were not skipped: {summary:?}"
    );
}

/// The tracer's verdicts on a long path whose receiver has window scaling off: while the
/// transfer runs the receiving socket is judged `wscale-off` (the sender's own rate is then at
/// most 65535 B per RTT), its final verdict comes with its close, and the summary counts it.
#[test]
fn tracer_verdicts_follow_the_binding_limit() {
    use tcpwin_lab::harness::SendOpts;
    use tcpwin_model::verdict::Limit;
    require_root();
    let p = Pair::create_wan(
        &format!("tcpwt-vd-{}", std::process::id()),
        1500,
        Duration::from_millis(20),
        Some(100_000_000),
    )
    .expect("the WAN path");
    Pair::sysctl(&p.b, "net.ipv4.tcp_window_scaling", "0").unwrap();
    let port = 5317;
    let tracer = start_tracer(&["--netns", "all", "--port", &port.to_string()]);
    let t = Transfer {
        send: SendOpts {
            secs: Some(4.0),
            cc: Some("cubic".into()),
            ..Default::default()
        },
        ..transfer(&p, port, 1, false)
    };
    let (rx, tx) = t.run_both(true).expect("transfer");
    std::thread::sleep(Duration::from_millis(300));
    let (status, out, stderr) = tracer.stop(Duration::from_secs(30)).expect("tracer stops");
    assert!(status.success(), "{}", stderr.join("\n"));
    let trace = tcpwin_model::schema::parse_trace(&out).expect("the trace parses");
    let mine: Vec<_> = trace
        .verdicts
        .iter()
        .filter(|v| v.id.cookie == Some(rx[0].cookie))
        .collect();
    assert!(
        mine.iter()
            .any(|v| !v.last && v.verdict.limit == Limit::WscaleOff),
        "no live wscale-off verdict: {mine:?}"
    );
    let last = mine.last().expect("verdicts for the receiver");
    assert!(last.last, "the last verdict is the final one: {last:?}");
    assert_eq!(last.verdict.limit, Limit::WscaleOff, "{last:?}");
    assert!(
        trace
            .summary
            .verdicts
            .get(&Limit::WscaleOff)
            .copied()
            .unwrap_or(0)
            >= 1
    );
    // ground truth: the receiver's own tcp_info has no window scale, and the sender moves at
    // most 65535 B per base RTT (the window caps it; 15 % for the sender's count at the edges
    // of its steady span). How close one run comes to it follows the machine (a late delay line
    // stretches the RTT): the proof's wscale-off rows hold that over repeats; here, only that
    // the window, not the 100 Mbit/s path, set the pace
    assert_eq!(rx[0].rcv_wscale, 0);
    let expect = 65535.0 * 8.0 / (tx[0].min_rtt_us as f64 / 1e6);
    let got = tx[0].steady_bps.unwrap() as f64;
    assert!(
        got <= 1.15 * expect && got >= 0.5 * expect,
        "{got} vs {expect}"
    );
}

/// Rounds of the last-change test in one run: the flake it fixes showed about once in fifteen.
const LAST_CHANGE_ROUNDS: u16 = 20;

/// A change made after the socket's last hooked packet: the last data packets arrive while the
/// receiver has stopped reading (the window still growing: `tcp_grow_window` raises
/// `rcv_ssthresh` after `tcp:tcp_probe` fired for the packet), and the connection stays open, so
/// no hook fires again. The trace's last values for the receiving socket equal the receiver's
/// own getsockopt(TCP_WINDOW_CLAMP), TCP_INFO rcv_ssthresh and SO_RCVBUF, in every round.
#[test]
fn the_last_change_is_reported_while_the_socket_stays_open() {
    let p = pair("last", 1500);
    let mut caught = 0;
    for round in 0..LAST_CHANGE_ROUNDS {
        let port = 5600 + round;
        let tracer = start_tracer(&["--netns", "all", "--port", &port.to_string()]);
        let ip_b = p.ip_b;
        let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        // half the rounds read part of the data first (autotuning has grown the buffer), half
        // read nothing (the window grows from its initial value)
        let read_first: usize = if round % 2 == 0 { 0 } else { 256 << 10 };
        let receiver = in_netns(&p.b, move || {
            let l = TcpListener::bind((ip_b, port)).unwrap();
            let (mut s, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0;
            while got < read_first {
                got += s.read(&mut buf).unwrap();
            }
            // the rest stays unread: the last packets arrive with nobody reading
            sent_rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let truth = ground_truth(&s).unwrap();
            // the socket stays open until the trace has ended
            done_rx.recv().unwrap();
            drop(s);
            truth
        });
        let sender = in_netns(&p.a, move || {
            let mut c = loop {
                match TcpStream::connect((ip_b, port)) {
                    Ok(c) => break c,
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            };
            c.write_all(&vec![1u8; read_first + (48 << 10)]).unwrap();
            c
        });
        let client = sender.join().unwrap();
        sent_tx.send(()).unwrap();
        // the receiver reads its truth; the trace then ends with the socket open
        std::thread::sleep(Duration::from_millis(600));
        let (events, summary) = finish(tracer);
        done_tx.send(()).unwrap();
        let truth = receiver.join().unwrap();
        drop(client);
        caught += summary.counters.caught_up;
        let mine = of_cookie(&events, truth.cookie);
        let last = mine
            .last()
            .unwrap_or_else(|| panic!("round {round}: no event for the receiver"));
        assert_eq!(
            (last.window_clamp, last.rcv_ssthresh, last.sk_rcvbuf),
            (truth.window_clamp, truth.rcv_ssthresh, truth.so_rcvbuf),
            "round {round}: the trace's last values vs the receiver's own: {last:?}"
        );
    }
    eprintln!(
        "{LAST_CHANGE_ROUNDS} rounds: every last value equal to getsockopt/TCP_INFO; {caught} changes caught up by the iterator"
    );
    // the case this test exists for happened (else it proves nothing)
    assert!(
        caught > 0,
        "no round left a change for the iterator to catch up"
    );
}

/// The live text a person reads: one compact line per event (the values it is about), in time
/// order (a socket's final verdict after its close, not before), the word `verdict` as in the
/// JSON, the direction data flows (`->` on the sender, `<-` on the receiver), and the
/// rcv_ssthresh-only steps folded into one line per socket and second.
#[test]
fn text_lines_are_compact_in_time_order_with_the_direction() {
    let p = pair("text", 1500);
    let port = 5322;
    let tracer = Tracer::start(
        &exe(),
        &["--netns", "all", "--port", &port.to_string()],
        Stdio::piped(),
        Duration::from_secs(60),
    )
    .expect("tracer starts");
    let mut t = transfer(&p, port, 1, false);
    t.bytes = 0;
    t.send.secs = Some(3.5);
    t.run().expect("transfer");
    let (status, out, stderr) = tracer.stop(Duration::from_secs(30)).expect("tracer stops");
    assert!(status.success(), "{}", stderr.join("\n"));
    let lines: Vec<&str> = out
        .lines()
        .take_while(|l| !l.starts_with("summary") && !l.trim().is_empty())
        .filter(|l| {
            l.trim_start()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .collect();
    assert!(lines.len() >= 4, "{out}");
    let time = |l: &str| -> f64 { l.split_whitespace().next().unwrap().parse().unwrap() };
    let is_init = |l: &str| l.split_whitespace().nth(1) == Some("init");
    let times: Vec<f64> = lines
        .iter()
        .filter(|l| !is_init(l))
        .map(|l| time(l))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1] + 1e-6),
        "lines out of time order:\n{out}"
    );
    // an `init` leaves with its socket's first other record (or the once-a-second reading), so
    // its line may follow lines stamped after it: at most about two seconds (docs/usage.md)
    let mut latest = 0.0f64;
    for l in &lines {
        let t = time(l);
        if is_init(l) {
            assert!(
                latest - t <= 2.5,
                "an init {:.3} s late: {l}\n{out}",
                latest - t
            );
        }
        latest = latest.max(t);
    }
    // the longest event line is a ratio change with its owner and the packet that made it
    // (~255 characters); the old lines carried every field (~600)
    for l in lines.iter().filter(|l| !l.contains(" verdict ")) {
        assert!(l.len() <= 280, "{} characters: {l}", l.len());
    }
    // a verdict is one short line (the limit, rate, window, RTT, the fix; -e has the rest)
    for l in lines.iter().filter(|l| l.contains(" verdict ")) {
        assert!(l.len() <= 600, "{} characters: {l}", l.len());
        assert!(!l.contains("why:") && !l.contains("also "), "{l}");
    }
    assert!(!out.contains(" judge "), "{out}");
    let sender = format!("-> {}:{port}", p.ip_b);
    let receiver = format!("{}:{port} <-", p.ip_b);
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" verdict ") && l.contains(&sender)),
        "the sender's verdict with ->:\n{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" verdict ") && l.contains(&receiver)),
        "the receiver's verdict with <-:\n{out}"
    );
    assert!(
        lines.iter().any(|l| l.contains(" steps from ")),
        "rcv_ssthresh steps folded:\n{out}"
    );
    // each step once: a socket's rcv_ssthresh lines chain, each starting where the one before
    // ended (a step the iterator's reading and a later hook both reported was printed twice,
    // the second line starting back before the first one's end)
    let mut shown_last: std::collections::HashMap<&str, &str> = Default::default();
    for l in lines.iter().filter(|l| !l.contains(" verdict ")) {
        let words: Vec<&str> = l.split_whitespace().collect();
        let (Some(sk), Some(v)) = (
            words.iter().find(|w| w.starts_with("sk=")),
            words.iter().find_map(|w| w.strip_prefix("rcv_ssthresh=")),
        ) else {
            continue;
        };
        let (from, to) = v.split_once("->").unwrap_or(("", v));
        if let (false, Some(last)) = (from.is_empty(), shown_last.get(sk)) {
            assert_eq!(
                from, *last,
                "{sk}: a step printed twice or left out: {l}\n{out}"
            );
        }
        shown_last.insert(sk, to);
    }
    // once a socket is drawn with the way its data flows, its later lines (folded steps, an idle
    // verdict's aftermath, the close) keep that arrow
    for arrow in ["<-", "->"] {
        let mut socks: Vec<&str> = lines
            .iter()
            .filter(|l| !l.contains(" verdict ") && l.contains(&format!(" {arrow} ")))
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("sk=")))
            .collect();
        socks.dedup();
        for sk in socks {
            let mine: Vec<&&str> = lines
                .iter()
                .filter(|l| !l.contains(" verdict ") && l.split_whitespace().any(|w| w == sk))
                .collect();
            let first = mine
                .iter()
                .position(|l| l.contains(&format!(" {arrow} ")))
                .unwrap();
            for l in &mine[first..] {
                assert!(
                    l.contains(&format!(" {arrow} ")),
                    "{sk} turned from {arrow}: {l}\n{out}"
                );
            }
        }
    }
    // naming `space` shows each step, and no verdicts
    let tracer = Tracer::start(
        &exe(),
        &[
            "--netns",
            "all",
            "--port",
            &(port + 1).to_string(),
            "--events",
            "space",
        ],
        Stdio::piped(),
        Duration::from_secs(60),
    )
    .expect("tracer starts");
    let t = transfer(&p, port + 1, 1, false);
    t.run().expect("transfer");
    let (_, out, _) = tracer.stop(Duration::from_secs(30)).expect("tracer stops");
    assert!(out.lines().any(|l| l.contains(" space ")), "{out}");
    assert!(
        !out.contains(" steps from ") && !out.contains(" verdict ") && !out.contains(" init "),
        "{out}"
    );
}

/// The trace opens with one line naming the backend chosen and, in a few words, why the ones
/// before it were not (on this kernel auto falls back: that is the normal path, not an error);
/// the kernel's own words come with `--ebpf-log info`.
#[test]
fn the_trace_opens_with_the_backend_chosen() {
    require_root();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(exe())
            .args(["-d", "0.5", "-q", "--port", "1"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&[]);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.starts_with("tcpwin-trace: backend ") && first.contains(" (hooks "),
        "{err}"
    );
    assert!(
        !err.contains("Operation not permitted") && !err.contains("not used:"),
        "no error lines on the normal path:\n{err}"
    );
    if !first.starts_with("tcpwin-trace: backend fentry") {
        assert!(
            first.contains("fentry "),
            "says why fentry was not used: {first}"
        );
        let full = run(&["--ebpf-log", "info"]);
        assert!(full.contains("backend fentry not used: "), "{full}");
    }
    assert!(err.contains("tcpwin-trace: tracing "), "{err}");
}

/// Three loopback connections to one dual-stack listener: to 127.0.0.2, to 127.0.0.3 and to
/// ::1. `--addr` keeps the connections with that address at either end, the listener's side
/// (its IPv4 peers written `::ffff:127.0.0.x`) included: the client ports the events name are
/// those the connections were given (their own `local_addr()`), in the trace (filtered in the
/// kernel) and in `ss`.
#[test]
fn addr_filter_keeps_the_connections_of_that_address_at_either_end() {
    require_root();
    let port: u16 = 5391;
    let listener = TcpListener::bind(("::", port)).expect("a dual-stack listener");
    let ephemeral = |l: u16, r: u16| if l == port { r } else { l };
    for (addr, wanted) in [
        ("127.0.0.3", &[1usize][..]),
        ("127.0.0.0/8", &[0, 1][..]),
        ("::1", &[2][..]),
        ("[::ffff:127.0.0.2]", &[0][..]),
    ] {
        let tracer = start_tracer(&["--port", &port.to_string(), "--addr", addr]);
        let clients: Vec<TcpStream> = ["127.0.0.2", "127.0.0.3", "::1"]
            .iter()
            .map(|to| {
                let mut c = TcpStream::connect((*to, port)).expect("connect");
                c.write_all(&[7u8; 100_000]).unwrap();
                c
            })
            .collect();
        let accepted: Vec<TcpStream> = (0..clients.len())
            .map(|_| {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = vec![0u8; 100_000];
                s.read_exact(&mut buf).unwrap();
                s
            })
            .collect();
        let truth: std::collections::BTreeSet<u16> = wanted
            .iter()
            .map(|&i| clients[i].local_addr().unwrap().port())
            .collect();
        // ss reads them open, with the same filter
        let out = std::process::Command::new(exe())
            .args(["ss", "--json", "--port", &port.to_string(), "--addr", addr])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ss: std::collections::BTreeSet<u16> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<tcpwin_model::schema::SsLine>(l).unwrap())
            .filter(|l| l.facts.id.lport != port || l.facts.id.rport != 0)
            .map(|l| ephemeral(l.facts.id.lport, l.facts.id.rport))
            .collect();
        assert_eq!(ss, truth, "ss --addr {addr}");
        std::thread::sleep(Duration::from_millis(300));
        drop((clients, accepted));
        std::thread::sleep(Duration::from_millis(300));
        let (events, _) = finish(tracer);
        let seen: std::collections::BTreeSet<u16> = events
            .iter()
            .map(|e| ephemeral(e.id.lport, e.id.rport))
            .collect();
        let shown: Vec<String> = events.iter().map(|e| e.id.flow("<>")).collect();
        assert_eq!(seen, truth, "--addr {addr}: {shown:?}");
        // both ends of each: the client's socket and the one the listener accepted
        for p in &truth {
            let ends: std::collections::BTreeSet<u16> = events
                .iter()
                .filter(|e| ephemeral(e.id.lport, e.id.rport) == *p)
                .map(|e| e.id.lport)
                .collect();
            assert_eq!(ends, [*p, port].into(), "--addr {addr}: both ends of :{p}");
        }
    }
}
