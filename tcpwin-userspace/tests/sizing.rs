//! The fixes' arithmetic against the kernel: the window scale the handshake chooses for a given
//! SO_RCVBUF request, `tcp_rmem[2]`, `net.core.rmem_max` and a route's window metric
//! (`formula::handshake_wscale`, what every fix is sized with) equals the scale the kernel chose
//! (the receiving socket's own `TCP_INFO` `tcpi_rcv_wscale`), and the window it then allows
//! (`window_clamp`, the receiver's own `TCP_WINDOW_CLAMP`) is the one the formula says. In a
//! namespace pair the test makes; `rmem_max` (global) is restored. Needs root: fails, never
//! skips.
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    os::fd::AsRawFd,
    time::Duration,
};

use tcpwin_common::formula::{handshake_wscale, max_scaled_window, win_from_space};
use tcpwin_lab::{
    endpoints::{getsockopt, tcp_info},
    pair::{in_netns, Pair},
    sysctl::GlobalSysctl,
};

/// `TCP_DEFAULT_SCALING_RATIO` (6.10+): what a socket's window is computed with before it
/// measures a ratio.
const INITIAL_RATIO: u8 = 128;

fn setsockopt(fd: i32, level: i32, name: i32, v: i32) {
    // SAFETY: an int option on an open socket.
    let rc = unsafe { libc::setsockopt(fd, level, name, &v as *const i32 as *const _, 4) };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// A listener in `b` (its SO_RCVBUF set before listen when asked), a client in `a`: the
/// accepted socket's (receive scale, window_clamp, sk_rcvbuf) before any data moved.
fn handshake(p: &Pair, port: u16, rcvbuf: Option<i32>) -> (u8, u32, u32, u32) {
    let ip_b = p.ip_b;
    let server = in_netns(&p.b, move || {
        let sock = socket2_listener(ip_b, port, rcvbuf);
        let (s, _) = sock.accept().unwrap();
        let fd = s.as_raw_fd();
        let info = tcp_info(fd).unwrap();
        let clamp: u32 = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP).unwrap();
        let buf: u32 = getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap();
        let mut b = [0u8; 1];
        let _ = (&s).read(&mut b);
        (info.rcv_wscale, clamp, buf, info.advmss)
    });
    std::thread::sleep(Duration::from_millis(100));
    let target = format!("{ip_b}:{port}");
    in_netns(&p.a, move || {
        let mut c = TcpStream::connect(&target).unwrap();
        c.write_all(&[1]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    })
    .join()
    .unwrap();
    server.join().unwrap()
}

/// A listener whose SO_RCVBUF is set before `listen()` (as iperf3 -w and nginx's `rcvbuf=` do).
fn socket2_listener(ip: &str, port: u16, rcvbuf: Option<i32>) -> TcpListener {
    // SAFETY: plain socket(2); the fd is owned by the listener below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0);
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    if let Some(b) = rcvbuf {
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b);
    }
    let addr: std::net::SocketAddrV4 = format!("{ip}:{port}").parse().unwrap();
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a valid sockaddr_in of the right size.
    let rc = unsafe {
        libc::bind(
            fd,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
    // SAFETY: listen on a bound socket.
    assert_eq!(unsafe { libc::listen(fd, 8) }, 0);
    // SAFETY: fd is a listening socket owned by nothing else.
    unsafe { <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd) }
}

#[test]
fn the_handshakes_scale_is_the_formulas() {
    tcpwin_lab::harness::tests_need_root("SIZING TESTS");
    let p = Pair::create(&format!("tcpwt-size-{}", std::process::id()), 1500).unwrap();
    let rmem_max: u64 = 16 << 20;
    let _g = GlobalSysctl::set("net.core.rmem_max", &rmem_max.to_string()).unwrap();
    let tcp_rmem = |max: u64| {
        Pair::sysctl(&p.b, "net.ipv4.tcp_rmem", &format!("4096 131072 {max}")).unwrap();
    };
    let mut port = 5381;
    let mut checked = 0;
    // an SO_RCVBUF request before listen: the buffer doubled, its window at the initial ratio
    // clamps the scale (iperf3 -w 1004300: 4; -w 1048576: 5)
    tcp_rmem(6 << 20);
    for req in [65_536i32, 1_004_300, 1_048_576, 4 << 20] {
        let (ws, clamp, buf, advmss) = handshake(&p, port, Some(req));
        port += 1;
        let space = win_from_space(buf as u64, INITIAL_RATIO);
        let want = handshake_wscale(space, 6 << 20, rmem_max, space);
        assert_eq!(ws, want, "SO_RCVBUF {req}: sk_rcvbuf {buf}");
        // tcp_init_buffer_space keeps one segment of the buffer's window in reserve
        assert_eq!(
            clamp as u64,
            (space - advmss as u64).min(max_scaled_window(ws)),
            "SO_RCVBUF {req}: the window the kernel allows"
        );
        checked += 1;
    }
    // autotuned: the host's largest cap decides the scale (tcp_rmem[2] or rmem_max)
    for max in [512u64 << 10, 32 << 20] {
        tcp_rmem(max);
        let (ws, _, buf, _) = handshake(&p, port, None);
        port += 1;
        let want = handshake_wscale(win_from_space(buf as u64, INITIAL_RATIO), max, rmem_max, 0);
        assert_eq!(ws, want, "tcp_rmem max {max}");
        checked += 1;
    }
    // a route's window metric clamps the scale (window 65536: scale 1)
    tcp_rmem(6 << 20);
    tcpwin_lab::pair::ip(&[
        "-n",
        &p.b,
        "route",
        "add",
        &format!("{}/32", p.ip_a),
        "dev",
        p.dev_b,
        "window",
        "65536",
    ])
    .unwrap();
    let (ws, _, buf, _) = handshake(&p, port, None);
    let want = handshake_wscale(
        win_from_space(buf as u64, INITIAL_RATIO),
        6 << 20,
        rmem_max,
        65536,
    );
    assert_eq!((ws, want), (1, 1), "route window 65536");
    assert_eq!(checked, 6);
}
