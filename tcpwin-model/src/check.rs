//! `tcpwin-trace check`: the host audited for receive windows, and whether a bandwidth-delay
//! product fits. Pure: facts in (sysctls, interfaces, the kernel's era), report out.
use serde::{Deserialize, Serialize};
use tcpwin_common::formula::{
    adv_win_scale_ratio, max_scaled_window, space_from_win, win_from_space,
};

use crate::{facts::HostLimits, verdict::fmt_rate};

/// The ratio a socket starts with on 6.10+ (`TCP_DEFAULT_SCALING_RATIO`), until packets are
/// measured.
pub const DEFAULT_RATIO: u8 = 128;

pub use crate::facts::Iface;

/// How the running kernel turns a buffer into a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Era {
    /// `tcp_sock.scaling_ratio` exists (6.6+): the ratio is measured from packets
    MeasuredRatio,
    /// before 6.6: `tcp_adv_win_scale` decides the share of the buffer
    AdvWinScale,
}

/// `--bdp RATE:RTT`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bdp {
    pub rate_bps: u64,
    pub rtt_us: u64,
}

impl Bdp {
    pub fn bytes(&self) -> u64 {
        (self.rate_bps as f64 * self.rtt_us as f64 / 8e6).ceil() as u64
    }
}

/// Whether one kind of socket can advertise the BDP here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fit {
    /// `autotuned` or `so_rcvbuf`
    pub socket: String,
    /// the largest buffer it can have, and the window that gives at the ratio
    pub max_buffer: Option<u64>,
    pub max_window: Option<u64>,
    pub fits: Option<bool>,
    /// sysctl lines that would make it fit
    pub fix: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub kernel: String,
    pub era: Era,
    /// the ratio the windows below are computed with, and where it comes from
    pub ratio: u8,
    pub ratio_source: String,
    pub limits: HostLimits,
    pub interfaces: Vec<Iface>,
    /// remarks on the settings (dead knobs, caps)
    pub notes: Vec<String>,
    pub bdp: Option<Bdp>,
    pub bdp_bytes: Option<u64>,
    pub fits: Vec<Fit>,
}

impl CheckReport {
    /// Every socket kind fits the BDP (or none was asked).
    pub fn fits_all(&self) -> bool {
        self.fits.iter().all(|f| f.fits != Some(false))
    }

    /// A socket of this kind (`autotuned`, `so_rcvbuf`) cannot advertise the BDP asked.
    pub fn misses(&self, kind: &str) -> bool {
        self.fits
            .iter()
            .any(|f| f.socket == kind && f.fits == Some(false))
    }
}

/// Builds the report from what the host said.
pub fn check(
    kernel: String,
    era: Era,
    (ratio, ratio_source): (u8, String),
    limits: HostLimits,
    interfaces: Vec<Iface>,
    bdp: Option<Bdp>,
) -> CheckReport {
    let notes = host_notes(&kernel, era, &limits, &interfaces);
    let need = bdp.map(|b| b.bytes());
    let fits = need.map(|n| fits(n, ratio, &limits)).unwrap_or_default();
    CheckReport {
        kernel,
        era,
        ratio,
        ratio_source,
        limits,
        interfaces,
        notes,
        bdp,
        bdp_bytes: need,
        fits,
    }
}

/// What the kernel, the namespace's settings and the interfaces mean for windows here.
fn host_notes(kernel: &str, era: Era, limits: &HostLimits, interfaces: &[Iface]) -> Vec<String> {
    let mut notes: Vec<String> = crate::kernel_notes::Version::parse(kernel)
        .map(crate::kernel_notes::notes)
        .unwrap_or_default()
        .into_iter()
        .map(|n| {
            format!(
                "kernel {}: {}",
                kernel.split(['-', '+']).next().unwrap_or(kernel),
                n.text
            )
        })
        .collect();
    match (era, limits.tcp_adv_win_scale) {
        (Era::MeasuredRatio, Some(n)) if n != 1 => notes.push(format!(
            "net.ipv4.tcp_adv_win_scale={n} is a dead knob on this kernel: the window is the buffer x the measured scaling_ratio / 256"
        )),
        (Era::MeasuredRatio, _) => notes.push(
            "the window is the buffer x scaling_ratio / 256, the ratio measured from arriving packets (tcp_adv_win_scale is not used)".into(),
        ),
        (Era::AdvWinScale, n) => notes.push(format!(
            "before 6.6: the window is the buffer x {}/256 from net.ipv4.tcp_adv_win_scale={}",
            adv_win_scale_ratio(n.unwrap_or(1)),
            n.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
        )),
    }
    if limits.tcp_window_scaling == Some(false) {
        notes.push(
            "net.ipv4.tcp_window_scaling=0: every connection's window stays <= 65535 bytes".into(),
        );
    }
    if limits.tcp_moderate_rcvbuf == Some(false) {
        notes.push(
            "net.ipv4.tcp_moderate_rcvbuf=0: autotuning is off, buffers stay at tcp_rmem[1]".into(),
        );
    }
    if let Some(m) = limits.rmem_max {
        notes.push(format!(
            "net.core.rmem_max={m} caps SO_RCVBUF requests (a buffer of at most {}); it does not cap autotuning",
            2 * m
        ));
    }
    for i in interfaces {
        if i.xdp == Some(true) {
            notes.push(format!(
                "{}: an XDP program is attached: packets arrive page-sized, the ratio drops (85-89 measured at MTU 1500)",
                i.name
            ));
        }
        if i.gro == Some(false) && i.name != "lo" {
            notes.push(format!(
                "{}: GRO off: unaggregated packets give a lower ratio (162 vs 229 at MTU 1500)",
                i.name
            ));
        }
    }
    notes
}

/// Whether a window of `need` bytes fits an autotuned and an SO_RCVBUF socket here, and the
/// commands that would make it fit.
fn fits(need: u64, ratio: u8, limits: &HostLimits) -> Vec<Fit> {
    let mut fits = Vec::new();
    {
        let scaled_cap = if limits.tcp_window_scaling == Some(false) {
            max_scaled_window(0)
        } else {
            max_scaled_window(14)
        };
        let need_buffer = space_from_win(need, ratio);
        let window_of = |buf: u64| win_from_space(buf, ratio).min(scaled_cap);
        // per-namespace settings run in the namespace checked; rmem_max is global
        let in_ns = |cmd: String| match &limits.run_in {
            Some(p) => format!("{p} {cmd}"),
            None => cmd,
        };
        let wscale_fix = (limits.tcp_window_scaling == Some(false) && need > 65535)
            .then(|| in_ns("sysctl -w net.ipv4.tcp_window_scaling=1".to_string()));
        // autotuning grows the buffer to tcp_rmem[2] (or stays at tcp_rmem[1] when off)
        let auto_buf = match limits.tcp_moderate_rcvbuf {
            Some(false) => limits.tcp_rmem.map(|t| t[1]),
            _ => limits.tcp_rmem.map(|t| t[2]),
        };
        let auto_win = auto_buf.map(window_of);
        let mut fix = Vec::new();
        if auto_win.is_some_and(|w| w < need) {
            fix.extend(wscale_fix.clone());
            if let (Some(nb), Some(t)) = (need_buffer, limits.tcp_rmem) {
                if win_from_space(t[2], ratio) < need && nb > t[2] {
                    fix.push(in_ns(format!(
                        "sysctl -w net.ipv4.tcp_rmem=\"{} {} {nb}\"",
                        t[0], t[1]
                    )));
                }
                if limits.tcp_moderate_rcvbuf == Some(false) {
                    fix.push(in_ns("sysctl -w net.ipv4.tcp_moderate_rcvbuf=1".into()));
                }
            }
        }
        fits.push(Fit {
            socket: "autotuned".into(),
            max_buffer: auto_buf,
            max_window: auto_win,
            fits: auto_win.map(|w| w >= need),
            fix,
        });
        let so_buf = limits.rmem_max.map(|m| 2 * m);
        let so_win = so_buf.map(window_of);
        let mut fix = Vec::new();
        if so_win.is_some_and(|w| w < need) {
            fix.extend(wscale_fix);
            // never lower it: only when the buffer needed is above what rmem_max allows now
            // (the window may be capped by something else, e.g. scaling off)
            if let Some(nb) = need_buffer.filter(|nb| so_buf.is_none_or(|b| *nb > b)) {
                fix.push(format!(
                    "sysctl -w net.core.rmem_max={} (global: every namespace; and an SO_RCVBUF request >= that)",
                    nb.div_ceil(2)
                ));
            }
        }
        fits.push(Fit {
            socket: "so_rcvbuf".into(),
            max_buffer: so_buf,
            max_window: so_win,
            fits: so_win.map(|w| w >= need),
            fix,
        });
    }
    fits
}

/// `1gbit:18ms`
pub fn parse_bdp(s: &str) -> Result<Bdp, String> {
    let (rate, rtt) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: write RATE:RTT, e.g. 1gbit:18ms"))?;
    Ok(Bdp {
        rate_bps: crate::units::parse_rate(rate)?,
        rtt_us: crate::units::parse_duration_us(rtt)?,
    })
}

impl std::fmt::Display for Bdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} x {}",
            fmt_rate(self.rate_bps),
            crate::verdict::fmt_rtt(self.rtt_us)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HostLimits {
        HostLimits {
            rmem_max: Some(425_984),
            tcp_rmem: Some([4096, 131072, 6291456]),
            tcp_window_scaling: Some(true),
            tcp_moderate_rcvbuf: Some(true),
            tcp_adv_win_scale: Some(1),
            ..Default::default()
        }
    }

    fn run(l: HostLimits, ratio: u8, bdp: &str) -> CheckReport {
        check(
            "6.18".into(),
            Era::MeasuredRatio,
            (ratio, "test".into()),
            l,
            vec![],
            Some(parse_bdp(bdp).unwrap()),
        )
    }

    /// 003: 1 Gbit/s x 18 ms = 2 250 000 B; at ratio 162 the buffer must be 3 555 556.
    #[test]
    fn rmem_max_too_small_for_so_rcvbuf_only() {
        let r = run(limits(), 162, "1gbit:18ms");
        assert_eq!(r.bdp_bytes, Some(2_250_000));
        let auto = &r.fits[0];
        // 6291456 x 162 / 256 = 3 981 312 >= 2 250 000
        assert_eq!((auto.max_window, auto.fits), (Some(3_981_312), Some(true)));
        let so = &r.fits[1];
        assert_eq!(so.max_window, Some(539_136));
        assert_eq!(so.fits, Some(false));
        assert_eq!(
            so.fix,
            vec!["sysctl -w net.core.rmem_max=1777778 (global: every namespace; and an SO_RCVBUF request >= that)"]
        );
        assert!(!r.fits_all());
    }

    #[test]
    fn autotune_max_and_wscale_fixes() {
        let mut l = limits();
        l.tcp_rmem = Some([4096, 131072, 1 << 20]);
        l.rmem_max = Some(16 << 20);
        let r = run(l.clone(), 162, "1gbit:18ms");
        assert_eq!(
            r.fits[0].fix,
            vec!["sysctl -w net.ipv4.tcp_rmem=\"4096 131072 3555556\""]
        );
        assert_eq!(r.fits[1].fits, Some(true));
        l.tcp_window_scaling = Some(false);
        let r = run(l, 162, "100mbit:20ms");
        assert_eq!(r.fits[1].max_window, Some(65535));
        assert!(r.fits[1].fix[0].contains("tcp_window_scaling=1"));
        assert!(r.notes.iter().any(|n| n.contains("<= 65535")));
    }

    #[test]
    fn a_small_bdp_fits_and_bad_input_is_refused() {
        let r = run(limits(), 128, "10mbit:1ms");
        assert!(r.fits_all());
        assert!(parse_bdp("1gbit").unwrap_err().contains("RATE:RTT"));
        assert!(parse_bdp("1gbit:18").unwrap_err().contains("unit"));
        assert!(parse_bdp("fast:18ms").is_err());
    }

    /// `check --netns X` with scaling off there and a large rmem_max: the fix is scaling, in X;
    /// rmem_max is never suggested below what the host has.
    #[test]
    fn fixes_never_lower_and_run_in_the_namespace() {
        let l = HostLimits {
            rmem_max: Some(4_194_304),
            tcp_window_scaling: Some(false),
            run_in: Some("ip netns exec x".into()),
            ..limits()
        };
        let r = run(l, 229, "100mbit:20ms");
        for f in &r.fits {
            assert!(!f.fits.unwrap(), "{f:?}");
            assert!(
                f.fix.iter().all(|x| !x.contains("rmem_max=")),
                "lowers rmem_max: {f:?}"
            );
            assert!(
                f.fix.contains(
                    &"ip netns exec x sysctl -w net.ipv4.tcp_window_scaling=1".to_string()
                ),
                "{f:?}"
            );
        }
    }

    #[test]
    fn which_kind_misses_is_said() {
        // rmem_max 425984 caps SO_RCVBUF at 851968; autotuning reaches 32 MB
        let r = run(limits(), 162, "1gbit:18ms");
        assert!(
            !r.misses("autotuned") && r.misses("so_rcvbuf"),
            "{:?}",
            r.fits
        );
        let r = run(limits(), 128, "10mbit:1ms");
        assert!(!r.misses("autotuned") && !r.misses("so_rcvbuf"));
        let l = HostLimits {
            tcp_rmem: Some([4096, 131072, 1 << 20]),
            ..limits()
        };
        assert!(run(l, 162, "1gbit:18ms").misses("autotuned"));
    }

    #[test]
    fn sub_millisecond_rtts_read_in_us() {
        assert_eq!(
            parse_bdp("10gbit:250us").unwrap().to_string(),
            "10.00 Gbit/s x 250 us"
        );
        assert_eq!(
            parse_bdp("1gbit:18ms").unwrap().to_string(),
            "1.00 Gbit/s x 18.0 ms"
        );
    }

    #[test]
    fn dead_knob_is_named() {
        let mut l = limits();
        l.tcp_adv_win_scale = Some(-2);
        let r = check(
            "6.18".into(),
            Era::MeasuredRatio,
            (128, "x".into()),
            l,
            vec![],
            None,
        );
        assert!(r.notes.iter().any(|n| n.contains("dead knob")));
        assert!(r.fits.is_empty() && r.fits_all());
    }
}
