//! The JSON that tcpwin-trace writes (events, verdicts, samples, headers and summaries of a
//! trace or recording, `ss` lines), as typed structs: the only place the key names exist; what
//! the lab and the benchmark write is in `rows`. A fact the kernel or backend did not give is `null` (an `Option`), never 0; a
//! key that only some event kinds carry is absent from the others.
use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::kind::EventKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

use crate::id::nullable;
pub use crate::id::{endpoint, SocketId};

/// One live event line (`--json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    pub event: EventKind,
    /// CLOCK_MONOTONIC, ns
    pub ts_ns: u64,
    #[serde(flatten)]
    pub id: SocketId,
    #[serde(deserialize_with = "nullable")]
    pub pid: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub comm: Option<String>,
    /// the owner's workload (container, pod or unit), where the event names its process
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::workload::Workload>,
    pub family: Family,
    /// the kernel hook that reported it
    pub hook: String,
    /// null before 6.6 (the field does not exist)
    #[serde(deserialize_with = "nullable")]
    pub scaling_ratio: Option<u8>,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub rcv_wnd: u32,
    pub sk_rcvbuf: u32,
    pub rcvq_space: u32,
    pub rcvbuf_locked: bool,
    pub rcv_mss: u32,
    pub advmss: u32,
    /// `ratio`, `space` and `close` events: the values reported before this one
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "nullable")]
    pub prev: Option<Prev>,
    /// `ratio` events: the packet that set the ratio
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "nullable")]
    pub cause: Option<Cause>,
    /// `init` events: the handshake's outcome
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "nullable")]
    pub init: Option<Init>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prev {
    #[serde(deserialize_with = "nullable")]
    pub prev_window_clamp: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub prev_rcv_ssthresh: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub prev_sk_rcvbuf: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub prev_rcvq_space: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    #[serde(deserialize_with = "nullable")]
    pub prev_scaling_ratio: Option<u8>,
    /// payload bytes of the packet (`tcp_measure_rcv_mss`'s `skb->len`)
    #[serde(deserialize_with = "nullable")]
    pub skb_len: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub skb_truesize: Option<u32>,
    /// null when the tracer did not read the packet's shared info
    #[serde(deserialize_with = "nullable")]
    pub gso_size: Option<u16>,
    #[serde(deserialize_with = "nullable")]
    pub gso_segs: Option<u16>,
    /// ingress interface
    #[serde(deserialize_with = "nullable")]
    pub ifindex: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Init {
    pub rcv_wscale: u8,
    pub wscale_ok: bool,
    /// `tcp_select_initial_window(__space, mss)`: function-hook backends only
    #[serde(deserialize_with = "nullable")]
    pub space: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub mss: Option<u32>,
    /// `window_clamp` is the active side's placeholder (`65535 << rcv_wscale`), replaced at once
    /// by the kernel: not the value the connection starts with
    #[serde(default)]
    pub window_clamp_placeholder: bool,
}

impl EventLine {
    /// The ratio `tcp_measure_rcv_mss` computes from the reported packet.
    pub fn cause_ratio(&self) -> Option<u64> {
        let c = self.cause.as_ref()?;
        tcpwin_common::formula::ratio(c.skb_len?, c.skb_truesize?)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SummaryTag {
    Summary,
}

/// The closing line of a trace (`--json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryLine {
    pub event: SummaryTag,
    pub backend: String,
    pub hooks: String,
    pub duration_s: f64,
    pub stop_reason: String,
    /// per hook name: runs of its program
    pub hook_hits: BTreeMap<String, u64>,
    pub counters: Counters,
    pub events_received: u64,
    /// dropped in the kernel (ring full) plus sent but never read
    pub events_lost: u64,
    pub decode_errors: u64,
    pub sockets: u64,
    pub scaling_ratio_present: bool,
    pub histograms: Histograms,
    /// sockets by their last verdict (limit id -> count); empty when verdicts were off
    pub verdicts: BTreeMap<crate::verdict::Limit, u64>,
    /// with `--ebpf-log`: the kernel side's log lines
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebpf_log: Option<EbpfLogLines>,
}

/// The kernel side's log lines (`--ebpf-log`): written by the programs, shown on stderr, and
/// lost because the log ring was full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EbpfLogLines {
    pub written: u64,
    pub shown: u64,
    pub lost: u64,
}

/// The kernel side's counters (per-CPU sums) and the runs the kernel skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// an event was due (a tracked value changed, or init/seen/close)
    pub due: u64,
    pub sent: u64,
    /// ring buffer full
    pub dropped: u64,
    pub filtered_hits: u64,
    pub state_full: u64,
    /// data packets counted in the per-packet histogram
    pub packets: u64,
    pub hist_full: u64,
    pub recheck_skipped: u64,
    /// runs of the tracer's programs the kernel skipped (recursion on one CPU)
    pub hook_runs_missed: u64,
    /// changes no hook reported, found by the once-a-second socket iterator reading (and the
    /// one at exit) and reported as events from `iter/tcp`
    #[serde(default)]
    pub caught_up: u64,
    /// connections whose `init` waited for their first other record (merged into it)
    #[serde(default)]
    pub inits_deferred: u64,
    /// of those, `init`s that never reached the trace: their socket's state was evicted
    /// (`state_full`) or their namespace was gone before a walk found them
    #[serde(default)]
    pub inits_lost: u64,
    /// records handed to the trace: each event received, and each deferred `init` that left
    /// inside another record counted apart (every one is a line of its own)
    #[serde(default)]
    pub records: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Histograms {
    /// per ingress interface name: `skb->len * 256 / truesize` of each data packet
    pub packet_ratio: BTreeMap<String, HistSummary>,
    pub scaling_ratio: HistSummary,
    pub window_clamp: HistSummary,
    pub rcv_ssthresh: HistSummary,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistSummary {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub min: u64,
    pub max: u64,
    /// `[low, high, count]` of each non-empty bucket
    pub buckets: Vec<(u64, u64, u64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictTag {
    Verdict,
}

/// The tracer's judgement of one socket: written when the binding limit changes, and once more
/// (`final`) when the socket closes or the trace ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictLine {
    pub event: VerdictTag,
    pub ts_ns: u64,
    #[serde(flatten)]
    pub id: SocketId,
    /// the socket closed or the trace ended: its last verdict
    #[serde(rename = "final")]
    pub last: bool,
    pub verdict: crate::verdict::Verdict,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderTag {
    Header,
}

/// The first line of a recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeaderLine {
    pub event: HeaderTag,
    pub tool: String,
    pub version: String,
    /// `uname -r`
    pub kernel: String,
    pub host: String,
    pub backend: String,
    pub hooks: String,
    /// seconds since the Unix epoch, and the CLOCK_MONOTONIC ns the lines' `ts_ns` count on
    pub start_unix_s: f64,
    pub start_ts_ns: u64,
    /// the command line
    pub args: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleTag {
    Sample,
}

/// One traced socket read through the socket iterator (once a second while recording).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleLine {
    pub event: SampleTag,
    pub ts_ns: u64,
    #[serde(flatten)]
    pub id: SocketId,
    pub scaling_ratio: Option<u8>,
    pub window_clamp: Option<u32>,
    pub rcv_ssthresh: Option<u32>,
    pub rcv_wnd: Option<u32>,
    pub sk_rcvbuf: Option<u32>,
    pub srtt_us: Option<u32>,
    pub bytes_received: Option<u64>,
    pub bytes_acked: Option<u64>,
    /// over the second before (null on a socket's first sample), bit/s
    pub rate_bps: Option<u64>,
    /// the window / RTT the verdict measured, bit/s
    pub ceiling_bps: Option<u64>,
    pub limit: Option<crate::verdict::Limit>,
}

impl SampleLine {
    pub fn new(f: &crate::facts::SockFacts, v: Option<&crate::verdict::Verdict>) -> SampleLine {
        SampleLine {
            event: SampleTag::Sample,
            ts_ns: f.ts_ns,
            id: f.id.clone(),
            scaling_ratio: f.scaling_ratio,
            window_clamp: f.window_clamp,
            rcv_ssthresh: f.rcv_ssthresh,
            rcv_wnd: f.rcv_wnd,
            sk_rcvbuf: f.sk_rcvbuf,
            srtt_us: f.srtt_us,
            bytes_received: f.bytes_received,
            bytes_acked: f.bytes_acked,
            rate_bps: v.and_then(|v| v.rate_bps),
            ceiling_bps: v.and_then(|v| v.ceiling_bps),
            limit: v.map(|v| v.limit),
        }
    }
}

/// One line of the tracer's `--json` output.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    Event(Box<EventLine>),
    Verdict(Box<VerdictLine>),
    Summary(Box<SummaryLine>),
}

/// A whole `--json` trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub events: Vec<EventLine>,
    pub verdicts: Vec<VerdictLine>,
    pub summary: SummaryLine,
}

/// Parses one line of `--json` output.
pub fn parse_line(line: &str) -> Result<Line> {
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("not JSON: {line}"))?;
    match v.get("event").and_then(|e| e.as_str()) {
        Some("summary") => {
            return Ok(Line::Summary(Box::new(
                serde_json::from_value(v).with_context(|| format!("not a summary line: {line}"))?,
            )))
        }
        Some("verdict") => {
            return Ok(Line::Verdict(Box::new(
                serde_json::from_value(v).with_context(|| format!("not a verdict line: {line}"))?,
            )))
        }
        _ => {}
    }
    Ok(Line::Event(Box::new(
        serde_json::from_value(v).with_context(|| format!("not an event line: {line}"))?,
    )))
}

/// A whole `--json` trace: its events, verdicts and the summary that must close it.
pub fn parse_trace(text: &str) -> Result<Trace> {
    let mut events = Vec::new();
    let mut verdicts = Vec::new();
    let mut summary = None;
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        if summary.is_some() {
            bail!("a line after the summary: {l}");
        }
        match parse_line(l)? {
            Line::Event(e) => events.push(*e),
            Line::Verdict(v) => verdicts.push(*v),
            Line::Summary(s) => summary = Some(*s),
        }
    }
    let summary = summary.context("the trace has no summary line (the tracer did not finish)")?;
    Ok(Trace {
        events,
        verdicts,
        summary,
    })
}

/// One socket of `tcpwin-trace ss --json`: its facts (null where the source cannot read them),
/// where they came from, and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SsLine {
    /// `iterator` (BPF iter/tcp) or `sock_diag`
    pub source: String,
    /// the namespace's name (`ip netns`), `pid:N` for one only a process lives in, `-` for the
    /// caller's
    pub netns_name: String,
    /// `ESTAB`, `FIN-WAIT-1`, ... as `ss` names states
    pub state_name: String,
    #[serde(flatten)]
    pub facts: crate::facts::SockFacts,
    pub verdict: crate::verdict::Verdict,
    /// the limits of the socket's namespace (sysctls, routes, interfaces), where the reading
    /// carries them: an exporter's answer to a peer (`/sockets`), judged there with its own
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::facts::HostLimits>,
    /// the four-tuple (local, local port, remote, remote port) the other end has for this
    /// connection, where the host reading it translated the connection (its connection tracking:
    /// a node port, a Service's address, a masquerade); an exporter's answer to a peer carries it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_end: Option<crate::id::FourTuple>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATIO: &str = r#"{"event":"ratio","ts_ns":1,"cookie":7,"netns":4026531840,"pid":null,"comm":null,"family":"ipv4","laddr":"10.0.0.2","lport":5201,"raddr":"10.0.0.1","rport":40000,"hook":"tcp:tcp_probe","scaling_ratio":162,"window_clamp":663552,"rcv_ssthresh":64000,"rcv_wnd":65535,"sk_rcvbuf":1048576,"rcvq_space":14480,"rcvbuf_locked":false,"rcv_mss":1448,"advmss":1448,"prev_window_clamp":524288,"prev_rcv_ssthresh":null,"prev_sk_rcvbuf":1048576,"prev_rcvq_space":14480,"prev_scaling_ratio":128,"skb_len":1448,"skb_truesize":2280,"gso_size":null,"gso_segs":null,"ifindex":2}"#;

    #[test]
    fn a_ratio_line_round_trips() {
        let Line::Event(e) = parse_line(RATIO).unwrap() else {
            panic!("an event")
        };
        assert_eq!(e.event, EventKind::Ratio);
        assert_eq!(e.cause_ratio(), Some(162));
        assert_eq!(e.prev.as_ref().unwrap().prev_rcv_ssthresh, None);
        assert!(e.init.is_none());
        let back = serde_json::to_value(&*e).unwrap();
        let orig: serde_json::Value = serde_json::from_str(RATIO).unwrap();
        assert_eq!(back, orig);
    }

    #[test]
    fn parts_are_present_only_on_their_kinds() {
        let seen = r#"{"event":"seen","ts_ns":1,"cookie":null,"netns":1,"pid":null,"comm":null,"family":"ipv6","laddr":"::1","lport":1,"raddr":"::1","rport":2,"hook":"h","scaling_ratio":null,"window_clamp":1,"rcv_ssthresh":1,"rcv_wnd":1,"sk_rcvbuf":1,"rcvq_space":1,"rcvbuf_locked":true,"rcv_mss":1,"advmss":1}"#;
        let Line::Event(e) = parse_line(seen).unwrap() else {
            panic!("an event")
        };
        assert!(e.prev.is_none() && e.cause.is_none() && e.init.is_none());
        let back = serde_json::to_value(&*e).unwrap();
        assert_eq!(
            back,
            serde_json::from_str::<serde_json::Value>(seen).unwrap()
        );
        // a missing key is not null
        assert!(parse_line(&seen.replace(r#""cookie":null,"#, "")).is_err());
    }

    #[test]
    fn a_trace_needs_its_summary() {
        let e = parse_trace(RATIO).unwrap_err().to_string();
        assert!(e.contains("no summary"), "{e}");
        assert!(parse_line("{\"event\":\"bogus\"}").is_err());
        assert!(parse_line("not json").is_err());
    }
}
