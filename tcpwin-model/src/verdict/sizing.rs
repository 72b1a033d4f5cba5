//! How fixes are sized and said: the window a rate needs at the base RTT, the unit sized per
//! without `--target`, rates and RTTs in words, a sysctl as a command in the socket's namespace.
/// A millisecond (µs): the least a queue at the bottleneck adds to the RTT, and the least base
/// RTT on which a rate held against window / RTT says anything (at µs RTTs the ACK clock paces
/// every flow).
pub(super) const QUEUE_MIN_US: u32 = 1000;

/// The rate the fixes are sized per, without `--target`: 100 Mbit/s, or on short paths the
/// first power of ten whose window at the base RTT is at least `PER_RATE_MIN_WINDOW` (a window
/// of 38 B "per 100 Mbit/s" on a 3 µs path says nothing), at most 100 Gbit/s.
const PER_RATE_BPS: u64 = 100_000_000;
const PER_RATE_MIN_WINDOW: u64 = 16 << 10;
const PER_RATE_MAX_BPS: u64 = 100_000_000_000;

/// The unit the fixes are sized per on a path of base RTT `base_us`.
pub(super) fn per_rate(base_us: u32) -> u64 {
    let mut r = PER_RATE_BPS;
    while r < PER_RATE_MAX_BPS && bdp(r, base_us) < PER_RATE_MIN_WINDOW {
        r *= 10;
    }
    r
}

/// A buffer at 95 % of its sysctl's max (`tcp_rmem[2]`, `tcp_wmem[2]`): autotuning's maximum.
pub(super) fn at_max(buffer: u64, sysctl: Option<[u64; 3]>) -> bool {
    sysctl.is_some_and(|t| buffer as f64 >= 0.95 * t[2] as f64)
}

/// window / RTT, bit/s.
pub(super) fn ceiling_bps(window: u64, rtt_us: u32) -> u64 {
    (window as f64 * 8.0 * 1e6 / rtt_us.max(1) as f64) as u64
}

/// The bandwidth-delay product, bytes.
pub(super) fn bdp(rate_bps: u64, rtt_us: u32) -> u64 {
    (rate_bps as f64 * rtt_us as f64 / 8e6).ceil() as u64
}

/// Bytes a full segment carries on the wire besides its payload: Ethernet 14, IPv4 20, TCP 20
/// and its timestamps 12 (what `mss_cache` leaves out of a 1500 B MTU, and the frame header).
const WIRE_OVERHEAD: u64 = 66;

/// The payload rate a link at `rate` carries in full segments of `mss` bytes. A window's
/// ceiling (window / RTT) counts payload; a link's rate (the NIC's, a shaper's, the provider's)
/// counts the headers too: 300 Mbit/s carries 286.9 Mbit/s of 1448 B segments. What `--target`
/// is held against wherever a ceiling is said to allow it.
pub(super) fn payload_rate(rate: u64, mss: Option<u32>) -> u64 {
    let mss = mss.filter(|m| *m >= 536).unwrap_or(1448) as u64;
    (rate as u128 * mss as u128 / (mss + WIRE_OVERHEAD) as u128) as u64
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

/// Durations as people read them: 48 us, 18.2 ms.
pub fn fmt_rtt(us: impl Into<u64>) -> String {
    let us = us.into();
    if us < 1000 {
        format!("{us} us")
    } else {
        format!("{:.1} ms", us as f64 / 1000.0)
    }
}

/// Without `--target`, fixes are sized for this rate (a long fat network's, which the windows
/// of most slow transfers are far from), or on short paths the first power of ten whose window
/// means something there (`per_rate`).
pub(super) const DEFAULT_SIZING_BPS: u64 = 1_000_000_000;

/// A fix's window is the sized rate's BDP at the base RTT and this much more (a quarter): a
/// window exactly the BDP runs full at the rate asked, and the ratio it is computed with moves
/// with the packets' shape, so a fix sized to the byte leaves the window binding, or binding
/// again the moment the ratio dips.
const HEADROOM: f64 = 1.25;

/// The window a rate needs at the base RTT, and how it is said.
pub(super) struct Sizing {
    pub base_us: u32,
    pub target: Option<u64>,
}

impl Sizing {
    /// The rate sized for: the target, or the default.
    pub fn rate(&self) -> u64 {
        self.target
            .unwrap_or_else(|| per_rate(self.base_us).max(DEFAULT_SIZING_BPS))
    }
    /// The rate's bandwidth-delay product at the base RTT.
    pub fn bdp(&self) -> u64 {
        bdp(self.rate(), self.base_us)
    }
    /// The window a fix gives: the BDP with `HEADROOM`.
    pub fn window(&self) -> u64 {
        (self.bdp() as f64 * HEADROOM).ceil() as u64
    }
    /// Why this rate: `--target`, or the default and how to change it.
    pub fn why(&self) -> String {
        match self.target {
            Some(_) => "--target".into(),
            None => format!(
                "no --target: sized for {} (pass --target RATE, e.g. the path's bottleneck)",
                fmt_rate(self.rate())
            ),
        }
    }
    /// "for 1.00 Gbit/s at 18.0 ms base RTT (window 2812500 B: the BDP and a quarter)", and
    /// without a target how to size it for another rate
    pub fn words(&self) -> String {
        format!(
            "for {} at {} base RTT (window {} B: the BDP and a quarter{})",
            fmt_rate(self.rate()),
            fmt_rtt(self.base_us),
            self.window(),
            match self.target {
                Some(_) => String::new(),
                None => "; --target RATE sizes it for your rate".into(),
            }
        )
    }
}
