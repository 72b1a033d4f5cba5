//! A scrape in the Prometheus formats, encoded by `prometheus-client` (nothing of the exposition
//! format is written by hand): OpenMetrics text for clients that ask for it, the classic text
//! format 0.0.4 otherwise.
use std::sync::OnceLock;

use prometheus_client::{
    encoding::{prometheus_text, text, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet},
    metrics::{
        counter::{ConstCounter, Counter},
        family::Family,
        gauge::Gauge,
        MetricType, TypedMetric,
    },
    registry::Registry,
};
use tcpwin_model::metrics::{
    bucketize, name, process, ratio_buckets, Buckets, ChronoTotals, Distribution, ProcessStats,
    Scrape, TopSocket,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WhatLabel {
    what: String,
}

/// `--by workload`: a workload's labels and the limit.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkloadLimit {
    namespace: String,
    pod: String,
    pod_uid: String,
    container: String,
    workload: String,
    limit: String,
}

/// The bound of a distribution's gauge. Not `le`: that label belongs to histograms (promtool's
/// lint refuses it elsewhere); `label_replace(..., "le", "$1", "upper", "(.+)")` turns it into
/// one for `histogram_quantile()`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpperLabel {
    upper: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    kernel: String,
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandshakeLabels {
    wscale: String,
    direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IfaceLabel {
    interface: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SocketLabels {
    local: String,
    remote: String,
    netns: String,
    side: String,
    limit: String,
}

impl SocketLabels {
    fn of(t: &TopSocket) -> Self {
        SocketLabels {
            local: t.local.clone(),
            remote: t.remote.clone(),
            netns: t.netns.clone(),
            side: t.side.into(),
            limit: t.limit.into(),
        }
    }
}

/// A histogram whose buckets are counted elsewhere (in the kernel): set once, encoded as is.
#[derive(Debug, Default)]
struct CountedHistogram(OnceLock<Buckets>);

impl TypedMetric for CountedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for CountedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let b = self.0.get().cloned().unwrap_or_default();
        encoder.encode_histogram::<NoLabelSet>(b.sum, b.count, &b.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

fn counter(reg: &mut Registry, n: &str, help: &str, v: f64) {
    reg.register(n, help, ConstCounter::new(v));
}

/// A counter family with one label.
fn counters<L, K: ToString>(
    reg: &mut Registry,
    n: &str,
    help: &str,
    values: impl IntoIterator<Item = (K, u64)>,
    label: impl Fn(String) -> L,
) where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let fam = Family::<L, Counter>::default();
    for (k, v) in values {
        fam.get_or_create(&label(k.to_string())).inc_by(v);
    }
    reg.register(n, help, fam);
}

/// The exporter's HTTP server counting itself, since start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpCounts {
    /// answers by status code
    pub responses: std::collections::BTreeMap<u16, u64>,
    /// requests refused for their credentials, by reason: `missing`, `wrong` (checked now or
    /// within the last minute), `throttled` (not checked: its source already had a check waiting,
    /// or too many were waiting)
    pub auth_failures: std::collections::BTreeMap<&'static str, u64>,
    /// password checks run (bcrypt) and the time they took
    pub auth_checks: u64,
    pub auth_check_seconds: f64,
    /// connections open now
    pub connections: u64,
    /// connections the server closed before they asked anything, by reason: `evicted` (at
    /// --web.max-connections, the longest idle), `rate` (its source opened more than 64 a
    /// second), `tls_handshake` (failed or not done within the header timeout), `header_timeout`
    /// (no complete request head within it)
    pub dropped: std::collections::BTreeMap<&'static str, u64>,
}

/// The exporter's own HTTP server.
fn http(reg: &mut Registry, h: &HttpCounts) {
    counters(
        reg,
        name::HTTP_RESPONSES,
        "HTTP responses the exporter sent, by status code",
        h.responses.iter().map(|(c, n)| (c, *n)),
        |code| CodeLabel { code },
    );
    // every reason present, 0 where none happened
    let reasons = ["missing", "wrong", "throttled"]
        .map(|r| (r, h.auth_failures.get(r).copied().unwrap_or(0)));
    counters(
        reg,
        name::HTTP_AUTH_FAILURES,
        "requests refused for their credentials: missing, wrong (checked, or the same header failed within the last minute), throttled (not checked: its source already had a check waiting, or too many were waiting)",
        reasons,
        |reason| ReasonLabel { reason },
    );
    let checks = Counter::<u64>::default();
    checks.inc_by(h.auth_checks);
    reg.register(
        name::HTTP_AUTH_CHECKS,
        "password checks (bcrypt) the exporter ran",
        checks,
    );
    counter(
        reg,
        name::HTTP_AUTH_CHECK_SECONDS,
        "time the password checks took",
        h.auth_check_seconds,
    );
    let dropped = ["evicted", "rate", "tls_handshake", "header_timeout"]
        .map(|r| (r, h.dropped.get(r).copied().unwrap_or(0)));
    counters(
        reg,
        name::HTTP_CONNECTIONS_DROPPED,
        "connections the exporter closed before they asked anything: evicted (at --web.max-connections, the longest idle), rate (its source opened more than 64 a second), tls_handshake (failed or too slow), header_timeout (no request head within --web.header-timeout)",
        dropped,
        |reason| ReasonLabel { reason },
    );
    let open = Gauge::<i64>::default();
    open.set(h.connections as i64);
    reg.register(name::HTTP_CONNECTIONS, "connections open now", open);
}

/// A `--top` gauge family: name, help, the value of one socket.
type TopFamily = (&'static str, &'static str, fn(&TopSocket) -> Option<f64>);

/// `--top N`: one gauge family per value, labelled by socket.
fn top(reg: &mut Registry, sockets: &[TopSocket]) {
    let families: [TopFamily; 3] = [
        (
            name::TOP_WINDOW_USE,
            "rate / (window / RTT) of the sockets closest to their window's ceiling (--top)",
            |t| Some(t.window_use),
        ),
        (
            name::TOP_WINDOW,
            "the window that limits these sockets: their own (receiving) or the peer's (sending)",
            |t| t.window_bytes,
        ),
        (
            name::TOP_RATE,
            "the rate of these sockets since the previous scrape",
            |t| Some(t.rate_bytes_per_second),
        ),
    ];
    for (n, help, value) in families {
        let fam = Family::<SocketLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        for t in sockets {
            if let Some(v) = value(t) {
                fam.get_or_create(&SocketLabels::of(t)).set(v);
            }
        }
        reg.register(n, help, fam);
    }
}

/// The content type to answer with, from the request's `Accept`.
pub fn content_type(accept: Option<&str>) -> &'static str {
    if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    }
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

fn gauge(reg: &mut Registry, n: &str, help: &str, v: f64) {
    let g = FloatGauge::default();
    g.set(v);
    reg.register(n, help, g);
}

/// A distribution over current sockets: a gauge per bound (`upper`, cumulative) and the sum.
fn distribution(reg: &mut Registry, n: &str, sum: &str, help: &str, d: &Distribution) {
    let fam = Family::<UpperLabel, Gauge>::default();
    for (bound, count) in &d.le {
        let upper = if bound.is_infinite() {
            "+Inf".to_string()
        } else {
            bound.to_string()
        };
        fam.get_or_create(&UpperLabel { upper }).set(*count as i64);
    }
    reg.register(n, help, fam);
    gauge(reg, sum, &format!("the sum over the sockets of {n}"), d.sum);
}

/// What held the senders, summed over live and closed sockets (tcp_info's chrono times).
fn chrono(reg: &mut Registry, c: &ChronoTotals) {
    counter(
        reg,
        name::BUSY,
        "time sockets spent sending data (tcp_info busy), live and closed since start",
        c.seconds[0],
    );
    counter(
        reg,
        name::RWND_LIMITED,
        "time senders were limited by the peer's receive window (tcp_info rwnd_limited), live and closed since start",
        c.seconds[1],
    );
    counter(
        reg,
        name::SNDBUF_LIMITED,
        "time senders were limited by their send buffer (tcp_info sndbuf_limited), live and closed since start",
        c.seconds[2],
    );
    counter(
        reg,
        name::CLOSED,
        "connections that closed since the exporter started",
        c.closed,
    );
}

/// The exporter's own process, as Prometheus's client libraries name it.
fn process_stats(reg: &mut Registry, p: &ProcessStats) {
    counter(
        reg,
        process::CPU_SECONDS,
        "user and system CPU time the exporter spent",
        p.cpu_seconds,
    );
    for (n, help, v) in [
        (
            process::RESIDENT,
            "resident memory",
            p.resident_bytes as f64,
        ),
        (process::VIRTUAL, "virtual memory", p.virtual_bytes as f64),
        (
            process::OPEN_FDS,
            "open file descriptors",
            p.open_fds as f64,
        ),
        (
            process::MAX_FDS,
            "the limit of open file descriptors",
            p.max_fds as f64,
        ),
        (
            process::START_TIME,
            "start time since the Unix epoch",
            p.start_time_seconds,
        ),
    ] {
        gauge(reg, n, help, v);
    }
}

/// Encodes one scrape, with the exporter's HTTP server's own counts where given; `openmetrics`
/// picks the format. `duration_s`, `errors`: the exporter's own measure of the scrape.
pub fn encode(
    s: &Scrape,
    http_counts: Option<&HttpCounts>,
    duration_s: f64,
    errors: u64,
    openmetrics: bool,
) -> String {
    let mut reg = Registry::default();
    for (n, sum, help, d) in s.distributions() {
        distribution(&mut reg, n, sum, help, &d);
    }
    let by_limit = Family::<LimitLabel, Gauge>::default();
    for (limit, n) in s.sockets_by_limit() {
        by_limit
            .get_or_create(&LimitLabel {
                limit: limit.to_string(),
            })
            .set(n as i64);
    }
    reg.register(
        name::SOCKETS,
        "current sockets by the limit that binds their window",
        by_limit,
    );
    if !s.blind_spots.is_empty() {
        let fam = Family::<WhatLabel, Gauge>::default();
        for (what, is) in &s.blind_spots {
            fam.get_or_create(&WhatLabel {
                what: what.to_string(),
            })
            .set(*is as i64);
        }
        reg.register(
            name::BLIND_SPOT,
            "1 where --netns all cannot see some namespaces from where it runs: host_pid_namespace (run with the host's PID namespace: hostPID), host_run_netns (mount the host's /run/netns)",
            fam,
        );
    }
    if let Some(m) = &s.by_workload {
        let fam = Family::<WorkloadLimit, Gauge>::default();
        for ((w, limit), n) in m {
            fam.get_or_create(&WorkloadLimit {
                namespace: w.namespace.clone(),
                pod: w.pod.clone(),
                pod_uid: w.pod_uid.clone(),
                container: w.container.clone(),
                workload: w.workload.clone(),
                limit: limit.to_string(),
            })
            .set(*n as i64);
        }
        reg.register(
            name::WORKLOAD_SOCKETS,
            "current sockets per workload (pod, container or unit) by the limit that binds their window (--by workload)",
            fam,
        );
    }
    if let Some(est) = &s.established {
        let fam = Family::<HandshakeLabels, Counter>::default();
        // every series from the start, 0 until a handshake of its kind (a series that appears
        // later reads as absent, not as none, to rate() and alerts)
        let all = [(true, false), (true, true), (false, false), (false, true)]
            .map(|k| (k, est.get(&k).copied().unwrap_or(0)));
        for ((ok, passive), n) in &all {
            fam.get_or_create(&HandshakeLabels {
                wscale: if *ok { "negotiated" } else { "not_negotiated" }.into(),
                direction: if *passive { "passive" } else { "active" }.into(),
            })
            .inc_by(*n);
        }
        reg.register(
            name::ESTABLISHED,
            "connections that reached ESTABLISHED since the exporter started, by window scaling and side",
            fam,
        );
    }
    if let Some(c) = &s.chrono {
        chrono(&mut reg, c);
    }
    if let Some(per_if) = &s.packet_ratio {
        let fam = Family::<IfaceLabel, CountedHistogram>::default();
        for (iface, counts) in per_if {
            let h = fam.get_or_create(&IfaceLabel {
                interface: iface.clone(),
            });
            let _ = h.0.set(bucketize(counts, &ratio_buckets()));
        }
        reg.register(
            name::PACKET_RATIO,
            "len * 256 / truesize of every data packet received since start, by interface (--packet-histogram)",
            fam,
        );
    }
    if !s.top.is_empty() {
        top(&mut reg, &s.top);
    }
    if let Some((version, kernel, source)) = &s.build {
        let b = Family::<BuildLabels, Gauge>::default();
        b.get_or_create(&BuildLabels {
            version: version.clone(),
            kernel: kernel.clone(),
            source: source.clone(),
        })
        .set(1);
        reg.register(
            name::BUILD_INFO,
            "the exporter's version, the kernel it runs on, and where socket facts come from",
            b,
        );
    }
    if let Some(p) = &s.process {
        process_stats(&mut reg, p);
    }
    if let Some(h) = http_counts {
        http(&mut reg, h);
    }
    gauge(
        &mut reg,
        name::SCRAPE_DURATION,
        "time this scrape took",
        duration_s,
    );
    let n = Gauge::<i64>::default();
    n.set(s.sockets.values().sum::<u64>() as i64);
    reg.register(name::SCRAPE_SOCKETS, "sockets this scrape read", n);
    let e = Gauge::<i64>::default();
    e.set(errors as i64);
    reg.register(
        name::SCRAPE_ERRORS,
        "namespaces this scrape could not read",
        e,
    );
    let mut out = String::new();
    let r = if openmetrics {
        text::encode(&mut out, &reg)
    } else {
        prometheus_text::encode(&mut out, &reg)
    };
    r.expect("encoding into a String does not fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_carry_the_values() {
        let mut s = Scrape {
            window_clamp: vec![65536.0, 1e6],
            ..Default::default()
        };
        s.sockets.insert("wscale-off", 2);
        for om in [false, true] {
            let t = encode(&s, None, 0.01, 0, om);
            assert!(
                t.contains("tcpwin_sockets_by_window_clamp_bytes{upper=\"+Inf\"} 2"),
                "{t}"
            );
            assert!(
                t.contains("tcpwin_sockets_window_clamp_bytes 1065536"),
                "{t}"
            );
            assert!(t.contains("tcpwin_sockets{limit=\"wscale-off\"} 2"), "{t}");
            // every limit, zero where no socket has it
            assert!(
                t.contains("tcpwin_sockets{limit=\"rcvbuf-locked\"} 0"),
                "{t}"
            );
            // no histogram type for counts that fall when sockets close
            assert!(!t.contains("histogram"), "{t}");
            assert_eq!(t.contains("# EOF"), om, "{t}");
        }
        assert!(
            content_type(Some("application/openmetrics-text;version=1.0.0"))
                .contains("openmetrics")
        );
        assert!(content_type(None).contains("0.0.4"));
        // the handshake counters: every series from the first scrape, 0 before any handshake
        let s = Scrape {
            established: Some(Default::default()),
            ..Default::default()
        };
        let t = encode(&s, None, 0.01, 0, false);
        for (w, d) in [
            ("negotiated", "active"),
            ("negotiated", "passive"),
            ("not_negotiated", "active"),
            ("not_negotiated", "passive"),
        ] {
            assert!(
                t.contains(&format!(
                    "tcpwin_connections_established_total{{wscale=\"{w}\",direction=\"{d}\"}} 0"
                )),
                "{t}"
            );
        }
    }
}
