//! Decoding: a raw kernel `Event` becomes a `Record` with names and absent values made explicit.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};
use tcpwin_common::{flag, hook, kind, Event};

#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub ev: Event,
    pub kind: &'static str,
    pub laddr: IpAddr,
    pub raddr: IpAddr,
    pub comm: Option<String>,
}

pub fn kind_name(k: u8) -> Option<&'static str> {
    Some(match k {
        kind::INIT => "init",
        kind::RATIO => "ratio",
        kind::SPACE => "space",
        kind::SEEN => "seen",
        kind::CLOSE => "close",
        _ => return None,
    })
}

fn addr(family: u8, b: &[u8; 16]) -> IpAddr {
    if family == libc::AF_INET6 as u8 {
        IpAddr::V6(Ipv6Addr::from(*b))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }
}

/// Decodes one ring-buffer item. A short or unknown item is an error (never silently skipped).
pub fn decode(bytes: &[u8]) -> Result<Record> {
    if bytes.len() < std::mem::size_of::<Event>() {
        bail!(
            "short event: {} bytes, expected {}",
            bytes.len(),
            std::mem::size_of::<Event>()
        );
    }
    // SAFETY: Event is repr(C) plain data and the slice is long enough; read_unaligned copes with
    // any alignment of the ring buffer slot.
    let ev: Event = unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const Event) };
    let Some(kind) = kind_name(ev.kind) else {
        bail!("unknown event kind {}", ev.kind);
    };
    let comm = (ev.flags & flag::PID != 0).then(|| {
        let end = ev.comm.iter().position(|&c| c == 0).unwrap_or(16);
        String::from_utf8_lossy(&ev.comm[..end]).into_owned()
    });
    Ok(Record {
        laddr: addr(ev.family, &ev.laddr),
        raddr: addr(ev.family, &ev.raddr),
        kind,
        comm,
        ev,
    })
}

impl Record {
    pub fn has(&self, f: u8) -> bool {
        self.ev.flags & f != 0
    }
    pub fn ratio(&self) -> Option<u8> {
        self.has(flag::RATIO_PRESENT)
            .then_some(self.ev.scaling_ratio)
    }
    pub fn cookie(&self) -> Option<u64> {
        self.has(flag::COOKIE).then_some(self.ev.cookie)
    }
    pub fn pid(&self) -> Option<u32> {
        self.has(flag::PID).then_some(self.ev.pid)
    }
    pub fn hook_name(&self) -> &'static str {
        hook::NAMES
            .get(self.ev.hook as usize)
            .copied()
            .unwrap_or("?")
    }
    /// The ratio `tcp_measure_rcv_mss` computes from the reported packet.
    pub fn skb_ratio(&self) -> Option<u64> {
        (self.has(flag::SKB) && self.ev.skb_truesize != 0)
            .then(|| ((self.ev.skb_len as u64) << 8) / self.ev.skb_truesize as u64)
    }

    /// The JSON object for `--json`; absent values are `null`, never 0.
    pub fn to_json(&self, pid_override: Option<u32>) -> Value {
        let e = &self.ev;
        let skb = self.has(flag::SKB);
        let prev = self.has(flag::PREV);
        let ratio_present = self.has(flag::RATIO_PRESENT);
        let opt = |cond: bool, v: Value| if cond { v } else { Value::Null };
        let mut m = Map::new();
        m.insert("event".into(), json!(self.kind));
        m.insert("ts_ns".into(), json!(e.ts_ns));
        m.insert("cookie".into(), json!(self.cookie()));
        m.insert("netns".into(), json!(e.netns));
        m.insert("pid".into(), json!(self.pid().or(pid_override)));
        m.insert("comm".into(), json!(self.comm));
        m.insert(
            "family".into(),
            json!(if self.laddr.is_ipv6() { "ipv6" } else { "ipv4" }),
        );
        m.insert("laddr".into(), json!(self.laddr.to_string()));
        m.insert("lport".into(), json!(e.lport));
        m.insert("raddr".into(), json!(self.raddr.to_string()));
        m.insert("rport".into(), json!(e.rport));
        m.insert("hook".into(), json!(self.hook_name()));
        m.insert("scaling_ratio".into(), json!(self.ratio()));
        if self.kind == "ratio" {
            m.insert(
                "prev_scaling_ratio".into(),
                opt(prev && ratio_present, json!(e.prev_scaling_ratio)),
            );
        }
        m.insert("window_clamp".into(), json!(e.window_clamp));
        m.insert("rcv_ssthresh".into(), json!(e.rcv_ssthresh));
        m.insert("rcv_wnd".into(), json!(e.rcv_wnd));
        m.insert("sk_rcvbuf".into(), json!(e.sk_rcvbuf));
        m.insert("rcvq_space".into(), json!(e.rcvq_space));
        m.insert("rcvbuf_locked".into(), json!(self.has(flag::RCVBUF_LOCKED)));
        m.insert("rcv_mss".into(), json!(e.rcv_mss));
        m.insert("advmss".into(), json!(e.advmss));
        if matches!(self.kind, "ratio" | "space" | "close") {
            m.insert(
                "prev_window_clamp".into(),
                opt(prev, json!(e.prev_window_clamp)),
            );
            m.insert(
                "prev_rcv_ssthresh".into(),
                opt(prev, json!(e.prev_rcv_ssthresh)),
            );
            m.insert("prev_sk_rcvbuf".into(), opt(prev, json!(e.prev_sk_rcvbuf)));
            m.insert(
                "prev_rcvq_space".into(),
                opt(prev, json!(e.prev_rcvq_space)),
            );
        }
        if self.kind == "ratio" {
            m.insert("skb_len".into(), opt(skb, json!(e.skb_len)));
            m.insert("skb_truesize".into(), opt(skb, json!(e.skb_truesize)));
            let gso = skb && e.gso_read != 0;
            m.insert("gso_size".into(), opt(gso, json!(e.gso_size)));
            m.insert("gso_segs".into(), opt(gso, json!(e.gso_segs)));
            m.insert("ifindex".into(), opt(skb, json!(e.ifindex)));
        }
        if self.kind == "init" {
            m.insert("rcv_wscale".into(), json!(e.rcv_wscale));
            m.insert("wscale_ok".into(), json!(self.has(flag::WSCALE_OK)));
            let p = self.has(flag::INIT_PARAMS);
            m.insert("space".into(), opt(p, json!(e.init_space)));
            m.insert("mss".into(), opt(p, json!(e.init_mss)));
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ev: &Event) -> Vec<u8> {
        // SAFETY: Event is repr(C) plain data.
        unsafe {
            std::slice::from_raw_parts(
                ev as *const Event as *const u8,
                std::mem::size_of::<Event>(),
            )
        }
        .to_vec()
    }

    fn ratio_event() -> Event {
        let mut laddr = [0u8; 16];
        laddr[..4].copy_from_slice(&[10, 0, 0, 2]);
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"recv");
        Event {
            ts_ns: 42,
            cookie: 4097,
            netns: 4026531840,
            pid: 77,
            comm,
            laddr,
            raddr: [0; 16],
            lport: 5201,
            rport: 40000,
            kind: kind::RATIO,
            family: libc::AF_INET as u8,
            hook: hook::TP_TCP_PROBE,
            flags: flag::RATIO_PRESENT | flag::SKB | flag::PREV | flag::PID | flag::COOKIE,
            scaling_ratio: 162,
            prev_scaling_ratio: 128,
            window_clamp: 663552,
            skb_len: 1448,
            skb_truesize: 2280,
            ..Event::default()
        }
    }

    #[test]
    fn decodes_a_ratio_event() {
        let r = decode(&raw(&ratio_event())).unwrap();
        assert_eq!(r.kind, "ratio");
        assert_eq!(r.laddr.to_string(), "10.0.0.2");
        assert_eq!(r.comm.as_deref(), Some("recv"));
        assert_eq!(r.skb_ratio(), Some(162));
        let j = r.to_json(None);
        assert_eq!(j["prev_scaling_ratio"], 128);
        assert_eq!(j["skb_truesize"], 2280);
        assert_eq!(j["cookie"], 4097);
        assert_eq!(j["family"], "ipv4");
        assert_eq!(j["pid"], 77);
    }

    #[test]
    fn absent_values_are_null() {
        let mut e = ratio_event();
        e.flags = 0; // no ratio on this kernel, no packet, no pid, no cookie
        let j = decode(&raw(&e)).unwrap().to_json(None);
        for k in [
            "scaling_ratio",
            "prev_scaling_ratio",
            "skb_len",
            "skb_truesize",
            "pid",
            "comm",
            "cookie",
            "prev_window_clamp",
        ] {
            assert!(j[k].is_null(), "{k} should be null: {j}");
        }
        assert_eq!(j["window_clamp"], 663552);
    }

    #[test]
    fn ipv6_addresses() {
        let mut e = ratio_event();
        e.family = libc::AF_INET6 as u8;
        e.laddr = std::net::Ipv6Addr::LOCALHOST.octets();
        let r = decode(&raw(&e)).unwrap();
        assert_eq!(r.laddr.to_string(), "::1");
        assert_eq!(r.to_json(None)["family"], "ipv6");
    }

    #[test]
    fn rejects_short_and_unknown() {
        assert!(decode(&[0u8; 8]).unwrap_err().to_string().contains("short"));
        let mut e = ratio_event();
        e.kind = 99;
        assert!(decode(&raw(&e))
            .unwrap_err()
            .to_string()
            .contains("unknown"));
    }
}
