//! Built-in endpoints: a receiver that reports the kernel's own view of each connection at the end
//! (getsockopt `TCP_WINDOW_CLAMP`, `TCP_INFO`, `SO_COOKIE`, `SO_RCVBUF`), and a sender. Run as
//! `tcpwin-trace transfer recv|send` inside the lab's namespaces; these numbers are the ground
//! truth the tracer is checked against ([`EndpointReport`]).
use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    os::fd::AsRawFd,
    time::Duration,
};

use anyhow::{Context, Result};
use tcpwin_model::{schema::EndpointReport, tcp_info::TcpInfo};

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
    },
}

fn getsockopt<T: Copy>(fd: i32, level: i32, name: i32) -> Result<T> {
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

fn set_rcvbuf(fd: i32, bytes: u32) -> Result<()> {
    let v = bytes as i32;
    // SAFETY: plain int option.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &v as *const i32 as *const _,
            4,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("setsockopt(SO_RCVBUF)");
    }
    Ok(())
}

pub fn run(cmd: TransferCmd) -> Result<()> {
    match cmd {
        TransferCmd::Recv {
            listen,
            conns,
            rcvbuf,
            linger_ms,
        } => {
            let l = TcpListener::bind(listen).with_context(|| format!("bind {listen}"))?;
            if let Some(b) = rcvbuf {
                set_rcvbuf(l.as_raw_fd(), b)?;
            }
            println!("{{\"ready\":\"{}\"}}", l.local_addr()?);
            std::io::stdout().flush()?;
            let mut buf = vec![0u8; 256 << 10];
            for _ in 0..conns {
                let (mut s, _) = l.accept()?;
                let mut total = 0u64;
                loop {
                    let n = s.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
                let mut truth = ground_truth(&s)?;
                truth.bytes = Some(total);
                println!("{}", serde_json::to_string(&truth)?);
                std::io::stdout().flush()?;
            }
            std::thread::sleep(Duration::from_millis(linger_ms));
            Ok(())
        }
        TransferCmd::Send {
            connect,
            bytes,
            conns,
            delay_ms,
            report,
        } => {
            let buf = vec![0x5au8; 256 << 10];
            std::thread::sleep(Duration::from_millis(delay_ms));
            for _ in 0..conns {
                let mut s = connect_retry(connect)?;
                let mut left = bytes;
                let started = std::time::Instant::now();
                let mut snd_wnd_peak = 0u32;
                while left > 0 {
                    let n = left.min(buf.len() as u64) as usize;
                    s.write_all(&buf[..n])?;
                    left -= n as u64;
                    if report {
                        snd_wnd_peak = snd_wnd_peak.max(snd_wnd(s.as_raw_fd()).unwrap_or(0));
                    }
                }
                let elapsed = started.elapsed().as_secs_f64();
                s.shutdown(std::net::Shutdown::Write)?;
                // wait for the receiver's close so the whole exchange is over
                let mut sink = [0u8; 64];
                let _ = s.read(&mut sink);
                if report {
                    // after the peer's FIN the socket is closed: TCP_INFO still answers
                    let mut truth = ground_truth(&s)?;
                    truth.snd_wnd_peak = Some(snd_wnd_peak);
                    truth.throughput_bps = Some((bytes as f64 * 8.0 / elapsed.max(1e-9)) as u64);
                    println!("{}", serde_json::to_string(&truth)?);
                    std::io::stdout().flush()?;
                }
            }
            Ok(())
        }
    }
}

fn connect_retry(addr: SocketAddr) -> Result<TcpStream> {
    let mut last = None;
    for _ in 0..50 {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(last.expect("at least one attempt")).with_context(|| format!("connect {addr}"))
}
