//! What the exporter publishes, computed from one snapshot of sockets and their verdicts: the
//! only place metric names exist. Pure: facts in, values out; the encoding into the Prometheus
//! formats is the view's.
use std::collections::BTreeMap;

use crate::{facts::SockFacts, verdict::Verdict};

/// Metric names (Prometheus conventions: base units, `_bytes`, `_seconds`, `_total`).
pub mod name {
    pub const SCALING_RATIO: &str = "tcpwin_scaling_ratio";
    pub const WINDOW_CLAMP: &str = "tcpwin_window_clamp_bytes";
    pub const ADVERTISED_WINDOW: &str = "tcpwin_advertised_window_bytes";
    /// window / RTT, in bytes per second (Prometheus' base unit; promtool refuses bits)
    pub const CEILING: &str = "tcpwin_window_ceiling_bytes_per_second";
    pub const SOCKETS: &str = "tcpwin_sockets";
    /// a counter: the encoder adds `_total`
    pub const ESTABLISHED: &str = "tcpwin_connections_established";
    pub const SCRAPE_DURATION: &str = "tcpwin_scrape_duration_seconds";
    pub const SCRAPE_SOCKETS: &str = "tcpwin_scrape_sockets";
    pub const SCRAPE_ERRORS: &str = "tcpwin_scrape_errors";
}

/// Histogram bounds: ratios in 256ths around the measured cells (85-89 XDP, 158-162 one
/// segment per packet, 193-234 aggregated); bytes and rates in powers of two / ten.
pub fn ratio_buckets() -> Vec<f64> {
    vec![
        64.0, 96.0, 128.0, 144.0, 160.0, 176.0, 192.0, 208.0, 224.0, 240.0, 256.0,
    ]
}

pub fn bytes_buckets() -> Vec<f64> {
    (12..=27).map(|e| (1u64 << e) as f64).collect()
}

pub fn rate_buckets() -> Vec<f64> {
    (4..=10).map(|e| 10f64.powi(e)).collect()
}

/// The values of one scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    pub scaling_ratio: Vec<f64>,
    pub window_clamp: Vec<f64>,
    pub advertised_window: Vec<f64>,
    pub ceiling_bytes_per_sec: Vec<f64>,
    /// sockets by verdict (`limit` label)
    pub sockets: BTreeMap<&'static str, u64>,
    /// connections that reached ESTABLISHED since the exporter started, by (window scaling
    /// negotiated, passive); None when the counter is not running
    pub established: Option<BTreeMap<(bool, bool), u64>>,
}

impl Scrape {
    /// One socket's contribution: each fact it has (absent facts add nothing, never 0).
    pub fn add(&mut self, f: &SockFacts, v: &Verdict) {
        if let Some(r) = f.scaling_ratio {
            self.scaling_ratio.push(r as f64);
        }
        if let Some(c) = f.window_clamp {
            self.window_clamp.push(c as f64);
        }
        if let Some(w) = f.rcv_wnd {
            self.advertised_window.push(w as f64);
        }
        if let Some(c) = v.ceiling_bps {
            self.ceiling_bytes_per_sec.push(c as f64 / 8.0);
        }
        *self.sockets.entry(v.limit.id()).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Limit, Side};

    #[test]
    fn absent_facts_add_nothing() {
        let v = Verdict {
            limit: Limit::AutotuneMax,
            side: Side::Receiving,
            window_limited: None,
            rate_bps: None,
            rtt_us: None,
            window: None,
            ceiling_bps: Some(1_000_000),
            target_bps: None,
            bdp_bytes: None,
            rwnd_limited_share: None,
            setting: None,
            suggested: None,
        };
        let mut s = Scrape::default();
        s.add(
            &SockFacts {
                window_clamp: Some(65536),
                ..Default::default()
            },
            &v,
        );
        s.add(&SockFacts::default(), &v);
        assert_eq!(s.window_clamp, vec![65536.0]);
        assert!(s.scaling_ratio.is_empty());
        assert_eq!(s.ceiling_bytes_per_sec, vec![125_000.0, 125_000.0]);
        assert_eq!(s.sockets["autotune-max"], 2);
        assert!(bytes_buckets().windows(2).all(|w| w[0] < w[1]));
    }
}
