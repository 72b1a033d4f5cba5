//! The delay line never releases a frame early, end to end: each datagram of bursts that make
//! it fall behind carries its send time (CLOCK_MONOTONIC, one clock for every namespace of the
//! host) and arrives at least rtt / 2 later. (The line once stamped a whole drain of its
//! receive socket with the time the drain began, so frames that arrived during a long drain
//! left early: a path of 18 ms measured 14 ms by TCP at 1 Gbit/s. A burst read back at once
//! hides that, since the early frames leave together with the ones ahead of them; the rule
//! itself is held exactly by the unit test in `delay.rs`.) Needs root: fails, never skips.
use std::{
    net::UdpSocket,
    time::{Duration, Instant},
};

use tcpwin_lab::pair::{in_netns, Pair};

fn require_root() {
    tcpwin_lab::harness::tests_need_root("DELAY LINE TESTS");
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn no_frame_leaves_before_its_time() {
    require_root();
    let rtt = Duration::from_millis(20);
    let one_way_ns = rtt.as_nanos() as u64 / 2;
    let name = format!("tcpwt-dly-{}", std::process::id());
    let pair = Pair::create_wan(&name, 1500, rtt, None).expect("the WAN path");
    let port = 5361;
    let ip_b = pair.ip_b;
    let receiver = in_netns(&pair.b, move || {
        let s = UdpSocket::bind((ip_b, port)).expect("bind");
        // room for the whole burst: the receiver must not be what delays a datagram
        let big: libc::c_int = 64 << 20;
        // SAFETY: an int option on an open socket.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &big as *const libc::c_int as *const _,
                4,
            )
        };
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 2048];
        let mut delays = Vec::new();
        while let Ok(n) = s.recv(&mut buf) {
            let now = monotonic_ns();
            if n >= 8 {
                let sent = u64::from_le_bytes(buf[..8].try_into().unwrap());
                delays.push(now as i64 - sent as i64);
            }
        }
        delays
    });
    std::thread::sleep(Duration::from_millis(200));
    let target = format!("{}:{port}", pair.ip_b);
    let sent = in_netns(&pair.a, move || {
        let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
        let mut payload = [0u8; 1400];
        let mut n = 0u64;
        // bursts as fast as the sender can write, with short pauses: the line falls behind
        // during each burst and drains a backlog after it
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            for _ in 0..3000 {
                payload[..8].copy_from_slice(&monotonic_ns().to_le_bytes());
                if s.send_to(&payload, &target).is_ok() {
                    n += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        n
    })
    .join()
    .unwrap();
    let delays = receiver.join().unwrap();
    let totals = pair.path.as_ref().unwrap().totals();
    drop(pair);
    assert!(
        delays.len() as u64 > sent / 10,
        "too few datagrams crossed: {} of {sent} ({totals:?})",
        delays.len()
    );
    let early: Vec<i64> = delays
        .iter()
        .copied()
        .filter(|d| *d < one_way_ns as i64)
        .collect();
    let min = delays.iter().min().copied().unwrap_or(0);
    eprintln!(
        "{} datagrams of {sent}, one-way min {:.3} ms (asked {:.3}), {totals:?}",
        delays.len(),
        min as f64 / 1e6,
        one_way_ns as f64 / 1e6
    );
    assert!(
        early.is_empty(),
        "{} of {} datagrams crossed in less than {} ms (min {:.3} ms): the line released them early",
        early.len(),
        delays.len(),
        one_way_ns as f64 / 1e6,
        min as f64 / 1e6
    );
}
