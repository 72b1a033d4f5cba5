//! What the lab, its endpoints and the benchmark write (JSON lines), as typed structs, apart
//! from what the product writes (`schema`): the endpoints' ground truth, the lab's tables, the
//! benchmark's rows.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use tcpwin_model::id::nullable;

/// What the built-in endpoints report about a connection from its owning process: getsockopt
/// `TCP_INFO`, `TCP_WINDOW_CLAMP`, `SO_COOKIE`, `SO_RCVBUF`. The ground truth tests and the lab
/// compare the tracer with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointReport {
    pub cookie: u64,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub rcv_space: u32,
    pub rcv_mss: u32,
    pub advmss: u32,
    pub rcv_wscale: u8,
    pub snd_wscale: u8,
    /// `getsockopt(SO_RCVBUF)`: the kernel's `sk_rcvbuf`
    pub so_rcvbuf: u32,
    /// `tcpi_min_rtt`, µs
    pub min_rtt_us: u32,
    /// `tcpi_rwnd_limited` and `tcpi_busy_time`, µs (Linux 4.10+; null where `tcp_info` is
    /// shorter)
    pub rwnd_limited_us: Option<u64>,
    pub busy_us: Option<u64>,
    /// `tcpi_snd_wnd` (5.4+)
    pub snd_wnd: Option<u32>,
    pub local: Option<String>,
    pub peer: Option<String>,
    /// receiver: bytes read
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// sender: the largest window the peer advertised during the transfer
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd_peak: Option<u32>,
    /// sender: bytes * 8 / time spent writing and waiting for the peer's close
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<u64>,
    /// sender with a time limit: bytes acknowledged over the last two thirds of it (its own
    /// TCP_INFO), slow start left out
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_bps: Option<u64>,
    /// sender with a time limit: the peer's window when it stopped writing
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_snd_wnd: Option<u32>,
}

/// One row of `tcpwin-trace lab --scenario`: a transfer over the WAN path, what the tool
/// predicted and judged, and what the sender measured itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WanRow {
    pub scenario: String,
    /// the receiver's setting of this row, in words
    pub condition: String,
    /// the traffic: the lab's own endpoints, or a real program (`iperf3 -w 8K`, `nginx
    /// sndbuf=32k -> curl`)
    pub app: String,
    /// the run's number with `--repeat`
    pub run: u32,
    /// the bottleneck's queue inside the path, ms at its rate (null: the sender's own tbf,
    /// which TCP small queues keep short; or no bottleneck)
    pub queue_ms: Option<u32>,
    /// the RTT asked of the path, and the one TCP saw (the sender's `tcpi_min_rtt`)
    pub rtt_ms: f64,
    pub min_rtt_ms: Option<f64>,
    /// the path's bottleneck (tbf)
    pub rate_limit_bps: Option<u64>,
    pub mtu: u32,
    /// receiver GRO
    pub gro: bool,
    /// the sender's congestion control
    pub cc: String,
    /// the receiving end's verdict: the largest window, window / RTT, and min(ceiling, rate)
    pub window: Option<u64>,
    pub ceiling_bps: Option<u64>,
    pub predicted_bps: Option<u64>,
    /// the sender's own steady rate (bytes acknowledged over the last two thirds; with a real
    /// program, the rate it reports itself)
    pub throughput_bps: Option<u64>,
    /// the sender's rwnd-limited share of busy time (its TCP_INFO)
    pub rwnd_limited_share: Option<f64>,
    /// the window the sender saw advertised when it stopped writing (its `tcpi_snd_wnd`)
    pub snd_wnd: Option<u32>,
    /// the receiving end's and the sending end's verdicts (both ends read and judged together)
    pub verdict: Option<tcpwin_model::verdict::Limit>,
    pub sender_verdict: Option<tcpwin_model::verdict::Limit>,
    /// the limit this scenario is built to show, and a second verdict that says the same where
    /// the path decides between them (`not-window-limited` or `path-queue`)
    pub expected: tcpwin_model::verdict::Limit,
    pub also_expected: Option<tcpwin_model::verdict::Limit>,
    /// the verdict's numbers: RTT, base RTT, the queue
    pub rtt_us: Option<u32>,
    pub base_rtt_us: Option<u32>,
    pub queue_us: Option<u32>,
    pub setting: Option<String>,
    pub suggested: Option<String>,
    /// the other limits the receiver's verdict names beside its own (both ends read together)
    #[serde(default)]
    pub factors: Vec<tcpwin_model::verdict::Limit>,
    pub scaling_ratio: Option<u8>,
    pub window_clamp: Option<u32>,
    pub sk_rcvbuf: Option<u32>,
    /// the delay line: frames that left more than 1 ms late, the latest, frames it lost
    pub path_late: u64,
    pub path_max_late_us: u64,
    pub path_drops: u64,
    /// frames that waited more than 1 ms in the line's receive socket, the longest wait (µs),
    /// and every frame it forwarded
    #[serde(default)]
    pub path_rx_late: u64,
    #[serde(default)]
    pub path_max_rx_wait_us: u64,
    #[serde(default)]
    pub path_forwarded: u64,
    /// what the delay line added to a round trip on average beyond the asked RTT, µs
    #[serde(default)]
    pub path_added_rtt_us: u64,
    /// sends of the delay line the receiving veth refused, its queue full (ENOBUFS): the frames
    /// were kept and sent again (late, not lost)
    #[serde(default)]
    pub path_queue_full_retries: u64,
    /// sends of the delay line refused otherwise (EAGAIN: its packet socket's send buffer),
    /// kept and sent again alike
    #[serde(default)]
    pub path_send_retries: u64,
    /// the path kept its delay (late frames within the lab's bound): only such a row is judged
    #[serde(default = "yes")]
    pub path_on_time: bool,
    /// which attempt at this row this is (a row whose path was late is run again, and a row
    /// showing GRO whose receiver's veth merged nothing)
    #[serde(default = "one")]
    pub attempt: u32,
    /// a row that shows what receiver GRO does: the receiver's veth merged segments (its ratio
    /// rose above one segment per packet's). The lab's veth stands in for a NIC by polling in a
    /// thread of its own; with the CPUs busy that thread can poll each frame alone, and then GRO
    /// merges nothing however it is set
    #[serde(default = "yes")]
    pub gro_merged: bool,
    /// the transfer's verdicts as each way of reading it names them: one snapshot or an
    /// interval, both ends together or each alone
    #[serde(default)]
    pub reads: Vec<ReadVerdict>,
    /// `--apply-fix`: the fix the verdict gave (as its JSON has it) and the transfer run again
    /// with it applied
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<tcpwin_model::verdict::Fix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<FixedRun>,
    /// `--apply-fix` on a row whose verdict prints no TCP fix (a sender that holds itself: its
    /// application, its own pacing cap): both ends' buffer maxima raised anyway and the transfer
    /// run again, to show the rate does not move
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<CounterRun>,
    /// the transfer's ends as read (at 2 s, a quarter second later, at 5 s) with their
    /// namespaces' limits: a verdict can be judged again from them (a unit test from the facts)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<RecordedEnd>,
    /// with each end's peer over the network: the other end as that end's peer exporter
    /// answered it at the same three readings (`end` names the end that asked), so a verdict of
    /// the fifth way can be judged again beside `recorded`'s own readings
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer_recorded: Vec<RecordedEnd>,
}

/// How a transfer was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Read {
    /// one look, as `ss` without `-i` (a second reading of sockets moving data 250 ms later)
    Snapshot,
    /// two readings three seconds apart, as `ss -i`
    Interval,
}

/// Which ends were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// both ends' namespaces read together (one host, or `--netns all`)
    Both,
    /// each end's namespace alone (two hosts)
    Alone,
    /// each end's namespace with its peer's end from the peer's exporter over the network (two
    /// hosts, `--peer`)
    Peer,
}

/// One end's verdict in one way of reading.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadVerdict {
    pub read: Read,
    pub view: View,
    /// `receiver` or `sender`
    pub end: String,
    pub verdict: Option<tcpwin_model::verdict::Limit>,
    /// the scenario's expectation for this read holds it
    pub accepted: bool,
    /// what the judge's own check refused in this verdict (its why, fix and facts disagree)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// A transfer run again after its verdict's fix was applied exactly as the JSON gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedRun {
    /// what was done: each command run, and the application's option as the program takes it
    pub applied: Vec<String>,
    pub throughput_bps: Option<u64>,
    /// the same path with nothing set (the rate a repaired transfer should reach)
    pub baseline_bps: Option<u64>,
    pub verdict: Option<tcpwin_model::verdict::Limit>,
    pub sender_verdict: Option<tcpwin_model::verdict::Limit>,
    /// the receiver after the fix: its window, ratio and window_clamp
    #[serde(default)]
    pub window: Option<u64>,
    #[serde(default)]
    pub scaling_ratio: Option<u8>,
    #[serde(default)]
    pub window_clamp: Option<u32>,
    /// the transfer after the fix read four ways, as the row's `reads`
    #[serde(default)]
    pub reads: Vec<ReadVerdict>,
    /// the rate reached 80 % of the baseline and no end, however read, names a window limit
    pub closed: bool,
    /// the same path was run with nothing set (`lab --no-baseline` skips that run: the window
    /// the kernel allows after the fix and the verdicts are read, whether the rate reached the
    /// path's is not, and the loop is not judged)
    #[serde(default = "yes")]
    pub baseline_run: bool,
    /// both runs' delay lines kept the path's RTT
    #[serde(default = "yes")]
    pub on_time: bool,
    /// with GRO on after the fix (the fix turns it on, or it was on and merged before): the
    /// receiver's veth merged segments after it (its ratio rose over one segment per packet).
    /// The lab's veth stands in for a NIC by polling in a thread of its own; with the CPUs busy
    /// that thread can poll each frame alone, and then GRO merges nothing however it is set
    #[serde(default = "yes")]
    pub gro_merged: bool,
    /// where two limits hold at once: the rounds before this one, each with its fix and what the
    /// transfer named after it (the limit whose fix the next round applied)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<Round>,
    /// the transfer's ends as read after the fix (see `WanRow::recorded`)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<RecordedEnd>,
}

/// The buffer fixes applied where none is printed (see `WanRow::counter`), and the transfer
/// after them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CounterRun {
    /// what was raised, in words
    pub applied: Vec<String>,
    pub throughput_bps: Option<u64>,
    /// where the raised rate passed [`COUNTER_HOLDS`] times the row's own: the row's transfer
    /// once more as it was, nothing raised (a slow first run is not a lift)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub again_bps: Option<u64>,
    /// the rate stayed under [`COUNTER_HOLDS`] times the row's own (or its run again, the
    /// faster): no buffer lifted it
    pub held: bool,
}

/// A counter-proof holds while the rate with both buffers raised stays under this share of the
/// row's own rate (run-to-run spread on the delay line is a few percent; a buffer that bound
/// would lift the rate by far more).
pub const COUNTER_HOLDS: f64 = 1.15;

/// A round of the fix loop before its last: the fix applied, and the transfer after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    pub applied: Vec<String>,
    pub throughput_bps: Option<u64>,
    pub verdict: Option<tcpwin_model::verdict::Limit>,
    pub sender_verdict: Option<tcpwin_model::verdict::Limit>,
    /// the limit named after this round is the one the scenario sets up to bind next
    pub named_next: bool,
    /// the transfer after this round read four ways
    #[serde(default)]
    pub reads: Vec<ReadVerdict>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<RecordedEnd>,
}

impl FixedRun {
    /// How many fixes the loop applied.
    pub fn rounds(&self) -> usize {
        self.earlier.len() + 1
    }

    /// Whether the loop is judged: a late path only adds RTT, which makes the window look
    /// tighter and the rate lower, so a loop closed on it is closed; one left open on it says
    /// nothing and is not judged. Likewise a GRO fix after which the lab's veth merged
    /// nothing: the lab did not stand in for a NIC on that run, so an open loop says nothing
    /// about the fix.
    pub fn judged(&self) -> bool {
        self.baseline_run && ((self.on_time && self.gro_merged) || self.closed)
    }

    /// Why an open loop is not judged, in words; None when it is judged.
    pub fn unjudged_because(&self) -> Option<&'static str> {
        match (self.judged(), self.baseline_run, self.on_time) {
            (true, ..) => None,
            (false, false, _) => Some("no baseline run"),
            (false, true, false) => Some("path late"),
            (false, true, true) => Some("GRO on, the lab's veth merged nothing"),
        }
    }
}

/// A repaired transfer reaches this share of the same path's rate with nothing set.
pub const FIX_CLOSES_SHARE: f64 = 0.8;

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

impl WanRow {
    /// The row's setup as the lab's summary names it: the application, the condition, the path
    /// (its RTT, rate and queue, or plain veth) and GRO when it is off: rows that differ only in
    /// the path or GRO are different setups.
    /// The program that drove the row's traffic, from its `app`: `own endpoints`, `iperf3`,
    /// `nginx -> curl` (or `-> wget`, `-> python`), `curl -T -> nginx`.
    pub fn program(&self) -> String {
        program_of(&self.app)
    }

    pub fn setup(&self) -> String {
        let path = match self.rate_limit_bps {
            None => "veth".to_string(),
            Some(rate) => format!(
                "{:.0} ms, {} Mbit/s{}",
                self.rtt_ms,
                rate / 1_000_000,
                self.queue_ms
                    .map(|q| format!(", {q} ms queue"))
                    .unwrap_or_default()
            ),
        };
        format!(
            "{}; {}; {path}{}",
            self.app,
            self.condition,
            if self.gro { "" } else { "; GRO off" }
        )
    }

    /// The verdict is one the scenario is built to show.
    pub fn accepts(&self, got: Option<tcpwin_model::verdict::Limit>) -> bool {
        got.is_some_and(|g| g == self.expected || Some(g) == self.also_expected)
    }
}

/// One line of `tcpwin-trace lab --json`, tagged by its table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "table", rename_all = "snake_case")]
pub enum LabLine {
    /// the GRO / MTU / buffer matrix
    Matrix(MatrixRow),
    /// the SYN-ACK window for a small buffer
    Handshake(HandshakeRow),
    /// the `tcp_adv_win_scale` sweep
    #[serde(rename = "tcp_adv_win_scale")]
    AdvWinScale(AdvWinScaleRow),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixRow {
    pub mtu: u32,
    /// receiver GRO
    pub gro: bool,
    /// sender TSO/GSO
    pub tso: bool,
    /// `pinned-1m`, `auto` or `so_rcvbuf-64k`
    pub buffer: String,
    pub scaling_ratio: Option<u64>,
    /// the packet that set the settled ratio
    pub first_skb_len: Option<u64>,
    pub first_skb_truesize: Option<u64>,
    pub window_clamp: Option<u64>,
    pub sk_rcvbuf: Option<u64>,
    /// window_clamp / sk_rcvbuf
    pub window_share: Option<f64>,
    pub snd_wnd_peak: Option<u64>,
    pub throughput_bps: Option<u64>,
    pub init_rcv_wnd: Option<u64>,
    /// the receiver's own TCP_WINDOW_CLAMP, for cross-checking
    pub getsockopt_window_clamp: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandshakeRow {
    pub mtu: u32,
    pub rcvbuf: u64,
    pub advmss: Option<u64>,
    pub syn_ack_window: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdvWinScaleRow {
    pub tcp_adv_win_scale: i32,
    pub syn_ack_window: Option<u64>,
    pub window_clamp: Option<u64>,
}

/// One row of `cargo xtask bench --json`, tagged by its workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "snake_case")]
pub enum BenchRow {
    /// paired bulk transfers, traced against untraced
    Bulk(BulkRow),
    /// short connections, one after the other
    Churn(ChurnRow),
    /// `tcpwin-trace ss` against `ss -tin` over many sockets
    Ss(SsBenchRow),
    /// the exporter over the same sockets
    Exporter(ExporterBenchRow),
    /// two observers attached together on the same hooks, one hook's cost of each
    SamePackets(SamePacketsRow),
}

/// One pair of observers on one hook over the same packets (attached together, both attach
/// orders).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamePacketsRow {
    pub a: String,
    pub b: String,
    pub hook: String,
    /// median over runs of a's and b's ns per hit, per attach order (a first, b first)
    pub a_ns_per_hit: [f64; 2],
    pub b_ns_per_hit: [f64; 2],
    /// median of b / a per run, per order; over both orders their geometric mean (the first
    /// program attached pays for a colder cache: the two orders' biases cancel)
    pub ratio: [f64; 2],
    pub ratio_both: f64,
    /// what b costs more than a per hit: the median per-run difference, per order, averaged
    /// over both orders
    pub b_minus_a_ns: f64,
    /// hits of a and b per run (median): the same packets give the same hits
    pub a_hits: u64,
    pub b_hits: u64,
    /// the program as the kernel runs it (`bytes_xlated`: after the verifier removed what the
    /// load-time constants make unreachable, e.g. the log code of a level off)
    pub a_xlated_bytes: u64,
    pub b_xlated_bytes: u64,
}

/// One BPF program's cost in a bench mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramCost {
    pub hits: u64,
    /// median over runs
    pub ns_per_hit: f64,
    /// median over runs of the same run's floor subtracted (with `--floor-alongside`)
    pub ns_above_floor: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
/// Every figure's key is present in every mode (null where a mode has none).
pub struct BulkRow {
    /// `untraced`, `empty-tp`, `default`, `bpftrace`, ... or `raw` (a mode that does not exist:
    /// every figure null, `note` says why)
    pub mode: String,
    #[serde(deserialize_with = "nullable")]
    pub bpf_ns_per_hit: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub bpf_ms_per_gb: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub bpf_cpu_share: Option<f64>,
    /// median (min, max) of traced / untraced over the paired runs
    #[serde(deserialize_with = "nullable")]
    pub throughput_ratio: Option<f64>,
    #[serde(default)]
    pub throughput_ratio_min: Option<f64>,
    #[serde(default)]
    pub throughput_ratio_max: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub cpu_per_gb_ratio: Option<f64>,
    #[serde(default)]
    pub cpu_per_gb_ratio_min: Option<f64>,
    #[serde(default)]
    pub cpu_per_gb_ratio_max: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub drops: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub events_per_sec: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub changes_seen: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub tracer_cpu_share: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub tracer_rss_bytes: Option<u64>,
    #[serde(default)]
    pub runs: Option<usize>,
    #[serde(default)]
    pub bpf_programs: BTreeMap<String, ProgramCost>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChurnRow {
    pub mode: String,
    /// connections per run (the median run's): whole batches of `--churn` for 3 s or more
    pub conns: u32,
    pub conns_per_sec_ratio: f64,
    pub cpu_per_conn_ratio: f64,
    pub bpf_us_per_conn: Option<f64>,
    pub bpf_cpu_share: Option<f64>,
    pub drops: Option<u64>,
    /// ring buffer records per connection pair (what crossing costs)
    pub events_per_conn: Option<f64>,
    /// facts handed to the trace per connection pair (an `init` merged into another record
    /// counts apart)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_per_conn: Option<f64>,
    pub tracer_cpu_share: Option<f64>,
    pub runs: usize,
    pub bpf_programs: BTreeMap<String, ProgramCost>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SsBenchRow {
    pub sockets: u64,
    /// with the socket iterator a previous command pinned (false: `TCPWIN_TRACE_CACHE=off`,
    /// what every run costs without one)
    #[serde(default)]
    pub cached: bool,
    /// whole command, median
    pub tool_ms: f64,
    pub tool_rss_mib: f64,
    /// one snapshot once loaded
    pub tool_snapshot_ms: f64,
    pub ss_ms: f64,
    pub ss_rss_mib: f64,
    pub runs: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExporterBenchRow {
    pub sockets: u64,
    pub idle_cpu_share: f64,
    pub scrape_ms: f64,
    pub scrape_ms_max: f64,
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
    pub scrapes: usize,
}

/// One end of a transfer as it was read: its socket's readings in time order and its namespace's
/// limits (what the lab records, so a verdict can be judged again from its own facts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedEnd {
    /// `receiver` or `sender`
    pub end: String,
    pub readings: Vec<tcpwin_model::facts::SockFacts>,
    pub host: tcpwin_model::facts::HostLimits,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_lines_are_tagged_by_table() {
        let l = LabLine::AdvWinScale(AdvWinScaleRow {
            tcp_adv_win_scale: -2,
            syn_ack_window: Some(31856),
            window_clamp: None,
        });
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v["table"], "tcp_adv_win_scale");
        assert!(v["window_clamp"].is_null());
        assert_eq!(serde_json::from_value::<LabLine>(v).unwrap(), l);
    }
}

/// The program of an `app` description (see [`WanRow::program`]).
pub fn program_of(app: &str) -> String {
    let first = app.split_whitespace().next().unwrap_or("");
    match first {
        "nginx" => {
            let tls = if app.starts_with("nginx (TLS)") {
                " (TLS)"
            } else {
                ""
            };
            match app.split_once("-> ") {
                Some((_, to)) => {
                    format!(
                        "nginx{tls} -> {}",
                        to.split_whitespace().next().unwrap_or("")
                    )
                }
                None => "nginx".into(),
            }
        }
        "curl" if app.contains(" -T -> nginx (HTTP/2)") => "curl -T -> nginx (HTTP/2)".into(),
        "curl" if app.contains(" -T -> nginx") => "curl -T -> nginx".into(),
        "own" => "own endpoints".into(),
        _ => first.to_string(),
    }
}

#[cfg(test)]
mod program_tests {
    use super::program_of;

    #[test]
    fn programs_from_the_rows_descriptions() {
        for (app, program) in [
            ("own endpoints", "own endpoints"),
            ("iperf3 -w 8K", "iperf3"),
            ("iperf3 -C cubic", "iperf3"),
            ("nginx sndbuf=32k -> curl", "nginx -> curl"),
            ("nginx -> curl --limit-rate 2000k", "nginx -> curl"),
            ("nginx -> wget", "nginx -> wget"),
            ("nginx -> python SO_RCVBUF 262144", "nginx -> python"),
            ("curl -T -> nginx rcvbuf=64k", "curl -T -> nginx"),
            (
                "curl --http2-prior-knowledge -T -> nginx (HTTP/2)",
                "curl -T -> nginx (HTTP/2)",
            ),
            (
                "nginx (TLS) -> curl --limit-rate 2000k",
                "nginx (TLS) -> curl",
            ),
        ] {
            assert_eq!(program_of(app), program, "{app}");
        }
    }
}
