//! A scrape in the Prometheus formats, encoded by `prometheus-client` (nothing of the exposition
//! format is written by hand): OpenMetrics text for clients that ask for it, the classic text
//! format 0.0.4 otherwise.
use prometheus_client::{
    encoding::{prometheus_text, text, EncodeLabelSet},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use tcpwin_model::metrics::{bytes_buckets, name, rate_buckets, ratio_buckets, Scrape};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandshakeLabels {
    wscale: String,
    direction: String,
}

/// The content type to answer with, from the request's `Accept`.
pub fn content_type(accept: Option<&str>) -> &'static str {
    if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    }
}

fn histogram(reg: &mut Registry, n: &str, help: &str, buckets: Vec<f64>, values: &[f64]) {
    let h = Histogram::new(buckets);
    for v in values {
        h.observe(*v);
    }
    reg.register(n, help, h);
}

/// Encodes one scrape; `openmetrics` picks the format. `duration_s`, `errors`: the exporter's
/// own measure of the scrape.
pub fn encode(s: &Scrape, duration_s: f64, errors: u64, openmetrics: bool) -> String {
    let mut reg = Registry::default();
    histogram(
        &mut reg,
        name::SCALING_RATIO,
        "scaling_ratio of current sockets, in 256ths (window = buffer x ratio / 256)",
        ratio_buckets(),
        &s.scaling_ratio,
    );
    histogram(
        &mut reg,
        name::WINDOW_CLAMP,
        "window_clamp of current sockets",
        bytes_buckets(),
        &s.window_clamp,
    );
    histogram(
        &mut reg,
        name::ADVERTISED_WINDOW,
        "the receive window current sockets last advertised",
        bytes_buckets(),
        &s.advertised_window,
    );
    histogram(
        &mut reg,
        name::CEILING,
        "window / RTT of current sockets: the rate their window allows",
        rate_buckets(),
        &s.ceiling_bytes_per_sec,
    );
    let by_limit = Family::<LimitLabel, Gauge>::default();
    for (limit, n) in &s.sockets {
        by_limit
            .get_or_create(&LimitLabel {
                limit: limit.to_string(),
            })
            .set(*n as i64);
    }
    reg.register(
        name::SOCKETS,
        "current sockets by the limit that binds their window",
        by_limit,
    );
    if let Some(est) = &s.established {
        let fam = Family::<HandshakeLabels, Counter>::default();
        for ((ok, passive), n) in est {
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
    let d = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    d.set(duration_s);
    reg.register(name::SCRAPE_DURATION, "time this scrape took", d);
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
            let t = encode(&s, 0.01, 0, om);
            assert!(t.contains("tcpwin_window_clamp_bytes_count 2"), "{t}");
            assert!(t.contains("tcpwin_sockets{limit=\"wscale-off\"} 2"), "{t}");
            assert_eq!(t.contains("# EOF"), om, "{t}");
        }
        assert!(
            content_type(Some("application/openmetrics-text;version=1.0.0"))
                .contains("openmetrics")
        );
        assert!(content_type(None).contains("0.0.4"));
    }
}
