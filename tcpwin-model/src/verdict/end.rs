//! One end of a connection, read now and (maybe) one interval earlier, with its namespace's
//! limits: what it moved, its rates, its chrono shares, the zero windows it shows.
use crate::{
    facts::{HostLimits, SockFacts},
    id::SocketId,
};

#[derive(Clone, Copy)]
pub struct End<'a> {
    pub now: &'a SockFacts,
    pub before: Option<&'a SockFacts>,
    pub host: &'a HostLimits,
}

/// The kernel counted the writer sndbuf-limited this share of its busy time or more: it waited.
const WAITED_SHARE: f64 = 0.01;
/// A send buffer this full of data in flight takes nothing more until ACKs free it, whether or
/// not a write met it full (`SOCK_NOSPACE`): nginx `sendfile`, reno, 4.02 MB of 4.19 in flight,
/// the flag clear; OpenSSH's channel window holds 2 MB of 4.19 in flight.
const ALL_IN_FLIGHT: f64 = 0.9;

fn delta(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(before?))
}

impl<'a> End<'a> {
    /// This end as one reading shows it, with no interval.
    pub(super) fn at(&self, now: &'a SockFacts) -> End<'a> {
        End {
            now,
            before: None,
            host: self.host,
        }
    }

    /// The reader took 90 % of the window in one round trip (`rcvq_space`, autotuning's own
    /// measure) from a buffer autotuning cannot grow (it sizes one to twice that: 5-86 % taken
    /// on rows no window binds): the window is what the flow meets.
    pub(super) fn reader_filled_window(&self) -> bool {
        let (f, h) = (self.now, self.host);
        let fixed = f.rcvbuf_locked == Some(true)
            || h.tcp_moderate_rcvbuf == Some(false)
            || f.sk_rcvbuf
                .is_some_and(|b| super::sizing::at_max(b.into(), h.tcp_rmem));
        fixed && f.rcvq_space.unwrap_or(0) as f64 >= 0.9 * f.window_clamp.unwrap_or(u32::MAX) as f64
    }

    /// Seconds since the earlier reading.
    pub(super) fn dt_s(&self) -> Option<f64> {
        self.before
            .map(|b| self.now.ts_ns.saturating_sub(b.ts_ns) as f64 / 1e9)
            .filter(|d| *d > 0.0)
    }

    /// Bytes received and acknowledged: over the interval, or over the life.
    pub(super) fn moved(&self) -> (u64, u64) {
        let (n, b) = (self.now, self.before);
        let (rx, tx) = match b {
            Some(b) => (
                delta(n.bytes_received, b.bytes_received),
                delta(n.bytes_acked, b.bytes_acked),
            ),
            None => (n.bytes_received, n.bytes_acked),
        };
        (rx.unwrap_or(0), tx.unwrap_or(0))
    }

    /// The sending rate: over the interval, or bytes over busy time (the chrono: time with data
    /// in flight) for one snapshot.
    pub(super) fn send_rate(&self) -> Option<u64> {
        let (_, tx) = self.moved();
        match self.dt_s() {
            Some(dt) => Some((tx as f64 * 8.0 / dt) as u64),
            None => {
                let busy = self.now.busy_us.filter(|b| *b > 0)?;
                Some((tx as f64 * 8.0 * 1e6 / busy as f64) as u64)
            }
        }
    }

    pub(super) fn recv_rate(&self) -> Option<u64> {
        let (rx, _) = self.moved();
        Some((rx as f64 * 8.0 / self.dt_s()?) as u64)
    }

    pub(super) fn chrono_share(&self, f: impl Fn(&SockFacts) -> Option<u64>) -> Option<f64> {
        let Some(b) = self.before else {
            return self.life_share(f);
        };
        let busy = delta(self.now.busy_us, b.busy_us).filter(|b| *b > 0)?;
        Some(delta(f(self.now), f(b))? as f64 / busy as f64)
    }

    /// The share of the connection's whole busy time (its life so far) counted by `f`, one of
    /// the kernel's chrono counters.
    pub(super) fn life_share(&self, f: impl Fn(&SockFacts) -> Option<u64>) -> Option<f64> {
        let busy = self.now.busy_us.filter(|b| *b > 0)?;
        Some(f(self.now)? as f64 / busy as f64)
    }

    /// The time the sender was busy between the two readings, µs.
    pub(super) fn busy_between(&self) -> Option<u64> {
        delta(self.now.busy_us, self.before?.busy_us)
    }

    /// Who waited, by the kernel's own account: the writer waited on its send buffer (counted
    /// sndbuf-limited over the interval, found waiting for room at a reading of the buffer it
    /// has now, or with data queued up to `sk_sndbuf`, when the kernel takes no more, or nearly
    /// all of it in flight: [`ALL_IN_FLIGHT`]).
    /// `Some(false)` only where a reading says whether the writer waited (`SOCK_NOSPACE`) and
    /// none of these hold; None where the source reads none of it.
    pub(super) fn writer_waited(&self) -> Option<bool> {
        // a reading speaks of the buffer as it was then: one autotuning grew since (OpenSSH's
        // writer waited on 1.2 MB at 2 s, on none of the 3.9 MB it had a quarter second later)
        // says nothing of the buffer now
        let readings = || {
            [Some(self.now), self.before]
                .into_iter()
                .flatten()
                .filter(|f| f.sk_sndbuf >= self.now.sk_sndbuf)
        };
        let full = |f: &SockFacts| {
            f.wmem_queued.zip(f.sk_sndbuf).is_some_and(|(q, b)| q >= b)
                || f.inflight_bytes()
                    .zip(f.sk_sndbuf)
                    .is_some_and(|(i, b)| i as f64 >= ALL_IN_FLIGHT * b as f64)
        };
        let counted = self
            .chrono_share(|f| f.sndbuf_limited_us)
            .is_some_and(|x| x >= WAITED_SHARE);
        if counted || readings().any(|f| f.writer_waiting == Some(true) || full(f)) {
            return Some(true);
        }
        readings()
            .any(|f| f.writer_waiting.is_some())
            .then_some(false)
    }

    /// The peer advertises (almost) nothing while this end has data to send.
    pub(super) fn peer_zero_window(&self) -> bool {
        let mss = self.now.mss_cache.unwrap_or(1).max(1);
        self.now.snd_wnd.is_some_and(|w| w < mss)
            && self.now.wmem_queued.unwrap_or(0) > 0
            && self.now.state == crate::facts::ESTABLISHED
    }

    pub(super) fn tuple(&self) -> SocketId {
        self.now.id.clone()
    }

    /// A counter's growth over the interval, or its value over the life.
    pub(super) fn grew(&self, f: impl Fn(&SockFacts) -> Option<u32>) -> Option<u32> {
        match self.before {
            Some(b) => Some(f(self.now)?.wrapping_sub(f(b)?)),
            None => f(self.now),
        }
    }

    /// The share of the interval the sender had data in flight (its busy chrono over the
    /// elapsed time); None over a life (the connection's age is not known).
    pub(super) fn busy_share(&self) -> Option<f64> {
        let b = self.before?;
        let busy = self.now.busy_us?.saturating_sub(b.busy_us?) as f64 / 1e6;
        Some(busy / self.dt_s()?)
    }
}
