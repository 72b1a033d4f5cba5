//! A pseudo-terminal for the tests of full-screen commands (`top`): the program runs on its
//! slave side as on a terminal of a given size, everything it writes is kept for the test.
use std::{
    io::Read,
    os::fd::{FromRawFd, OwnedFd},
    os::unix::process::CommandExt,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::harness::Proc;

pub struct Pty {
    pub master: std::fs::File,
    pub slave: OwnedFd,
    pub out: Arc<Mutex<Vec<u8>>>,
}

/// A terminal of `cols` x `rows` whose output is read and kept.
pub fn pty(cols: u16, rows: u16) -> Pty {
    pty_read(cols, rows, true)
}

/// `read`: whether anything reads what the program writes (false: a stalled terminal).
pub fn pty_read(cols: u16, rows: u16, read: bool) -> Pty {
    let (mut m, mut s) = (0, 0);
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two fds; the winsize is read.
    let rc = unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: fresh fds from openpty, owned from here on.
    let (master, slave) = unsafe { (std::fs::File::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
    let out = Arc::new(Mutex::new(Vec::new()));
    let mut r = master.try_clone().unwrap();
    let sink = out.clone();
    std::thread::spawn(move || {
        if !read {
            // hold the master open, read nothing
            std::thread::sleep(Duration::from_secs(60));
            return;
        }
        let mut buf = [0u8; 4096];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    Pty { master, slave, out }
}

impl Pty {
    /// `exe args` on this terminal as its controlling one; killed on drop.
    pub fn spawn(&self, exe: &str, args: &[&str]) -> Proc {
        let fd = || Stdio::from(self.slave.try_clone().unwrap());
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .stdin(fd())
            .stdout(fd())
            .stderr(fd())
            .env("TERM", "xterm-256color");
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Proc(cmd.spawn().expect("the program starts on the terminal"))
    }

    /// Everything written so far, once it contains `needle` (within `secs`).
    pub fn wait_for(&self, needle: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let text = String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} within {secs} s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
