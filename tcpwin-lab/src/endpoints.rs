//! Built-in endpoints: a receiver that reports the kernel's own view of each connection at the end
//! (getsockopt `TCP_WINDOW_CLAMP`, `TCP_INFO`, `SO_COOKIE`, `SO_RCVBUF`), and a sender. Run as
//! `tcpwin-trace transfer recv|send` inside the lab's namespaces; these numbers are the ground
//! truth the tracer is checked against ([`EndpointReport`]).
use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    os::fd::{AsRawFd, FromRawFd},
    time::Duration,
};

use crate::rows::EndpointReport;
use anyhow::{Context, Result};
use tcpwin_model::tcp_info::TcpInfo;

#[derive(clap::Subcommand, Debug)]
pub enum TransferCmd {
    /// Accept connections, read each to EOF, print one JSON line per connection
    Recv {
        #[arg(long)]
        listen: SocketAddr,
        /// connections to accept before exiting
        #[arg(long, default_value_t = 1)]
        conns: u32,
        /// setsockopt(SO_RCVBUF) on the listener (locks autotuning off)
        #[arg(long)]
        rcvbuf: Option<u32>,
        /// stay alive this many ms after the last connection (so tracers can see it)
        #[arg(long, default_value_t = 0)]
        linger_ms: u64,
        /// setsockopt(TCP_WINDOW_CLAMP) on each connection once 256 KiB arrived (a ratio change
        /// before that would overwrite it)
        #[arg(long)]
        window_clamp: Option<u32>,
        /// read no faster than this many bits per second (an application that falls behind)
        #[arg(long)]
        read_bps: Option<u64>,
        /// setsockopt(TCP_WINDOW_CLAMP) on the listener before any connection: each handshake's
        /// window scale is chosen within it (autotuning rewrites the clamp afterwards)
        #[arg(long)]
        listen_clamp: Option<u32>,
        /// keep each connection open through the linger (after its report): its socket can be
        /// read by other tools against the report
        #[arg(long)]
        keep_open: bool,
    },
    /// Connect and send bytes, then close
    Send {
        #[arg(long)]
        connect: SocketAddr,
        #[arg(long, default_value_t = 64 << 20)]
        bytes: u64,
        #[arg(long, default_value_t = 1)]
        conns: u32,
        /// wait this long before the first connect (so a tracer can attach to this PID)
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
        /// print the kernel's view of each connection (JSON) before closing it
        #[arg(long)]
        report: bool,
        /// with --report: print it (the same report) as soon as the last byte is sent and the
        /// write side shut (nothing more arrives on a sender), not after the receiver closed (it
        /// may keep its socket open)
        #[arg(long, requires = "report")]
        report_early: bool,
        /// send for this many seconds instead of --bytes
        #[arg(long)]
        secs: Option<f64>,
        /// congestion control of the sending socket (TCP_CONGESTION; a namespace may allow
        /// fewer than the host: set it per socket)
        #[arg(long)]
        cc: Option<String>,
    },
}

/// `getsockopt(2)` of a plain C value (the tests read the kernel's view of their own sockets
/// with it too).
pub fn getsockopt<T: Copy>(fd: i32, level: i32, name: i32) -> Result<T> {
    // SAFETY: only used with plain C types for which all-zero is valid.
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: v is a valid T-sized buffer and len says so.
    let rc = unsafe { libc::getsockopt(fd, level, name, &mut v as *mut T as *mut _, &mut len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("getsockopt({level}, {name})"));
    }
    Ok(v)
}

/// `getsockopt(TCP_INFO)` as the kernel's bytes (as long as this kernel's struct).
pub fn tcp_info(fd: i32) -> Result<TcpInfo> {
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr() as *mut _,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("getsockopt(TCP_INFO)");
    }
    TcpInfo::parse(&buf[..len as usize]).context("TCP_INFO shorter than any kernel's")
}

/// The kernel's view of a connection, from the socket's owner.
pub fn ground_truth(s: &TcpStream) -> Result<EndpointReport> {
    let fd = s.as_raw_fd();
    let info = tcp_info(fd)?;
    let clamp: i32 = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP)?;
    let cookie: u64 = getsockopt(fd, libc::SOL_SOCKET, libc::SO_COOKIE)?;
    let rcvbuf: i32 = getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)?;
    Ok(EndpointReport {
        cookie,
        window_clamp: clamp as u32,
        rcv_ssthresh: info.rcv_ssthresh,
        rcv_space: info.rcv_space,
        rcv_mss: info.rcv_mss,
        advmss: info.advmss,
        rcv_wscale: info.rcv_wscale,
        snd_wscale: info.snd_wscale,
        so_rcvbuf: rcvbuf as u32,
        min_rtt_us: info.min_rtt_us.unwrap_or(0),
        rwnd_limited_us: info.rwnd_limited_us,
        busy_us: info.busy_us,
        snd_wnd: info.snd_wnd,
        local: s.local_addr().ok().map(|a| a.to_string()),
        peer: s.peer_addr().ok().map(|a| a.to_string()),
        ..EndpointReport::default()
    })
}

/// `tcpi_snd_wnd` (Linux 5.4+): the window the peer advertised, as this sender sees it; None
/// where the kernel's `tcp_info` is too short to hold it.
pub fn snd_wnd(fd: i32) -> Option<u32> {
    tcp_info(fd).ok()?.snd_wnd
}

/// A socket with TCP_CONGESTION set, then connected (blocking).
fn connect_with_cc(addr: SocketAddr, cc: &str) -> std::io::Result<TcpStream> {
    let domain = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: plain socket(2); the fd is owned by the TcpStream at once.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket not owned elsewhere.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: the option value is cc's bytes, of the length given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr() as *const _,
            cc.len() as u32,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("TCP_CONGESTION {cc}: {e}"),
        ));
    }
    let (sa, len) = sockaddr(addr);
    // SAFETY: connect with a sockaddr of the length given.
    let rc = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(s)
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data, valid all-zero.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as u16;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as u16;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn set_int(fd: i32, level: i32, name: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: plain int option.
    let rc = unsafe { libc::setsockopt(fd, level, name, &v as *const i32 as *const _, 4) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn set_rcvbuf(fd: i32, bytes: u32) -> Result<()> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes as i32).context("setsockopt(SO_RCVBUF)")
}

pub fn run(cmd: TransferCmd) -> Result<()> {
    match cmd {
        TransferCmd::Recv {
            listen,
            conns,
            rcvbuf,
            linger_ms,
            window_clamp,
            read_bps,
            keep_open,
            listen_clamp,
        } => {
            let mut kept = Vec::new();
            let l = TcpListener::bind(listen).with_context(|| format!("bind {listen}"))?;
            if let Some(b) = rcvbuf {
                set_rcvbuf(l.as_raw_fd(), b)?;
            }
            if let Some(c) = listen_clamp {
                set_int(
                    l.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_WINDOW_CLAMP,
                    c as i32,
                )
                .context("setsockopt(TCP_WINDOW_CLAMP) on the listener")?;
            }
            println!("{{\"ready\":\"{}\"}}", l.local_addr()?);
            std::io::stdout().flush()?;
            let mut buf = vec![0u8; 256 << 10];
            for _ in 0..conns {
                let (mut s, _) = l.accept()?;
                let total = read_all(&mut s, &mut buf, window_clamp, read_bps)?;
                let mut truth = ground_truth(&s)?;
                truth.bytes = Some(total);
                println!("{}", serde_json::to_string(&truth)?);
                std::io::stdout().flush()?;
                if keep_open {
                    kept.push(s);
                }
            }
            std::thread::sleep(Duration::from_millis(linger_ms));
            drop(kept);
            Ok(())
        }
        TransferCmd::Send {
            connect,
            bytes,
            conns,
            delay_ms,
            report,
            report_early,
            secs,
            cc,
        } => {
            let buf = vec![0x5au8; 256 << 10];
            std::thread::sleep(Duration::from_millis(delay_ms));
            for _ in 0..conns {
                let mut s = connect_retry(connect, cc.as_deref())?;
                send_one(&mut s, &buf, bytes, secs, report, report_early)?;
            }
            Ok(())
        }
    }
}

/// Reads a connection to its end, `read_bps` at most, setting TCP_WINDOW_CLAMP `clamp` once
/// 256 KiB arrived; the bytes read.
fn read_all(
    s: &mut TcpStream,
    buf: &mut [u8],
    window_clamp: Option<u32>,
    read_bps: Option<u64>,
) -> Result<u64> {
    let mut total = 0u64;
    let started = std::time::Instant::now();
    let mut clamp = window_clamp;
    // a slow reader reads small pieces, so the queue, not one read, is what waits
    let chunk = if read_bps.is_some() {
        16 << 10
    } else {
        buf.len()
    };
    loop {
        let n = s.read(&mut buf[..chunk])?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if let Some(c) = clamp.filter(|_| total >= 256 << 10) {
            set_int(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_WINDOW_CLAMP,
                c as i32,
            )
            .context("setsockopt(TCP_WINDOW_CLAMP)")?;
            clamp = None;
        }
        if let Some(bps) = read_bps {
            let due = Duration::from_secs_f64(total as f64 * 8.0 / bps as f64);
            std::thread::sleep(due.saturating_sub(started.elapsed()));
        }
    }
    Ok(total)
}

/// Sends `bytes` (or for `secs`) on a connection, then waits for the receiver's close; with
/// `report`, prints the kernel's view of the connection with the sender's own measurements
/// (before the close with `report_early`).
fn send_one(
    s: &mut TcpStream,
    buf: &[u8],
    bytes: u64,
    secs: Option<f64>,
    report: bool,
    report_early: bool,
) -> Result<()> {
    let mut left = bytes;
    let started = std::time::Instant::now();
    let until = secs.map(|t| started + Duration::from_secs_f64(t));
    let mut snd_wnd_peak = 0u32;
    let mut sent = 0u64;
    // with --secs: the rate over the last two thirds, from the socket's own
    // bytes_acked (slow start left out)
    let mark_at = secs.map(|t| started + Duration::from_secs_f64(t / 3.0));
    let mut mark: Option<(std::time::Instant, u64)> = None;
    loop {
        if mark.is_none() && mark_at.is_some_and(|m| std::time::Instant::now() >= m) {
            let acked = tcp_info(s.as_raw_fd())?.bytes_acked.unwrap_or(0);
            mark = Some((std::time::Instant::now(), acked));
        }
        let n = match until {
            Some(u) if std::time::Instant::now() >= u => break,
            Some(_) => buf.len(),
            None if left == 0 => break,
            None => left.min(buf.len() as u64) as usize,
        };
        s.write_all(&buf[..n])?;
        left = left.saturating_sub(n as u64);
        sent += n as u64;
        if report {
            snd_wnd_peak = snd_wnd_peak.max(snd_wnd(s.as_raw_fd()).unwrap_or(0));
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (steady, steady_wnd) = match mark {
        Some((t, acked)) => {
            let info = tcp_info(s.as_raw_fd())?;
            let now = info.bytes_acked.unwrap_or(0);
            let dt = t.elapsed().as_secs_f64().max(1e-9);
            (
                Some((now.saturating_sub(acked) as f64 * 8.0 / dt) as u64),
                info.snd_wnd,
            )
        }
        None => (None, None),
    };
    // the kernel's view of the connection with the sender's own measurements
    let say = |s: &TcpStream| -> Result<()> {
        let mut truth = ground_truth(s)?;
        truth.snd_wnd_peak = Some(snd_wnd_peak);
        truth.throughput_bps = Some((sent as f64 * 8.0 / elapsed.max(1e-9)) as u64);
        truth.steady_bps = steady;
        truth.steady_snd_wnd = steady_wnd;
        println!("{}", serde_json::to_string(&truth)?);
        std::io::stdout().flush()?;
        Ok(())
    };
    s.shutdown(std::net::Shutdown::Write)?;
    if report_early {
        say(s)?;
    }
    // wait for the receiver's close so the whole exchange is over
    let mut sink = [0u8; 64];
    let _ = s.read(&mut sink);
    if report && !report_early {
        // after the peer's FIN the socket is closed: TCP_INFO still answers
        say(s)?;
    }
    Ok(())
}

/// Connects (retrying while the receiver starts), with `cc` set on the socket before the
/// handshake.
fn connect_retry(addr: SocketAddr, cc: Option<&str>) -> Result<TcpStream> {
    let mut last = None;
    for _ in 0..50 {
        let attempt = match cc {
            None => TcpStream::connect_timeout(&addr, Duration::from_secs(2)),
            Some(cc) => connect_with_cc(addr, cc),
        };
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                return Err(e).with_context(|| format!("congestion control {cc:?}"))
            }
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(last.expect("at least one attempt")).with_context(|| format!("connect {addr}"))
}
