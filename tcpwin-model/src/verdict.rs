//! Which limit binds a socket's window: pure functions over [`SockFacts`] and [`HostLimits`].
//!
//! The verdict rests on rate against window / RTT first (the ceiling): a flow that moves at 70 %
//! of its ceiling or more is window-limited; the kernel's rwnd-limited time is reported beside it
//! but not trusted alone (it counts sndbuf-limited periods first, and BBR paces below the window,
//! showing ~40 % rwnd-limited where cubic shows ~99 %). Then the cap that makes the window what
//! it is: scaling not negotiated, the application not reading, memory pressure, a clamp below
//! the buffer, a locked buffer, autotuning at its maximum, a low scaling ratio. Each verdict
//! names the binding setting and the value that would lift it.
use serde::{Deserialize, Serialize};
use tcpwin_common::formula::{max_scaled_window, space_from_win, win_from_space};

use crate::facts::{HostLimits, SockFacts};

/// A flow at this share of its window / RTT ceiling or more is window-limited.
pub const WINDOW_LIMITED_SHARE: f64 = 0.7;
/// Ratios under this (70 % of the buffer) are called low: one segment per packet gives 158-162 at
/// MTU 1500 and page-sized buffers (XDP) 85-89, while any aggregation lifts it (two segments
/// merged: 193; GRO on a NIC or veth: 229; MTU 9000: 232-234; all measured on this machine kind).
pub const LOW_RATIO: u8 = 180;
/// A clamp below this share of what the buffer allows was set by a user or a route.
const CLAMP_SLACK: f64 = 0.95;
/// A sender the kernel counted sndbuf-limited for more than this share of its busy time is
/// bound by its own send buffer.
const SNDBUF_LIMITED_SHARE: f64 = 0.5;
/// A buffer at this share of `tcp_rmem[2]` has reached autotuning's maximum.
const AT_MAX: f64 = 0.95;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    WscaleOff,
    RcvbufLocked,
    AutotuneMax,
    WindowClamp,
    LowRatio,
    AppNotReading,
    MemoryPressure,
    NotWindowLimited,
    PeerWindow,
    Sndbuf,
    /// no data moved in the interval
    Idle,
    /// a fact the decision needs is absent (e.g. no RTT sample yet)
    Unknown,
}

impl Limit {
    pub const ALL: [Limit; 12] = [
        Limit::WscaleOff,
        Limit::RcvbufLocked,
        Limit::AutotuneMax,
        Limit::WindowClamp,
        Limit::LowRatio,
        Limit::AppNotReading,
        Limit::MemoryPressure,
        Limit::NotWindowLimited,
        Limit::PeerWindow,
        Limit::Sndbuf,
        Limit::Idle,
        Limit::Unknown,
    ];

    /// The id used in text, JSON and metric labels.
    pub fn id(self) -> &'static str {
        match self {
            Limit::WscaleOff => "wscale-off",
            Limit::RcvbufLocked => "rcvbuf-locked",
            Limit::AutotuneMax => "autotune-max",
            Limit::WindowClamp => "window-clamp",
            Limit::LowRatio => "low-ratio",
            Limit::AppNotReading => "app-not-reading",
            Limit::MemoryPressure => "memory-pressure",
            Limit::NotWindowLimited => "not-window-limited",
            Limit::PeerWindow => "peer-window",
            Limit::Sndbuf => "sndbuf",
            Limit::Idle => "idle",
            Limit::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Receiving,
    Sending,
    Idle,
}

impl Side {
    /// As serialized.
    pub fn id(self) -> &'static str {
        match self {
            Side::Receiving => "receiving",
            Side::Sending => "sending",
            Side::Idle => "idle",
        }
    }
}

/// What a verdict was judged over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// the interval since the socket was last read (rates from the deltas)
    Interval,
    /// one reading: what the socket's counters hold over its life
    Life,
}

/// One socket's verdict over an interval (or over what its counters hold).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub limit: Limit,
    pub side: Side,
    pub basis: Basis,
    /// rate >= 70 % of the ceiling; null when the rate is unknown (one snapshot)
    pub window_limited: Option<bool>,
    /// achieved rate over the interval, bit/s
    pub rate_bps: Option<u64>,
    pub rtt_us: Option<u32>,
    /// the largest window this end can advertise now (receiving) or the peer's (sending)
    pub window: Option<u64>,
    /// window / RTT, bit/s
    pub ceiling_bps: Option<u64>,
    /// the rate the suggestion is sized for, and its bandwidth-delay product
    pub target_bps: Option<u64>,
    pub bdp_bytes: Option<u64>,
    /// share of busy time the kernel counted rwnd-limited (sending end)
    pub rwnd_limited_share: Option<f64>,
    /// the setting that makes the window what it is
    pub setting: Option<String>,
    /// the change that lifts it
    pub suggested: Option<String>,
}

/// What a verdict is computed from.
pub struct Input<'a> {
    pub now: &'a SockFacts,
    /// the same socket one interval earlier (rates from deltas); None: one snapshot
    pub before: Option<&'a SockFacts>,
    pub host: &'a HostLimits,
    /// the rate a suggestion is sized for (e.g. the path's bottleneck); default twice the
    /// current ceiling
    pub target_bps: Option<u64>,
}

fn delta(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(before?))
}

fn ceiling_bps(window: u64, rtt_us: u32) -> u64 {
    (window as f64 * 8.0 * 1e6 / rtt_us.max(1) as f64) as u64
}

fn bdp(rate_bps: u64, rtt_us: u32) -> u64 {
    (rate_bps as f64 * rtt_us as f64 / 8e6).ceil() as u64
}

/// Human rates: 1 Gbit/s, 26.2 Mbit/s.
pub fn fmt_rate(bps: u64) -> String {
    let b = bps as f64;
    if b >= 1e9 {
        format!("{:.2} Gbit/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} Mbit/s", b / 1e6)
    } else {
        format!("{:.0} kbit/s", b / 1e3)
    }
}

fn fmt_rtt(us: u32) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// Decides one socket's verdict.
pub fn verdict(i: &Input) -> Verdict {
    let f = i.now;
    let dt_s = i
        .before
        .map(|b| f.ts_ns.saturating_sub(b.ts_ns) as f64 / 1e9)
        .filter(|d| *d > 0.0);
    let (rx, tx) = match i.before {
        Some(b) => (
            delta(f.bytes_received, b.bytes_received),
            delta(f.bytes_acked, b.bytes_acked),
        ),
        None => (f.bytes_received, f.bytes_acked),
    };
    let side = match (rx.unwrap_or(0), tx.unwrap_or(0)) {
        (0, 0) => Side::Idle,
        (r, t) if r >= t => Side::Receiving,
        _ => Side::Sending,
    };
    let rate = |bytes: Option<u64>| Some((bytes? as f64 * 8.0 / dt_s?) as u64);
    let basis = if dt_s.is_some() {
        Basis::Interval
    } else {
        Basis::Life
    };
    let v = match side {
        Side::Receiving => receiving(i, rate(rx)),
        Side::Sending => sending(i, rate(tx)),
        Side::Idle => Verdict {
            limit: if i.before.is_some() {
                Limit::Idle
            } else {
                // no interval: judge the window the socket would use
                receiving(i, None).limit
            },
            side,
            ..empty()
        },
    };
    Verdict { basis, ..v }
}

impl Verdict {
    /// Fills the numbers every verdict carries: window, RTT, ceiling (window / RTT), whether the
    /// rate reaches it, the target and its BDP. Returns (ceiling, target, BDP).
    fn measure(
        &mut self,
        window: u64,
        rtt: u32,
        rate: Option<u64>,
        target: Option<u64>,
    ) -> (u64, u64, u64) {
        let ceiling = ceiling_bps(window, rtt);
        let target = target.unwrap_or(2 * ceiling);
        let need = bdp(target, rtt);
        self.window = Some(window);
        self.rtt_us = Some(rtt);
        self.ceiling_bps = Some(ceiling);
        self.window_limited = rate.map(|r| r as f64 >= WINDOW_LIMITED_SHARE * ceiling as f64);
        self.target_bps = Some(target);
        self.bdp_bytes = Some(need);
        (ceiling, target, need)
    }
}

fn empty() -> Verdict {
    Verdict {
        limit: Limit::Unknown,
        side: Side::Idle,
        basis: Basis::Life,
        window_limited: None,
        rate_bps: None,
        rtt_us: None,
        window: None,
        ceiling_bps: None,
        target_bps: None,
        bdp_bytes: None,
        rwnd_limited_share: None,
        setting: None,
        suggested: None,
    }
}

fn receiving(i: &Input, rate: Option<u64>) -> Verdict {
    let f = i.now;
    let h = i.host;
    let mut v = Verdict {
        side: Side::Receiving,
        rate_bps: rate,
        ..empty()
    };
    let (Some(clamp), Some(wscale_ok)) = (f.window_clamp, f.wscale_ok) else {
        v.setting = Some("window_clamp or wscale_ok not read by this source".into());
        return v;
    };
    let shift = if wscale_ok {
        f.rcv_wscale.unwrap_or(0)
    } else {
        0
    };
    let window = (clamp as u64).min(max_scaled_window(shift));
    let Some(rtt) = f.receiver_rtt_us() else {
        v.window = Some(window);
        v.setting = Some("no RTT sample yet".into());
        return v;
    };
    let (ceiling, target, need) = v.measure(window, rtt, rate, i.target_bps);
    let ratio = f.scaling_ratio;
    let for_target = format!("for {} x {} (BDP {need} B)", fmt_rate(target), fmt_rtt(rtt));
    let need_buffer = ratio.and_then(|r| space_from_win(need, r));
    let buffer_for = |what: &str| match (ratio, need_buffer) {
        (Some(r), Some(b)) => format!("{for_target} at ratio {r} the buffer must be {b}{what}"),
        _ => format!("{for_target} the window must reach {need} B{what}"),
    };

    // the application, not the buffer, closes the window: a zero window, or data waiting to be
    // read (a quarter of the window or more) while the flow runs at what the window still
    // advertised allows (with no rate: half the window unread); not when the flow runs at the
    // full window's ceiling anyway (then the cap binds, and a queue seen at one instant is noise)
    let unread = f.unread.unwrap_or(0) as u64;
    let advertised = f.rcv_wnd.map(u64::from).unwrap_or(window);
    let queue_full = match rate {
        Some(r) => {
            4 * unread >= window
                && r as f64 >= WINDOW_LIMITED_SHARE * ceiling_bps(advertised, rtt) as f64
        }
        None => unread > 0 && 2 * unread >= window,
    };
    let not_reading = (f.rcv_wnd == Some(0) || queue_full) && v.window_limited != Some(true);
    if not_reading {
        v.limit = Limit::AppNotReading;
        v.setting = Some(format!(
            "{unread} bytes received and not read by the application{}",
            if f.rcv_wnd == Some(0) {
                " (zero window advertised)"
            } else {
                ""
            }
        ));
        v.suggested =
            Some("the application must read faster: a larger buffer only delays the stall".into());
        return v;
    }
    if v.window_limited == Some(false) {
        v.limit = Limit::NotWindowLimited;
        v.setting = Some(format!(
            "the transfer used {} of a {} ceiling",
            fmt_rate(rate.unwrap_or(0)),
            fmt_rate(ceiling)
        ));
        v.suggested = Some("look elsewhere: the sender, the path or congestion".into());
        return v;
    }
    if !wscale_ok {
        v.limit = Limit::WscaleOff;
        v.setting = Some(match h.tcp_window_scaling {
            Some(false) => "window scaling off on this host (net.ipv4.tcp_window_scaling=0): the window stays <= 65535 for the connection's life".into(),
            Some(true) => "the peer did not offer window scaling in its SYN: the window stays <= 65535 for the connection's life".into(),
            None => "window scaling not negotiated: the window stays <= 65535 for the connection's life".into(),
        });
        v.suggested = Some(format!(
            "net.ipv4.tcp_window_scaling=1 on both ends (new connections); {for_target} the window needs {need} B"
        ));
        return v;
    }
    if h.memory_pressure == Some(true)
        && f.rcv_ssthresh
            .zip(f.advmss)
            .is_some_and(|(s, a)| s <= 4 * a)
    {
        v.limit = Limit::MemoryPressure;
        v.setting =
            Some("TCP memory pressure (net.ipv4.tcp_mem) clamps rcv_ssthresh to 4 x advmss".into());
        v.suggested = Some("raise net.ipv4.tcp_mem, or reduce the host's TCP memory use".into());
        return v;
    }
    let rcvbuf = f.sk_rcvbuf.map(u64::from);
    let buffer_window = rcvbuf.zip(ratio).map(|(b, r)| win_from_space(b, r));
    if let Some(bw) = buffer_window {
        if (clamp as f64) < CLAMP_SLACK * bw as f64 && (clamp as u64) < max_scaled_window(shift) {
            v.limit = Limit::WindowClamp;
            v.setting = Some(format!(
                "window_clamp={clamp} below the {bw} the buffer allows (TCP_WINDOW_CLAMP or a route `window` metric)"
            ));
            v.suggested = Some(format!(
                "{for_target} the clamp must be >= {need}: raise or remove it"
            ));
            return v;
        }
    }
    let locked = f.rcvbuf_locked == Some(true);
    if locked {
        v.limit = Limit::RcvbufLocked;
        let b = rcvbuf.unwrap_or(0);
        let capped = h.rmem_max.is_some_and(|m| b == 2 * m);
        v.setting = Some(if capped {
            format!(
                "SO_RCVBUF capped by net.core.rmem_max={} (sk_rcvbuf {b} = 2 x rmem_max); autotuning is off for the socket",
                h.rmem_max.unwrap_or(0)
            )
        } else {
            format!("SO_RCVBUF set by the application (sk_rcvbuf {b}); autotuning is off for the socket")
        });
        let half = need_buffer.map(|n| n.div_ceil(2));
        v.suggested = Some(match half {
            Some(h2) if capped => buffer_for(&format!(
                ", so net.core.rmem_max and the SO_RCVBUF request >= {h2}"
            )),
            Some(h2) => buffer_for(&format!(
                ", so an SO_RCVBUF request >= {h2} (or none: autotuning)"
            )),
            None => buffer_for(""),
        });
        return v;
    }
    let max = h.tcp_rmem.map(|t| t[2]);
    let autotune_off = h.tcp_moderate_rcvbuf == Some(false);
    let at_max = max
        .zip(rcvbuf)
        .is_some_and(|(m, b)| b as f64 >= AT_MAX * m as f64);
    if at_max || autotune_off {
        let setting = if autotune_off {
            format!(
                "autotuning off (net.ipv4.tcp_moderate_rcvbuf=0): the buffer stays at tcp_rmem[1]={}",
                h.tcp_rmem.map(|t| t[1]).unwrap_or(0)
            )
        } else {
            format!(
                "autotuning reached net.ipv4.tcp_rmem max={} of the socket's namespace (net.core.rmem_max does not cap autotuning)",
                max.unwrap_or(0)
            )
        };
        if ratio.is_some_and(|r| r < LOW_RATIO) {
            v.limit = Limit::LowRatio;
            let r = ratio.unwrap_or(0);
            v.setting = Some(format!(
                "scaling_ratio={r}: the window is {:.0} % of the buffer (little payload per truesize: GRO off, a small MTU or XDP on the ingress interface); {setting}",
                r as f64 * 100.0 / 256.0
            ));
            v.suggested = Some(format!(
                "receiver GRO on or a larger MTU (229/256 with GRO at MTU 1500), or {}",
                buffer_for("")
            ));
        } else {
            v.limit = Limit::AutotuneMax;
            v.setting = Some(setting);
            v.suggested = Some(buffer_for(if autotune_off {
                ", so tcp_moderate_rcvbuf=1 or tcp_rmem default >= that"
            } else {
                ", so net.ipv4.tcp_rmem max >= that"
            }));
        }
        return v;
    }
    // autotuning still has room: the window grows with the transfer
    v.limit = Limit::NotWindowLimited;
    v.setting = Some(format!(
        "autotuning can still grow the buffer (sk_rcvbuf {} of tcp_rmem max {})",
        rcvbuf.unwrap_or(0),
        max.map(|m| m.to_string()).unwrap_or_else(|| "?".into())
    ));
    v
}

fn sending(i: &Input, rate: Option<u64>) -> Verdict {
    let f = i.now;
    let mut v = Verdict {
        side: Side::Sending,
        rate_bps: rate,
        ..empty()
    };
    let busy = match i.before {
        Some(b) => delta(f.busy_us, b.busy_us),
        None => f.busy_us,
    };
    let rwnd = match i.before {
        Some(b) => delta(f.rwnd_limited_us, b.rwnd_limited_us),
        None => f.rwnd_limited_us,
    };
    let sndbuf = match i.before {
        Some(b) => delta(f.sndbuf_limited_us, b.sndbuf_limited_us),
        None => f.sndbuf_limited_us,
    };
    let share = |x: Option<u64>| {
        busy.filter(|b| *b > 0)
            .zip(x)
            .map(|(b, x)| x as f64 / b as f64)
    };
    v.rwnd_limited_share = share(rwnd);
    let (Some(snd_wnd), Some(rtt)) = (f.snd_wnd, f.srtt_us.filter(|s| *s > 0)) else {
        v.setting = Some("snd_wnd or the RTT not read by this source".into());
        return v;
    };
    let window = snd_wnd as u64;
    let (ceiling, target, need) = v.measure(window, rtt, rate, i.target_bps);
    if share(sndbuf).is_some_and(|s| s > SNDBUF_LIMITED_SHARE) {
        v.limit = Limit::Sndbuf;
        v.setting = Some(format!(
            "own send buffer (sk_sndbuf {}): the kernel counted {:.0} % of busy time sndbuf-limited",
            f.sk_sndbuf.unwrap_or(0),
            share(sndbuf).unwrap_or(0.0) * 100.0
        ));
        v.suggested = Some(format!(
            "for {} x {} net.ipv4.tcp_wmem max (or SO_SNDBUF) >= {}",
            fmt_rate(target),
            fmt_rtt(rtt),
            2 * need
        ));
        return v;
    }
    if v.window_limited == Some(true) {
        v.limit = Limit::PeerWindow;
        v.setting = Some(format!(
            "the peer's advertised window {snd_wnd} B (peer wscale {}) bounds the rate at {} over {}",
            f.snd_wscale.map(|w| w.to_string()).unwrap_or_else(|| "?".into()),
            fmt_rate(ceiling),
            fmt_rtt(rtt)
        ));
        v.suggested = Some(format!(
            "for {} the receiver must advertise >= {need} B: run `tcpwin-trace ss` on the peer for its verdict",
            fmt_rate(target)
        ));
        return v;
    }
    match rate {
        Some(r) => {
            v.limit = Limit::NotWindowLimited;
            v.setting = Some(format!(
                "the transfer used {} of the {} the peer's window allows",
                fmt_rate(r),
                fmt_rate(ceiling)
            ));
        }
        None => {
            v.limit = Limit::Unknown;
            v.setting = Some(
                "one snapshot has no rate to hold against the peer's window: repeat with -i MS"
                    .into(),
            );
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS18: u32 = 18_000;

    fn host() -> HostLimits {
        HostLimits {
            rmem_max: Some(425_984),
            tcp_rmem: Some([4096, 131072, 33554432]),
            tcp_window_scaling: Some(true),
            tcp_moderate_rcvbuf: Some(true),
            memory_pressure: Some(false),
            ..Default::default()
        }
    }

    /// A receiver at `ts` seconds that got `rx` bytes so far.
    fn rcv(ts: f64, rx: u64) -> SockFacts {
        SockFacts {
            ts_ns: (ts * 1e9) as u64,
            scaling_ratio: Some(162),
            window_clamp: Some(win_from_space(851_968, 162) as u32),
            rcv_ssthresh: Some(500_000),
            rcv_wnd: Some(500_000),
            sk_rcvbuf: Some(851_968),
            rcvbuf_locked: Some(true),
            wscale_ok: Some(true),
            rcv_wscale: Some(7),
            snd_wscale: Some(7),
            rcv_mss: Some(1448),
            advmss: Some(1448),
            unread: Some(0),
            rcv_rtt_us: Some(MS18),
            srtt_us: Some(200),
            bytes_received: Some(rx),
            bytes_acked: Some(1),
            ..Default::default()
        }
    }

    fn judge(before: &SockFacts, now: &SockFacts, h: &HostLimits, target: Option<u64>) -> Verdict {
        verdict(&Input {
            now,
            before: Some(before),
            host: h,
            target_bps: target,
        })
    }

    /// The 003 story: SO_RCVBUF 4 MB capped by rmem_max 425984; at 1 Gbit/s x 18 ms the buffer
    /// must be 3 555 556 at ratio 162, so rmem_max and the request >= 1 777 778.
    #[test]
    fn rcvbuf_capped_by_rmem_max() {
        let h = host();
        let b = rcv(1.0, 0);
        // 539 136 B window / 18 ms = 240 Mbit/s ceiling; 210 Mbit/s measured
        let n = rcv(2.0, 210_000_000 / 8);
        let v = judge(&b, &n, &h, Some(1_000_000_000));
        assert_eq!(v.limit, Limit::RcvbufLocked, "{v:?}");
        assert_eq!(v.window_limited, Some(true));
        assert_eq!(v.bdp_bytes, Some(2_250_000));
        let s = v.suggested.unwrap();
        assert!(s.contains("3555556") && s.contains(">= 1777778"), "{s}");
        assert!(v.setting.unwrap().contains("rmem_max=425984"));
    }

    #[test]
    fn wscale_off_says_which_side() {
        let mut h = host();
        let mut n = rcv(2.0, 3_200_000);
        n.wscale_ok = Some(false);
        n.rcv_wscale = Some(0);
        n.window_clamp = Some(65535);
        n.rcvbuf_locked = Some(false);
        let v = judge(&rcv(1.0, 0), &n, &h, None);
        assert_eq!(v.limit, Limit::WscaleOff, "{v:?}");
        assert_eq!(v.window, Some(65535));
        // 65535 B / 18 ms = 29.1 Mbit/s
        assert_eq!(v.ceiling_bps, Some(29_126_666));
        assert!(v.setting.as_ref().unwrap().contains("peer did not offer"));
        h.tcp_window_scaling = Some(false);
        let v = judge(&rcv(1.0, 0), &n, &h, None);
        assert!(v.setting.unwrap().contains("tcp_window_scaling=0"));
    }

    #[test]
    fn autotune_max_does_not_blame_rmem_max() {
        let h = HostLimits {
            tcp_rmem: Some([4096, 131072, 1 << 20]),
            ..host()
        };
        // 937984 B / 18 ms = 417 Mbit/s ceiling
        let mut n = rcv(2.0, 400_000_000 / 8);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(229);
        n.sk_rcvbuf = Some(1 << 20);
        n.window_clamp = Some(win_from_space(1 << 20, 229) as u32);
        let v = judge(&rcv(1.0, 0), &n, &h, Some(1_000_000_000));
        assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
        let (set, sug) = (v.setting.unwrap(), v.suggested.unwrap());
        assert!(set.contains("tcp_rmem max=1048576"), "{set}");
        assert!(sug.contains("tcp_rmem max >="), "{sug}");
        assert!(!sug.contains("rmem_max and"), "{sug}");
    }

    #[test]
    fn low_ratio_on_a_capped_buffer() {
        let h = HostLimits {
            tcp_moderate_rcvbuf: Some(false),
            ..host()
        };
        // 663552 B / 18 ms = 295 Mbit/s ceiling
        let mut n = rcv(2.0, 280_000_000 / 8);
        n.rcvbuf_locked = Some(false);
        n.sk_rcvbuf = Some(1 << 20);
        n.window_clamp = Some(win_from_space(1 << 20, 162) as u32);
        let v = judge(&rcv(1.0, 0), &n, &h, None);
        assert_eq!(v.limit, Limit::LowRatio, "{v:?}");
        // with GRO the same buffer gives 937984 B: 417 Mbit/s
        n.scaling_ratio = Some(229);
        n.window_clamp = Some(win_from_space(1 << 20, 229) as u32);
        n.bytes_received = Some(400_000_000 / 8);
        assert_eq!(judge(&rcv(1.0, 0), &n, &h, None).limit, Limit::AutotuneMax);
    }

    #[test]
    fn window_clamp_below_the_buffer() {
        let mut n = rcv(2.0, 50_000_000 / 8);
        n.rcvbuf_locked = Some(false);
        n.window_clamp = Some(100_000);
        let v = judge(&rcv(1.0, 0), &n, &host(), None);
        assert_eq!(v.limit, Limit::WindowClamp, "{v:?}");
    }

    #[test]
    fn app_not_reading_and_memory_pressure() {
        let mut n = rcv(2.0, 1_000);
        n.rcv_wnd = Some(0);
        n.unread = Some(600_000);
        assert_eq!(
            judge(&rcv(1.0, 0), &n, &host(), None).limit,
            Limit::AppNotReading
        );
        let mut n = rcv(2.0, 200_000_000 / 8);
        n.rcvbuf_locked = Some(false);
        n.rcv_ssthresh = Some(4 * 1448);
        let h = HostLimits {
            memory_pressure: Some(true),
            ..host()
        };
        assert_eq!(
            judge(&rcv(1.0, 0), &n, &h, None).limit,
            Limit::MemoryPressure
        );
    }

    #[test]
    fn a_reader_behind_keeps_the_advertised_window_small() {
        // 20 Mbit/s through a 50 000 B advertised window at 18 ms (22 Mbit/s): the application
        // leaves 400 000 B unread
        let mut n = rcv(2.0, 20_000_000 / 8);
        n.unread = Some(400_000);
        n.rcv_wnd = Some(50_000);
        n.rcvbuf_locked = Some(false);
        let v = judge(&rcv(1.0, 0), &n, &host(), None);
        assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    }

    #[test]
    fn a_queue_seen_while_the_flow_runs_at_its_ceiling_is_not_blamed() {
        // autotuning at its cap, 170 of 175 Mbit/s, caught with 198 KB unread
        let h = HostLimits {
            tcp_rmem: Some([4096, 131072, 524288]),
            ..host()
        };
        let mut n = rcv(2.0, 170_000_000 / 8);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(193);
        n.sk_rcvbuf = Some(524288);
        n.window_clamp = Some(395264);
        n.unread = Some(198_120);
        n.rcv_wnd = Some(190_000);
        let v = judge(&rcv(1.0, 0), &n, &h, None);
        assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    }

    #[test]
    fn a_queue_that_does_not_slow_the_flow_is_not_blamed() {
        // half the window unread, but the flow runs at a tenth of its ceiling
        let mut n = rcv(2.0, 24_000_000 / 8);
        n.unread = Some(300_000);
        let v = judge(&rcv(1.0, 0), &n, &host(), None);
        assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    }

    #[test]
    fn slow_flow_is_not_window_limited() {
        // 40 Mbit/s through a bottleneck with a 240 Mbit/s ceiling
        let v = judge(&rcv(1.0, 0), &rcv(2.0, 40_000_000 / 8), &host(), None);
        assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
        assert_eq!(v.window_limited, Some(false));
        let v = judge(&rcv(1.0, 5), &rcv(2.0, 5), &host(), None);
        assert_eq!(v.limit, Limit::Idle);
    }

    fn snd(ts: f64, acked: u64, busy: u64, rwnd: u64) -> SockFacts {
        SockFacts {
            ts_ns: (ts * 1e9) as u64,
            bytes_received: Some(0),
            bytes_acked: Some(acked),
            snd_wnd: Some(524_280),
            snd_wscale: Some(7),
            srtt_us: Some(MS18),
            busy_us: Some(busy),
            rwnd_limited_us: Some(rwnd),
            sndbuf_limited_us: Some(0),
            sk_sndbuf: Some(4 << 20),
            ..Default::default()
        }
    }

    #[test]
    fn sending_end_peer_window_and_not() {
        // 524280 B / 18 ms = 233 Mbit/s; 205 Mbit/s measured, cubic: 99 % rwnd-limited
        let v = judge(
            &snd(1.0, 0, 0, 0),
            &snd(2.0, 205_000_000 / 8, 1_000_000, 990_000),
            &host(),
            None,
        );
        assert_eq!(
            (v.limit, v.side),
            (Limit::PeerWindow, Side::Sending),
            "{v:?}"
        );
        assert_eq!(v.rwnd_limited_share, Some(0.99));
        let v = judge(
            &snd(1.0, 0, 0, 0),
            &snd(2.0, 40_000_000 / 8, 1_000_000, 0),
            &host(),
            None,
        );
        assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
        let mut n = snd(2.0, 10_000_000, 1_000_000, 0);
        n.sndbuf_limited_us = Some(900_000);
        assert_eq!(
            judge(&snd(1.0, 0, 0, 0), &n, &host(), None).limit,
            Limit::Sndbuf
        );
    }

    #[test]
    fn absent_facts_give_unknown() {
        let mut n = rcv(2.0, 1_000_000);
        n.rcv_rtt_us = None;
        n.srtt_us = None;
        let v = judge(&rcv(1.0, 0), &n, &host(), None);
        assert_eq!(v.limit, Limit::Unknown);
        let ids: std::collections::BTreeSet<&str> = Limit::ALL.iter().map(|l| l.id()).collect();
        assert_eq!(ids.len(), Limit::ALL.len());
        for l in Limit::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), l.id());
        }
    }
}
