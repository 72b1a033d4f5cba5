//! sock_diag over netlink (what `ss` itself uses): the fallback when the socket iterator is
//! refused. Read in the calling thread's network namespace.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, Result};
use tcpwin_model::facts::SockFacts;

use self::wire as sockdiag;
pub use self::wire::MISSING;

pub mod wire;

const NETLINK_SOCK_DIAG: i32 = 4;

/// Every TCP socket (IPv4 and IPv6, LISTEN left out) with its tcp_info and memory.
pub fn dump(ts_ns: u64) -> Result<Vec<SockFacts>> {
    // SAFETY: plain socket(2); the fd is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("netlink sock_diag socket");
    }
    // SAFETY: fd was just returned by socket(2).
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    for (seq, family) in [(1u32, libc::AF_INET as u8), (2, libc::AF_INET6 as u8)] {
        let req = sockdiag::request(family, seq);
        // SAFETY: sending an initialised buffer to the kernel (destination: the kernel).
        let rc = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr() as *const _, req.len(), 0) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error()).context("sock_diag request");
        }
        loop {
            // SAFETY: buf is writable for its length.
            let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr() as *mut _, buf.len(), 0) };
            if n < 0 {
                return Err(std::io::Error::last_os_error()).context("sock_diag reply");
            }
            let (socks, done) = sockdiag::parse_replies(&buf[..n as usize], ts_ns)?;
            out.extend(socks);
            if done || n == 0 {
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ground truth: a connection this test opens is in the dump, with the cookie its owner reads.
    #[test]
    fn finds_a_connection_of_this_process() {
        use std::net::{TcpListener, TcpStream};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut cookie = 0u64;
        let mut len = 8 as libc::socklen_t;
        // SAFETY: SO_COOKIE writes a u64.
        let rc = unsafe {
            libc::getsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_COOKIE,
                &mut cookie as *mut u64 as *mut _,
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        let all = dump(0).unwrap();
        let me = all
            .iter()
            .find(|f| f.id.cookie == Some(cookie))
            .expect("listed");
        assert_eq!(me.id.rport, l.local_addr().unwrap().port());
        assert!(me.window_clamp.is_none() && me.scaling_ratio.is_none());
        assert!(me.sk_rcvbuf.is_some() && me.rcv_wscale.is_some());
    }
}
