//! What the exporter publishes, computed from one snapshot of sockets and their verdicts: the
//! only place metric names exist. Pure: facts in, values out; the encoding into the Prometheus
//! formats is the view's.
use std::collections::BTreeMap;

use crate::{
    facts::SockFacts,
    verdict::{Limit, Verdict},
};

/// Metric names (Prometheus conventions: base units, `_bytes`, `_seconds`, `_total`).
pub mod name {
    /// Distributions over the *current* sockets: gauges with an `upper` label (cumulative counts,
    /// `upper="+Inf"` = every socket with the value), so that `rate()` is never applied to a count
    /// that falls when sockets close; `histogram_quantile()` reads them once
    /// `label_replace(.., "le", "$1", "upper", "(.+)")` names the bound `le`. Beside each, the
    /// sum over the same sockets (a gauge: the mean is sum / count).
    pub const SOCKETS_BY_SCALING_RATIO: &str = "tcpwin_sockets_by_scaling_ratio";
    pub const SOCKETS_BY_WINDOW_CLAMP: &str = "tcpwin_sockets_by_window_clamp_bytes";
    pub const SOCKETS_BY_ADVERTISED_WINDOW: &str = "tcpwin_sockets_by_advertised_window_bytes";
    /// window / RTT, in bytes per second (Prometheus' base unit; promtool refuses bits)
    pub const SOCKETS_BY_CEILING: &str = "tcpwin_sockets_by_window_ceiling_bytes_per_second";
    pub const SUM_SCALING_RATIO: &str = "tcpwin_sockets_scaling_ratio";
    pub const SUM_WINDOW_CLAMP: &str = "tcpwin_sockets_window_clamp_bytes";
    pub const SUM_ADVERTISED_WINDOW: &str = "tcpwin_sockets_advertised_window_bytes";
    pub const SUM_CEILING: &str = "tcpwin_sockets_window_ceiling_bytes_per_second";
    /// 1, labelled by version, kernel and where socket facts come from (`iterator`, `sock_diag`)
    pub const BUILD_INFO: &str = "tcpwin_build_info";
    pub const SOCKETS: &str = "tcpwin_sockets";
    pub const WORKLOAD_SOCKETS: &str = "tcpwin_workload_sockets";
    pub const BLIND_SPOT: &str = "tcpwin_blind_spot";
    /// a counter: the encoder adds `_total`
    pub const ESTABLISHED: &str = "tcpwin_connections_established";
    /// counters (the encoder adds `_total`): tcp_info's chrono times, live and closed sockets
    pub const BUSY: &str = "tcpwin_busy_seconds";
    pub const RWND_LIMITED: &str = "tcpwin_rwnd_limited_seconds";
    pub const SNDBUF_LIMITED: &str = "tcpwin_sndbuf_limited_seconds";
    pub const CLOSED: &str = "tcpwin_connections_closed";
    /// `--packet-histogram`: every data packet's len/truesize, by interface
    pub const PACKET_RATIO: &str = "tcpwin_packet_scaling_ratio";
    /// `--top N`: labelled per socket
    pub const TOP_WINDOW_USE: &str = "tcpwin_top_socket_window_use_ratio";
    pub const TOP_WINDOW: &str = "tcpwin_top_socket_window_bytes";
    pub const TOP_RATE: &str = "tcpwin_top_socket_rate_bytes_per_second";
    pub const SCRAPE_DURATION: &str = "tcpwin_scrape_duration_seconds";
    pub const SCRAPE_SOCKETS: &str = "tcpwin_scrape_sockets";
    pub const SCRAPE_ERRORS: &str = "tcpwin_scrape_errors";
    /// the exporter's own HTTP server (counters: the encoder adds `_total`)
    pub const HTTP_RESPONSES: &str = "tcpwin_http_responses";
    pub const HTTP_AUTH_FAILURES: &str = "tcpwin_http_auth_failures";
    pub const HTTP_AUTH_CHECKS: &str = "tcpwin_http_auth_checks";
    pub const HTTP_AUTH_CHECK_SECONDS: &str = "tcpwin_http_auth_check_seconds";
    pub const HTTP_CONNECTIONS_DROPPED: &str = "tcpwin_http_connections_dropped";
    /// a gauge
    pub const HTTP_CONNECTIONS: &str = "tcpwin_http_connections";
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

/// Exact (value, count) pairs of a histogram counted elsewhere (the kernel's per-packet one).
pub type Counts = Vec<(u64, u64)>;

/// A histogram ready to encode: per-bucket counts (upper bound, count; not cumulative, the
/// encoder accumulates), the last bound +Inf.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    pub sum: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

/// A histogram from exact per-value counts over `bounds` (and +Inf).
pub fn bucketize(counts: &[(u64, u64)], bounds: &[f64]) -> Buckets {
    let mut out: Vec<(f64, u64)> = bounds
        .iter()
        .copied()
        .chain([f64::INFINITY])
        .map(|b| (b, 0))
        .collect();
    let (mut sum, mut count) = (0.0, 0);
    for &(v, n) in counts {
        sum += v as f64 * n as f64;
        count += n;
        let i = out
            .iter()
            .position(|(b, _)| v as f64 <= *b)
            .expect("+Inf holds everything");
        out[i].1 += n;
    }
    Buckets {
        sum,
        count,
        buckets: out,
    }
}

/// One socket of `--top N`: labels and values.
#[derive(Clone, Debug, PartialEq)]
pub struct TopSocket {
    pub local: String,
    pub remote: String,
    pub netns: String,
    pub side: &'static str,
    pub limit: &'static str,
    /// rate / (window / RTT): how much of what its window allows the connection uses (+Inf:
    /// the window is 0 at the scrape, or the receiver's reader holds it and no ceiling is known)
    pub window_use: f64,
    pub window_bytes: Option<f64>,
    pub rate_bytes_per_second: f64,
}

impl TopSocket {
    /// A socket that moved data over the interval with a known ceiling, or one whose reader
    /// holds its window (a zero window with data waiting, or a backlog that shrinks it: the most
    /// window-bound sockets there are, even when nothing moved while the window stayed shut, and
    /// the judge does no arithmetic on such a window); None otherwise.
    pub fn of(f: &SockFacts, v: &Verdict, netns: &str) -> Option<TopSocket> {
        let reader_holds = v.limit == Limit::AppNotReading;
        let rate = v.rate_bps.unwrap_or(0);
        if rate == 0 && !reader_holds {
            return None;
        }
        // a zero window has no ceiling: nothing more can move
        let window_use = match (v.ceiling_bps, v.window) {
            _ if reader_holds && v.window == Some(0) => f64::INFINITY,
            (Some(c), _) if c > 0 => rate as f64 / c as f64,
            _ if reader_holds => f64::INFINITY,
            (_, Some(0)) | (Some(_), _) => f64::INFINITY,
            (None, _) => return None,
        };
        Some(TopSocket {
            local: f.id.local(),
            remote: f.id.remote(),
            netns: netns.to_string(),
            side: v.side.id(),
            limit: v.limit.id(),
            window_use,
            window_bytes: v.window.map(|w| w as f64),
            rate_bytes_per_second: rate as f64 / 8.0,
        })
    }
}

/// Keeps the `n` sockets closest to their window's ceiling (ties: the faster first).
pub fn keep_top(mut v: Vec<TopSocket>, n: usize) -> Vec<TopSocket> {
    v.sort_by(|a, b| {
        b.window_use
            .total_cmp(&a.window_use)
            .then(b.rate_bytes_per_second.total_cmp(&a.rate_bytes_per_second))
    });
    v.truncate(n);
    v
}

/// The chrono counters: what closed connections had at close (summed in the kernel) plus what
/// the live sockets have now. A socket that closes between the kernel's sum and the socket walk
/// is briefly in neither, and a namespace that goes away takes its sums along: the published
/// value never goes below the last one, so Prometheus never sees a false counter reset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    last: [f64; 4],
}

/// Busy, rwnd-limited, sndbuf-limited seconds and closed connections, as published.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ChronoTotals {
    pub seconds: [f64; 3],
    pub closed: f64,
}

impl Counters {
    /// `closed_jiffies`: the kernel's sums of `chrono_stat` (busy, rwnd, sndbuf) for the
    /// namespaces scraped; `closed`: how many closed; `live_us`: the live sockets' times as
    /// `tcp_info` gives them. Like `tcp_info`, busy time is the three chronos together.
    pub fn publish(
        &mut self,
        closed_jiffies: [u64; 3],
        closed: u64,
        hz: u32,
        live_us: [u64; 3],
    ) -> ChronoTotals {
        let mut now = [0.0; 4];
        let busy_jiffies: u64 = closed_jiffies.iter().sum();
        for (i, j) in [busy_jiffies, closed_jiffies[1], closed_jiffies[2]]
            .into_iter()
            .enumerate()
        {
            now[i] = j as f64 / hz as f64 + live_us[i] as f64 / 1e6;
        }
        now[3] = closed as f64;
        for (l, n) in self.last.iter_mut().zip(now) {
            *l = l.max(n);
        }
        ChronoTotals {
            seconds: [self.last[0], self.last[1], self.last[2]],
            closed: self.last[3],
        }
    }
}

/// A distribution over current sockets, as published: per bound, the sockets at or under it
/// (cumulative, the last bound +Inf), and the sum of the values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Distribution {
    pub le: Vec<(f64, u64)>,
    pub sum: f64,
}

impl Distribution {
    pub fn of(values: &[f64], bounds: &[f64]) -> Distribution {
        let mut le: Vec<(f64, u64)> = bounds
            .iter()
            .map(|b| (*b, values.iter().filter(|v| *v <= b).count() as u64))
            .collect();
        le.push((f64::INFINITY, values.len() as u64));
        Distribution {
            le,
            sum: values.iter().sum(),
        }
    }
}

/// The exporter process's own figures (the `process_*` metrics Prometheus clients publish).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    pub max_fds: u64,
    pub start_time_seconds: f64,
}

/// Names of the `process_*` metrics (Prometheus' client conventions).
pub mod process {
    /// a counter: the encoder adds `_total`
    pub const CPU_SECONDS: &str = "process_cpu_seconds";
    pub const RESIDENT: &str = "process_resident_memory_bytes";
    pub const VIRTUAL: &str = "process_virtual_memory_bytes";
    pub const OPEN_FDS: &str = "process_open_fds";
    pub const MAX_FDS: &str = "process_max_fds";
    pub const START_TIME: &str = "process_start_time_seconds";
}

/// A workload's labels, bounded by the workloads on the node (never a socket's): the pod's
/// namespace, name and UID (`kube_pod_info{uid}` joins on it), the container's name (or short
/// id), and `workload`, the short form (`default/web-5d9f/nginx`, `podman:web`,
/// `nginx.service`); empty where the node does not say, `-` for sockets no process holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadLabels {
    pub namespace: String,
    pub pod: String,
    pub pod_uid: String,
    pub container: String,
    pub workload: String,
}

impl WorkloadLabels {
    pub fn of(f: &SockFacts) -> Self {
        let Some(w) = f.workload.as_ref() else {
            return WorkloadLabels {
                workload: "-".into(),
                ..WorkloadLabels::default()
            };
        };
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        WorkloadLabels {
            namespace: s(&w.namespace),
            pod: s(&w.pod),
            pod_uid: s(&w.pod_uid),
            container: w.name.clone().unwrap_or_else(|| {
                w.container_id
                    .as_ref()
                    .map(|c| c.chars().take(12).collect())
                    .unwrap_or_default()
            }),
            workload: w.short(),
        }
    }
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
    /// the live sockets' chrono times (busy, rwnd-limited, sndbuf-limited), µs
    pub live_chrono_us: [u64; 3],
    /// the chrono counters; None when the kernel counter is not running or HZ is unknown
    pub chrono: Option<ChronoTotals>,
    /// `--packet-histogram`: per interface, exact (ratio, packets) counts
    pub packet_ratio: Option<BTreeMap<String, Counts>>,
    /// `--top N`
    pub top: Vec<TopSocket>,
    /// `--by workload`: sockets per workload and limit (only the limits a workload's sockets
    /// have: a workload adds a series per limit it shows, no more)
    pub by_workload: Option<BTreeMap<(WorkloadLabels, &'static str), u64>>,
    /// with `--netns all`: each kind of namespace it cannot see from where it runs, and whether
    /// that is so here (`host_pid_namespace`, `host_run_netns`)
    pub blind_spots: Vec<(&'static str, bool)>,
    /// `tcpwin_build_info`: version, kernel, source
    pub build: Option<(String, String, String)>,
    pub process: Option<ProcessStats>,
}

impl Scrape {
    /// Sockets by verdict, every known limit present (0 where no socket has it): a sum over a
    /// limit is 0, not empty, when nothing binds that way.
    pub fn sockets_by_limit(&self) -> Vec<(&'static str, u64)> {
        Limit::ALL
            .iter()
            .map(|l| (l.id(), self.sockets.get(l.id()).copied().unwrap_or(0)))
            .collect()
    }

    /// The four distributions over current sockets: (name of the `le` family, name of the sum,
    /// help, the distribution).
    pub fn distributions(&self) -> [(&'static str, &'static str, &'static str, Distribution); 4] {
        [
            (
                name::SOCKETS_BY_SCALING_RATIO,
                name::SUM_SCALING_RATIO,
                "current sockets by scaling_ratio, in 256ths (window = buffer x ratio / 256)",
                Distribution::of(&self.scaling_ratio, &ratio_buckets()),
            ),
            (
                name::SOCKETS_BY_WINDOW_CLAMP,
                name::SUM_WINDOW_CLAMP,
                "current sockets by window_clamp",
                Distribution::of(&self.window_clamp, &bytes_buckets()),
            ),
            (
                name::SOCKETS_BY_ADVERTISED_WINDOW,
                name::SUM_ADVERTISED_WINDOW,
                "current sockets by the receive window they last advertised",
                Distribution::of(&self.advertised_window, &bytes_buckets()),
            ),
            (
                name::SOCKETS_BY_CEILING,
                name::SUM_CEILING,
                "current sockets by window / RTT: the rate their window allows",
                Distribution::of(&self.ceiling_bytes_per_sec, &rate_buckets()),
            ),
        ]
    }

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
        if let Some(m) = self.by_workload.as_mut() {
            *m.entry((WorkloadLabels::of(f), v.limit.id())).or_default() += 1;
        }
        for (sum, t) in
            self.live_chrono_us
                .iter_mut()
                .zip([f.busy_us, f.rwnd_limited_us, f.sndbuf_limited_us])
        {
            *sum += t.unwrap_or(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Limit, Side};

    /// `--by workload`: one series per (workload, limit) its sockets show, whatever the number
    /// of sockets: N pods of 50 sockets each, all held by the same limit, give N series.
    #[test]
    fn workloads_add_a_series_per_limit_they_show() {
        let mut s = Scrape {
            by_workload: Some(BTreeMap::new()),
            ..Scrape::default()
        };
        let v = |limit| Verdict {
            limit,
            ..Verdict::unknown(Side::Receiving)
        };
        for pod in 0..10 {
            let uid = format!("5d1c2b3a-4e5f-6789-abcd-ef01234567{pod:02}");
            let cg = format!(
                "0::/kubepods/burstable/pod{uid}/f2557d61c3a14e1f8e6b0a9d7c5b3e1f2a4c6e8b0d1f3a5c7e9b1d3f5a7c9e{pod:02}\n"
            );
            for _ in 0..50 {
                let f = SockFacts {
                    workload: crate::workload::from_cgroup(&cg).map(Box::new),
                    ..SockFacts::default()
                };
                s.add(&f, &v(Limit::AutotuneMax));
            }
        }
        s.add(&SockFacts::default(), &v(Limit::Idle));
        let m = s.by_workload.as_ref().unwrap();
        assert_eq!(m.len(), 11, "{m:?}");
        let (k, n) = m
            .iter()
            .find(|(k, _)| k.0.pod_uid.ends_with("456703"))
            .unwrap();
        assert_eq!((*n, k.1), (50, "autotune-max"));
        assert_eq!(k.0.container, "f2557d61c3a1");
        assert!(m.keys().any(|k| k.0.workload == "-" && k.1 == "idle"));
    }

    #[test]
    fn absent_facts_add_nothing() {
        let v = Verdict {
            limit: Limit::AutotuneMax,
            side: Side::Receiving,
            basis: crate::verdict::Basis::Interval,
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
            ..Verdict::unknown(Side::Receiving)
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

    #[test]
    fn every_limit_is_published_and_distributions_are_cumulative() {
        let mut s = Scrape::default();
        s.sockets.insert("autotune-max", 3);
        let by = s.sockets_by_limit();
        assert_eq!(by.len(), Limit::ALL.len());
        assert!(by.contains(&("autotune-max", 3)) && by.contains(&("rcvbuf-locked", 0)));
        let d = Distribution::of(&[160.0, 229.0, 300.0], &ratio_buckets());
        let at = |b: f64| d.le.iter().find(|(x, _)| *x == b).unwrap().1;
        assert_eq!((at(160.0), at(240.0), at(f64::INFINITY)), (1, 2, 3));
        assert_eq!(d.sum, 689.0);
        // counts only grow with the bound
        assert!(d.le.windows(2).all(|w| w[0].1 <= w[1].1));
    }

    #[test]
    fn buckets_hold_each_value_once_at_its_upper_bound() {
        let Buckets {
            sum,
            count,
            buckets: b,
        } = bucketize(&[(160, 3), (229, 2), (300, 1)], &ratio_buckets());
        assert_eq!(count, 6);
        assert_eq!(sum, 160.0 * 3.0 + 229.0 * 2.0 + 300.0);
        let at = |bound: f64| b.iter().find(|(x, _)| *x == bound).unwrap().1;
        assert_eq!(at(160.0), 3, "le is inclusive");
        assert_eq!(at(240.0), 2);
        assert_eq!(at(f64::INFINITY), 1);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 6);
    }

    #[test]
    fn counters_add_closed_and_live_and_never_fall() {
        let mut c = Counters::default();
        // 250 jiffies at HZ 250 = 1 s closed, 0.5 s live
        let t = c.publish([250, 0, 0], 2, 250, [500_000, 0, 0]);
        assert_eq!(t.seconds[0], 1.5);
        assert_eq!(t.closed, 2.0);
        // the live socket closed between the two reads: in neither sum; the value holds
        let t = c.publish([250, 0, 0], 2, 250, [0, 0, 0]);
        assert_eq!(t.seconds[0], 1.5);
        // counted at close with more time than seen live: rises; busy holds all three chronos
        let t = c.publish([475, 25, 0], 3, 250, [0, 0, 0]);
        assert_eq!((t.seconds[0], t.seconds[1], t.closed), (2.0, 0.1, 3.0));
    }

    #[test]
    fn top_ranks_by_window_use_and_skips_idle_sockets() {
        let mut v = Verdict {
            limit: Limit::PeerWindow,
            side: Side::Sending,
            basis: crate::verdict::Basis::Interval,
            window_limited: Some(true),
            rate_bps: Some(80_000_000),
            rtt_us: Some(20_000),
            window: Some(262_144),
            ceiling_bps: Some(100_000_000),
            target_bps: None,
            bdp_bytes: None,
            rwnd_limited_share: Some(0.9),
            setting: None,
            suggested: None,
            ..Verdict::unknown(Side::Receiving)
        };
        let f = SockFacts {
            id: crate::schema::SocketId {
                laddr: Some("10.0.0.1".parse().unwrap()),
                lport: 40000,
                raddr: Some("fd00::2".parse().unwrap()),
                rport: 5201,
                ..Default::default()
            },
            ..Default::default()
        };
        let a = TopSocket::of(&f, &v, "lab").unwrap();
        assert_eq!(a.window_use, 0.8);
        assert_eq!(a.remote, "[fd00::2]:5201");
        assert_eq!(a.side, "sending");
        v.rate_bps = Some(10_000_000);
        let b = TopSocket::of(&f, &v, "lab").unwrap();
        v.ceiling_bps = Some(0);
        let zero_window = TopSocket::of(&f, &v, "lab").unwrap();
        assert_eq!(zero_window.window_use, f64::INFINITY);
        v.rate_bps = Some(0);
        assert!(TopSocket::of(&f, &v, "lab").is_none());
        // shut by a reader that stopped: listed though the shut window let nothing through in
        // the interval (the exporter's test saw such a sender left out of --top)
        for rate in [Some(0), None] {
            let stalled = Verdict {
                limit: Limit::AppNotReading,
                window: Some(0),
                ceiling_bps: None,
                rate_bps: rate,
                ..v.clone()
            };
            let s = TopSocket::of(&f, &stalled, "lab").unwrap();
            assert_eq!(
                (s.window_use, s.rate_bytes_per_second),
                (f64::INFINITY, 0.0)
            );
        }
        // a reader behind with its window still open (a backlog: 95232 B advertised), no ceiling
        // judged: listed (the exporter's test saw a sender whose reader slept 2 ms per 64 KiB
        // read left out of --top at the scrape it caught in that state)
        let behind = Verdict {
            limit: Limit::AppNotReading,
            window: Some(95_232),
            ceiling_bps: None,
            rate_bps: Some(130_000_000),
            ..v.clone()
        };
        let s = TopSocket::of(&f, &behind, "lab").unwrap();
        assert_eq!(s.window_use, f64::INFINITY);
        let top = keep_top(vec![b.clone(), a.clone()], 1);
        assert_eq!(top, vec![a]);
    }
}
