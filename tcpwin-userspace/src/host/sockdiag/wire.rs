//! sock_diag (what `ss` itself reads): the netlink replies of an `inet_diag` dump parsed into
//! facts. It carries `tcp_info` and the socket's memory, not `scaling_ratio`, `window_clamp` or
//! the SO_RCVBUF lock: those stay `None` ([`MISSING`] names them). Pure: bytes in, facts out.
//! Written here rather than with netlink-packet-sock-diag (0.5, the rtnetlink family's): its
//! `TcpInfo` refuses a `tcp_info` shorter than 5.19's (5.10's, in the qemu matrix) and stops
//! before `tcpi_rcv_wnd` (6.2+); the model's `tcp_info` reader takes any length and says what
//! is absent.
use std::net::IpAddr;

use anyhow::{bail, Result};

use tcpwin_model::{facts::SockFacts, tcp_info::TcpInfo};

/// What a sock_diag reading cannot give (reported as null).
pub const MISSING: [&str; 5] = [
    "scaling_ratio",
    "window_clamp",
    "rcvbuf_locked",
    "rcvlowat",
    "notsent_lowat",
];

const NLMSG_HDRLEN: usize = 16;
const NLMSG_DONE: u16 = 3;
const NLMSG_ERROR: u16 = 2;
/// `SOCK_DIAG_BY_FAMILY`
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_MSG_LEN: usize = 72;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_SKMEMINFO: u16 = 7;
const AF_INET6: u8 = 10;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}

/// `struct inet_diag_req_v2` for a TCP dump of `family` with `tcp_info` and memory, every state
/// but LISTEN, as one netlink message (`NLM_F_REQUEST | NLM_F_DUMP`).
pub fn request(family: u8, seq: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDRLEN + 56);
    let len = (NLMSG_HDRLEN + 56) as u32;
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(0x01u16 | 0x300).to_ne_bytes()); // REQUEST | DUMP
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(family);
    m.push(6); // IPPROTO_TCP
    let ext: u8 = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_SKMEMINFO - 1));
    m.push(ext);
    m.push(0);
    let states: u32 = !(1 << 10); // all but TCP_LISTEN
    m.extend_from_slice(&states.to_ne_bytes());
    m.extend_from_slice(&[0u8; 48]); // inet_diag_sockid: any
    m
}

/// One reply message's socket, or None for a message that is not one.
fn parse_msg(b: &[u8], ts_ns: u64) -> Option<SockFacts> {
    if b.len() < INET_DIAG_MSG_LEN {
        return None;
    }
    let family = b[0];
    let state = b[1];
    let sport = u16::from_be_bytes([b[4], b[5]]);
    let dport = u16::from_be_bytes([b[6], b[7]]);
    let addr = |o: usize| -> IpAddr {
        if family == AF_INET6 {
            let a: [u8; 16] = b[o..o + 16].try_into().expect("16 bytes");
            IpAddr::from(a)
        } else {
            IpAddr::from([b[o], b[o + 1], b[o + 2], b[o + 3]])
        }
    };
    let cookie = u32_at(b, 44) as u64 | (u32_at(b, 48) as u64) << 32;
    let rqueue = u32_at(b, 56);
    let inode = u32_at(b, 68) as u64;
    let mut f = SockFacts {
        ts_ns,
        id: tcpwin_model::schema::SocketId {
            cookie: Some(cookie),
            netns: None,
            laddr: Some(addr(8)),
            lport: sport,
            raddr: Some(addr(24)),
            rport: dport,
        },
        state,
        inode: (inode != 0).then_some(inode),
        unread: Some(rqueue),
        ..SockFacts::default()
    };
    // attributes
    let mut o = INET_DIAG_MSG_LEN;
    while o + 4 <= b.len() {
        let len = u16_at(b, o) as usize;
        let ty = u16_at(b, o + 2);
        if len < 4 || o + len > b.len() {
            break;
        }
        let v = &b[o + 4..o + len];
        match ty {
            INET_DIAG_INFO => {
                if let Some(t) = TcpInfo::parse(v) {
                    f.wscale_ok = Some(t.wscale_ok);
                    f.rcv_wscale = Some(t.rcv_wscale);
                    f.snd_wscale = Some(t.snd_wscale);
                    f.rcv_mss = Some(t.rcv_mss);
                    f.advmss = Some(t.advmss);
                    f.rcv_ssthresh = Some(t.rcv_ssthresh);
                    f.rcv_rtt_us = Some(t.rcv_rtt_us);
                    f.srtt_us = Some(t.rtt_us);
                    f.min_rtt_us = t.min_rtt_us;
                    f.snd_cwnd = Some(t.snd_cwnd);
                    f.packets_out = Some(t.unacked);
                    f.mss_cache = Some(t.snd_mss);
                    f.bytes_received = t.bytes_received;
                    f.bytes_acked = t.bytes_acked;
                    f.snd_wnd = t.snd_wnd;
                    f.rcv_wnd = t.rcv_wnd;
                    f.busy_us = t.busy_us;
                    f.rwnd_limited_us = t.rwnd_limited_us;
                    f.sndbuf_limited_us = t.sndbuf_limited_us;
                    f.rttvar_us = Some(t.rttvar_us);
                    f.total_retrans = Some(t.total_retrans);
                    f.lost_out = Some(t.lost);
                    f.snd_ssthresh = Some(t.snd_ssthresh);
                    f.pacing_rate_bps = t.pacing_rate.map(|r| r.saturating_mul(8));
                    f.pacing_cap_bps = t
                        .max_pacing_rate
                        .and_then(|r| tcpwin_model::facts::pacing_cap(true, r));
                    f.since_data_sent_us = Some(t.last_data_sent_ms as u64 * 1000);
                    f.since_data_recv_us = Some(t.last_data_recv_ms as u64 * 1000);
                    f.ooo_packets = t.rcv_ooopack;
                    f.unsent = t.notsent_bytes;
                    f.app_limited = Some(t.delivery_rate_app_limited);
                }
            }
            INET_DIAG_SKMEMINFO if v.len() >= 24 => {
                // SK_MEMINFO_RMEM_ALLOC, _RCVBUF, _WMEM_ALLOC, _SNDBUF, _FWD_ALLOC, _WMEM_QUEUED
                f.rmem_alloc = Some(u32_at(v, 0));
                f.sk_rcvbuf = Some(u32_at(v, 4));
                f.sk_sndbuf = Some(u32_at(v, 12));
                f.wmem_queued = Some(u32_at(v, 20));
            }
            _ => {}
        }
        o += len.div_ceil(4) * 4;
    }
    Some(f)
}

/// The sockets in one read of netlink replies; `Ok(true)` in the second value once the dump is
/// done. A netlink error is an error.
pub fn parse_replies(buf: &[u8], ts_ns: u64) -> Result<(Vec<SockFacts>, bool)> {
    let mut out = Vec::new();
    let mut o = 0;
    while o + NLMSG_HDRLEN <= buf.len() {
        let len = u32_at(buf, o) as usize;
        let ty = u16_at(buf, o + 4);
        if len < NLMSG_HDRLEN || o + len > buf.len() {
            bail!(
                "a truncated netlink message ({len} bytes at {o} of {})",
                buf.len()
            );
        }
        match ty {
            NLMSG_DONE => return Ok((out, true)),
            NLMSG_ERROR => {
                let errno = if len >= NLMSG_HDRLEN + 4 {
                    -(u32_at(buf, o + NLMSG_HDRLEN) as i32)
                } else {
                    0
                };
                bail!(
                    "sock_diag refused the dump: {}",
                    std::io::Error::from_raw_os_error(errno)
                );
            }
            SOCK_DIAG_BY_FAMILY => {
                if let Some(f) = parse_msg(&buf[o + NLMSG_HDRLEN..o + len], ts_ns) {
                    out.push(f);
                }
            }
            _ => {}
        }
        o += len.div_ceil(4) * 4;
    }
    Ok((out, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply() -> Vec<u8> {
        let mut msg = vec![0u8; INET_DIAG_MSG_LEN];
        msg[0] = 2; // AF_INET
        msg[1] = 1; // ESTABLISHED
        msg[4..6].copy_from_slice(&5201u16.to_be_bytes());
        msg[6..8].copy_from_slice(&40000u16.to_be_bytes());
        msg[8..12].copy_from_slice(&[10, 0, 0, 2]);
        msg[24..28].copy_from_slice(&[10, 0, 0, 1]);
        msg[44..48].copy_from_slice(&7u32.to_ne_bytes());
        msg[56..60].copy_from_slice(&1234u32.to_ne_bytes());
        msg[68..72].copy_from_slice(&99u32.to_ne_bytes());
        let mut info = vec![0u8; 232];
        info[6] = 0x79;
        info[64..68].copy_from_slice(&64000u32.to_ne_bytes());
        let mut attr = Vec::new();
        attr.extend_from_slice(&((4 + info.len()) as u16).to_ne_bytes());
        attr.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
        attr.extend_from_slice(&info);
        let mem: Vec<u8> = [5u32, 131072, 0, 87040, 0, 0, 0, 0, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        attr.extend_from_slice(&((4 + mem.len()) as u16).to_ne_bytes());
        attr.extend_from_slice(&INET_DIAG_SKMEMINFO.to_ne_bytes());
        attr.extend_from_slice(&mem);
        msg.extend_from_slice(&attr);
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + msg.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(&msg);
        // NLMSG_DONE
        m.extend_from_slice(&20u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&[0u8; 14]);
        m
    }

    #[test]
    fn a_dump_reply_becomes_facts_with_the_missing_ones_absent() {
        let (v, done) = parse_replies(&reply(), 9).unwrap();
        assert!(done);
        let f = &v[0];
        assert_eq!((f.id.lport, f.id.rport), (5201, 40000));
        assert_eq!(f.id.laddr.unwrap().to_string(), "10.0.0.2");
        assert_eq!(f.id.cookie, Some(7));
        assert_eq!(f.unread, Some(1234));
        assert_eq!(f.inode, Some(99));
        assert_eq!((f.rcv_wscale, f.snd_wscale), (Some(7), Some(9)));
        assert_eq!(f.rcv_ssthresh, Some(64000));
        assert_eq!((f.rmem_alloc, f.sk_rcvbuf), (Some(5), Some(131072)));
        // what sock_diag cannot give
        assert_eq!(
            (f.scaling_ratio, f.window_clamp, f.rcvbuf_locked),
            (None, None, None)
        );
        // tcp_info of 232 bytes: no rcv_wnd (6.2+)
        assert_eq!(f.rcv_wnd, None);
    }

    #[test]
    fn errors_and_truncation_are_errors() {
        let mut e = Vec::new();
        e.extend_from_slice(&20u32.to_ne_bytes());
        e.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        e.extend_from_slice(&[0u8; 10]);
        e.extend_from_slice(&(-1i32 as u32).to_ne_bytes());
        assert!(parse_replies(&e, 0)
            .unwrap_err()
            .to_string()
            .contains("refused"));
        let r = reply();
        assert!(parse_replies(&r[..40], 0).is_err());
        assert_eq!(request(2, 1).len(), 72);
    }
}
