//! A recording (`tcpwin-trace record -o FILE`): a header line, the tracer's JSON lines with a
//! `sample` line per traced socket each second, and the summary. Parsed here; turned into
//! per-socket series (what `report --svg` draws) and the figures `report A B` sets side by side.
use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use crate::{
    kind::EventKind,
    schema::{parse_line, EventLine, HeaderLine, Line, SampleLine, SummaryLine, VerdictLine},
    verdict::Side,
};

/// A whole recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    pub header: HeaderLine,
    pub events: Vec<EventLine>,
    pub verdicts: Vec<VerdictLine>,
    pub samples: Vec<SampleLine>,
    pub summary: SummaryLine,
}

/// Parses a recording; `name` is how errors call it. A file that does not open with a header is
/// not a recording; one without the summary was cut short.
pub fn parse_recording(text: &str, name: &str) -> Result<Recording> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, first)) = lines.next() else {
        bail!("{name} is empty: not a tcpwin-trace recording");
    };
    let header: HeaderLine = serde_json::from_str(first)
        .ok()
        .filter(|h: &HeaderLine| h.tool == "tcpwin-trace")
        .with_context(|| {
            format!("{name} is not a tcpwin-trace recording (its first line is not the recording's header)")
        })?;
    let (mut events, mut verdicts, mut samples, mut summary) =
        (Vec::new(), Vec::new(), Vec::new(), None);
    for (i, l) in lines {
        if summary.is_some() {
            bail!("{name}: line {} comes after the summary", i + 1);
        }
        let v: serde_json::Value = match serde_json::from_str(l) {
            Ok(v) => v,
            // the last line half-written: the recorder was killed
            Err(_) => bail!(
                "{name} is truncated or damaged at line {} (the recording did not finish)",
                i + 1
            ),
        };
        if v.get("event").and_then(|e| e.as_str()) == Some("sample") {
            samples.push(
                serde_json::from_value(v)
                    .with_context(|| format!("{name}: line {} is not a sample", i + 1))?,
            );
            continue;
        }
        match parse_line(l).with_context(|| format!("{name}: line {}", i + 1))? {
            Line::Event(e) => events.push(*e),
            Line::Verdict(v) => verdicts.push(*v),
            Line::Summary(s) => summary = Some(*s),
        }
    }
    let summary = summary.with_context(|| {
        format!("{name} is truncated: it has no summary line (the recording did not finish)")
    })?;
    Ok(Recording {
        header,
        events,
        verdicts,
        samples,
        summary,
    })
}

/// The fields `report --svg` draws over time, per socket.
pub const WINDOW_FIELDS: [&str; 4] = ["window_clamp", "rcv_ssthresh", "rcv_wnd", "sk_rcvbuf"];
pub const RATE_FIELDS: [&str; 2] = ["rate", "ceiling"];

/// A ratio change, with the packet that made it.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub t_s: f64,
    pub from: Option<u8>,
    pub to: Option<u8>,
    pub label: String,
}

/// One socket's series, time in seconds from the recording's start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SocketSeries {
    pub cookie: u64,
    pub name: String,
    /// by field name (`WINDOW_FIELDS`: bytes; `RATE_FIELDS`: bit/s)
    pub series: BTreeMap<&'static str, Vec<(f64, f64)>>,
    pub marks: Vec<Mark>,
}

fn push(s: &mut SocketSeries, field: &'static str, t: f64, v: Option<u64>) {
    if let Some(v) = v {
        s.series.entry(field).or_default().push((t, v as f64));
    }
}

/// Whether a socket's series shows a transfer: data moved (a rate above 0 in a sample) or its
/// ratio changed (data arrived). Idle sockets (a control connection) are left out of drawings.
pub fn moved_data(s: &SocketSeries) -> bool {
    !s.marks.is_empty()
        || s.series
            .get("rate")
            .is_some_and(|v| v.iter().any(|(_, r)| *r > 0.0))
}

/// Which way data flowed on a socket over a recording (the rule every view draws): its last
/// sample's bytes received against acknowledged, else a ratio change (data arrived).
fn side_of(r: &Recording, cookie: Option<u64>) -> Option<Side> {
    let last = r.samples.iter().rev().find(|s| s.id.cookie == cookie);
    match last.map(|s| (s.bytes_received.unwrap_or(0), s.bytes_acked.unwrap_or(0))) {
        Some((rx, tx)) if rx > tx => Some(Side::Receiving),
        Some((rx, tx)) if tx > rx => Some(Side::Sending),
        _ => r
            .events
            .iter()
            .any(|e| e.id.cookie == cookie && e.event == EventKind::Ratio)
            .then_some(Side::Receiving),
    }
}

/// Per socket (by cookie, in order of first appearance): the window fields from every event and
/// sample in time order, the rate and ceiling from the samples, the ratio changes as marks.
pub fn socket_series(r: &Recording) -> Vec<SocketSeries> {
    let t0 = r.header.start_ts_ns;
    let t = |ts: u64| ts.saturating_sub(t0) as f64 / 1e9;
    // (ts, order, line): events and samples merged by time
    enum Item<'a> {
        E(&'a EventLine),
        S(&'a SampleLine),
    }
    let mut items: Vec<(u64, Item)> = r
        .events
        .iter()
        .filter(|e| e.id.cookie.is_some())
        .map(|e| (e.ts_ns, Item::E(e)))
        .chain(r.samples.iter().map(|s| (s.ts_ns, Item::S(s))))
        .collect();
    items.sort_by_key(|(ts, _)| *ts);
    let mut order: Vec<u64> = Vec::new();
    let mut by: BTreeMap<u64, SocketSeries> = BTreeMap::new();
    for (ts, it) in items {
        let id = match &it {
            Item::E(e) => &e.id,
            Item::S(s) => &s.id,
        };
        let (cookie, name) = (
            id.cookie.unwrap_or(0),
            id.flow(Side::arrow(side_of(r, id.cookie))),
        );
        let s = by.entry(cookie).or_insert_with(|| {
            order.push(cookie);
            SocketSeries {
                cookie,
                name,
                ..Default::default()
            }
        });
        let x = t(ts);
        match it {
            Item::E(e) => {
                // the active side's placeholder clamp is not a value the connection had
                let placeholder = e.init.as_ref().is_some_and(|i| i.window_clamp_placeholder);
                push(
                    s,
                    "window_clamp",
                    x,
                    (!placeholder).then_some(e.window_clamp as u64),
                );
                push(s, "rcv_ssthresh", x, Some(e.rcv_ssthresh as u64));
                push(s, "rcv_wnd", x, Some(e.rcv_wnd as u64));
                push(s, "sk_rcvbuf", x, Some(e.sk_rcvbuf as u64));
                if e.event == EventKind::Ratio {
                    let c = e.cause.as_ref();
                    let from = c.and_then(|c| c.prev_scaling_ratio);
                    let shape = c
                        .map(|c| {
                            format!(
                                "len {} / truesize {}{}",
                                c.skb_len.map(|v| v.to_string()).unwrap_or("?".into()),
                                c.skb_truesize.map(|v| v.to_string()).unwrap_or("?".into()),
                                match c.gso_segs {
                                    Some(n) if n > 1 => format!(" x{n} segs"),
                                    _ => String::new(),
                                }
                            )
                        })
                        .unwrap_or_default();
                    s.marks.push(Mark {
                        t_s: x,
                        from,
                        to: e.scaling_ratio,
                        label: format!(
                            "ratio {}->{} ({shape})",
                            from.map(|v| v.to_string()).unwrap_or("?".into()),
                            e.scaling_ratio.map(|v| v.to_string()).unwrap_or("?".into())
                        ),
                    });
                }
            }
            Item::S(smp) => {
                push(s, "window_clamp", x, smp.window_clamp.map(u64::from));
                push(s, "rcv_ssthresh", x, smp.rcv_ssthresh.map(u64::from));
                push(s, "rcv_wnd", x, smp.rcv_wnd.map(u64::from));
                push(s, "sk_rcvbuf", x, smp.sk_rcvbuf.map(u64::from));
                push(s, "rate", x, smp.rate_bps);
                push(s, "ceiling", x, smp.ceiling_bps);
            }
        }
    }
    order.into_iter().filter_map(|c| by.remove(&c)).collect()
}

/// What `report A B` compares: the busiest socket's figures (most bytes received, else most
/// events) and the recording's packet ratio.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub sockets: u64,
    /// which socket was compared: `local <- remote sk=cookie`
    pub busiest: Option<String>,
    /// the busiest socket's last scaling_ratio and window_clamp
    pub scaling_ratio: Option<u8>,
    pub window_clamp: Option<u32>,
    /// its largest advertised window
    pub max_rcv_wnd: Option<u32>,
    /// its mean rate over the samples that have one, bit/s
    pub mean_rate_bps: Option<f64>,
    /// its ratio changes
    pub ratio_changes: usize,
    /// median per-packet ratio over every interface (the summary's histograms)
    pub packet_ratio_p50: Option<u64>,
}

pub fn figures(r: &Recording) -> Figures {
    // per socket, in one pass: (most bytes received, events)
    let mut per: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    for c in r.events.iter().filter_map(|e| e.id.cookie) {
        per.entry(c).or_default().1 += 1;
    }
    for s in &r.samples {
        let e = per.entry(s.id.cookie.unwrap_or(0)).or_default();
        e.0 = e.0.max(s.bytes_received.unwrap_or(0));
    }
    let busiest = per
        .iter()
        .max_by_key(|(c, (bytes, events))| (*bytes, *events, std::cmp::Reverse(**c)))
        .map(|(c, _)| *c);
    let last_event = busiest.and_then(|c| r.events.iter().rev().find(|e| e.id.cookie == Some(c)));
    let rates: Vec<f64> = busiest
        .map(|c| {
            r.samples
                .iter()
                .filter(|s| s.id.cookie == Some(c))
                .filter_map(|s| s.rate_bps)
                .map(|v| v as f64)
                .collect()
        })
        .unwrap_or_default();
    let p50 = {
        let all: Vec<&crate::schema::HistSummary> =
            r.summary.histograms.packet_ratio.values().collect();
        let n: u64 = all.iter().map(|h| h.count).sum();
        // the interface with most packets
        all.iter()
            .max_by_key(|h| h.count)
            .filter(|_| n > 0)
            .map(|h| h.p50)
    };
    let name = busiest.and_then(|c| {
        let id = r
            .events
            .iter()
            .map(|e| &e.id)
            .chain(r.samples.iter().map(|s| &s.id))
            .find(|id| id.cookie == Some(c))?;
        Some(format!(
            "{} sk={c:x}",
            id.flow(Side::arrow(side_of(r, Some(c))))
        ))
    });
    Figures {
        sockets: per.len() as u64,
        busiest: name,
        scaling_ratio: last_event.and_then(|e| e.scaling_ratio),
        window_clamp: last_event.map(|e| e.window_clamp),
        max_rcv_wnd: busiest.and_then(|c| {
            r.events
                .iter()
                .filter(|e| e.id.cookie == Some(c))
                .map(|e| e.rcv_wnd)
                .chain(
                    r.samples
                        .iter()
                        .filter(|s| s.id.cookie == Some(c))
                        .filter_map(|s| s.rcv_wnd),
                )
                .max()
        }),
        mean_rate_bps: (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64),
        ratio_changes: busiest
            .map(|c| {
                r.events
                    .iter()
                    .filter(|e| e.id.cookie == Some(c) && e.event == EventKind::Ratio)
                    .count()
            })
            .unwrap_or(0),
        packet_ratio_p50: p50,
    }
}
