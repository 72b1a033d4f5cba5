//! `tcpwin-trace top` in a real pseudo-terminal: it draws its first frame, quits on `q` and on
//! SIGTERM with the terminal restored (raw mode off, alternate screen left, cursor shown), and
//! refuses a terminal smaller than 80x24 in one sentence, also restored. Needs root (it loads
//! the socket iterator): fails, never skips.
use std::{
    io::Write,
    os::fd::AsRawFd,
    time::{Duration, Instant},
};
use tcpwin_lab::{
    harness::{programs_named, programs_named_settled, Proc},
    pty::{pty, pty_read, Pty},
};

fn exe() -> &'static str {
    tcpwin_lab::harness::bin_exe("tcpwin-trace", env!("CARGO_BIN_EXE_tcpwin-trace"))
}

/// Killed on drop: a failing assertion leaves no `top` behind.
fn spawn_top(p: &Pty) -> Proc {
    spawn_top_with(p, &[])
}

fn spawn_top_with(p: &Pty, extra: &[&str]) -> Proc {
    let mut args = vec!["top", "--port", "1", "-i", "200"];
    args.extend_from_slice(extra);
    p.spawn(exe(), &args)
}

fn wait_for(p: &Pty, needle: &str, secs: u64) -> String {
    p.wait_for(needle, secs)
}

fn wait_exit(c: &mut Proc) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            panic!("top did not exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Raw mode off: canonical input and echo back on the terminal.
fn assert_restored(p: &Pty) {
    // SAFETY: a zeroed termios is valid for tcgetattr to fill.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr on our own pty slave.
    assert_eq!(unsafe { libc::tcgetattr(p.slave.as_raw_fd(), &mut t) }, 0);
    assert!(
        t.c_lflag & libc::ICANON != 0,
        "raw mode left on (no ICANON)"
    );
    assert!(t.c_lflag & libc::ECHO != 0, "raw mode left on (no ECHO)");
}

fn require_root() {
    tcpwin_lab::harness::tests_need_root("TOP TESTS");
}

#[test]
fn q_and_sigterm_quit_with_the_terminal_restored() {
    require_root();
    for stop in ["q", "SIGTERM"] {
        let mut p = pty(80, 24);
        let mut c = spawn_top(&p);
        // the first frame: header, column titles and the key line (the terminal gets each word
        // at its position, spaces are not written)
        wait_for(&p, "tcpwin-trace", 30);
        // the table is drawn (at 80 columns the owner moves to the detail pane)
        wait_for(&p, "limit", 10);
        wait_for(&p, "quit", 10);
        if stop == "q" {
            p.master.write_all(b"q").unwrap();
        } else {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let status = wait_exit(&mut c);
        assert!(status.success(), "{stop}: {status}");
        std::thread::sleep(Duration::from_millis(200));
        let out = String::from_utf8_lossy(&p.out.lock().unwrap()).into_owned();
        assert!(
            out.contains("\x1b[?1049h"),
            "{stop}: never entered the alternate screen"
        );
        let left = out.rfind("\x1b[?1049l").expect("alternate screen left");
        assert!(
            left > out.rfind("\x1b[?1049h").unwrap(),
            "{stop}: left before entering"
        );
        assert!(out.contains("\x1b[?25h"), "{stop}: cursor not shown again");
        assert_restored(&p);
    }
}

#[test]
fn too_small_a_terminal_is_one_sentence() {
    require_root();
    let p = pty(60, 20);
    let mut c = spawn_top(&p);
    let status = wait_exit(&mut c);
    assert!(!status.success());
    let out = wait_for(&p, "needs at least 80x24", 5);
    assert!(out.contains("60x20"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert_restored(&p);
}

/// The tracer's programs.
const TRACER_PROGRAMS: [&str; 2] = ["tcp_probe", "tcp_destroy_sock"];

fn tracer_programs() -> usize {
    programs_named(&TRACER_PROGRAMS).expect("bpftool")
}

#[test]
fn trace_shows_its_events_pane_and_detaches_on_quit() {
    require_root();
    let before = tracer_programs();
    let mut p = pty(80, 24);
    let mut c = spawn_top_with(&p, &["--trace"]);
    wait_for(&p, "received,", 30);
    assert!(tracer_programs() > before, "--trace attached nothing");
    p.master.write_all(b"q").unwrap();
    assert!(wait_exit(&mut c).success());
    assert_restored(&p);
    assert_eq!(
        programs_named_settled(&TRACER_PROGRAMS, before).expect("bpftool"),
        before,
        "the tracer's programs are still loaded 10 s after top exited"
    );
}

/// A terminal that stops reading (a stalled ssh session): the first frame blocks in write();
/// SIGTERM still ends `top` within seconds, with raw mode off.
#[test]
fn sigterm_ends_top_on_a_stalled_terminal() {
    require_root();
    // a frame far larger than the pty's buffer, and nobody reading it
    let p = pty_read(3000, 1000, false);
    let mut c = spawn_top(&p);
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        c.try_wait().unwrap().is_none(),
        "top should still be running"
    );
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut c);
    assert_eq!(status.code(), Some(3), "{status}");
    assert_restored(&p);
}

/// The process `top --pid` watches exits (reaped or not yet): top ends, the terminal restored,
/// and says why in one line, as the trace does; with `--trace` its programs are gone too.
#[test]
fn top_ends_when_its_process_exits() {
    require_root();
    for (extra, reap) in [(None, true), (None, false), (Some("--trace"), false)] {
        let before = tracer_programs();
        let mut victim = std::process::Command::new("sh")
            .args(["-c", "read _"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = victim.id().to_string();
        let p = pty(80, 24);
        let mut args = vec!["top", "--pid", &pid, "-i", "200"];
        args.extend(extra);
        let mut c = p.spawn(exe(), &args);
        wait_for(&p, "quit", 30);
        drop(victim.stdin.take());
        if reap {
            victim.wait().unwrap();
        }
        let status = wait_exit(&mut c);
        let out = wait_for(&p, &format!("process {pid} exited"), 5);
        assert!(status.success(), "{extra:?} reaped {reap}: {status}\n{out}");
        assert!(!out.contains("panicked"), "{out}");
        assert_restored(&p);
        victim.wait().unwrap();
        assert_eq!(
            programs_named_settled(&TRACER_PROGRAMS, before).expect("bpftool"),
            before,
            "{extra:?}: the tracer's programs are still loaded 10 s after top exited"
        );
    }
}
