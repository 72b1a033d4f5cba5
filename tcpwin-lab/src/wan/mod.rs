//! The lab's paths and scenarios: sender, path and receiver namespaces, the path delaying every
//! frame rtt/2 each way and limiting the rate towards the receiver (at the sender's own egress,
//! where TCP small queues keep the queue short, or inside the path with a deep queue, as a home
//! router or a cable modem holds one; losing a share of frames at random, as a lossy link); or a
//! plain veth pair (a fast path, RTTs in µs).
//!
//! `--path` measures the path itself. `--scenario` sets up a slow transfer — the articles' (64 KB
//! without window scaling, an SO_RCVBUF capped by rmem_max, autotuning at tcp_rmem's max, GRO's
//! ratio), and the ones real programs show (iperf3 `-w`/`-R`/`-P`, nginx `sndbuf=` and
//! `limit_rate`, curl `--limit-rate`, a lossy link, a route's window metric, a bottleneck with a
//! deep queue) — with each congestion control, reads the connection four ways (one snapshot or
//! an interval; both ends together or each alone) and sets each verdict beside what that way of
//! reading can tell. `--repeat N` runs each N times and prints the accuracy table; any mismatch
//! makes the lab exit non-zero. `--apply-fix` applies each window limit's fix as its JSON gives
//! it, runs the transfer again and holds it to the same path's rate with nothing set.
use crate::rows::RecordedEnd;
use crate::rows::{FixedRun, Round, WanRow, FIX_CLOSES_SHARE};
use crate::{
    harness::{check_stop, Interrupted},
    programs::App,
};
use anyhow::{Context, Result};
use tcpwin_model::{
    units::PathSpec,
    verdict::{Limit, Verdict},
};

use tcpwin_model::facts::Seen;

use crate::readings::Readings;

mod fixloop;
mod reads;
mod run;
mod specs;
mod tally;

pub use tally::{
    accuracy, by_program, checked, counters, fix_loops, outcome, summary, Accuracy, Summary,
};

use specs::{rows, Path, Recv, Spec, BASE, M};

/// The congestion controls every scenario runs with: the namespace default (only these two may
/// be set per namespace here), so real programs use it too.
pub const CCS: [&str; 2] = ["bbr", "reno"];

/// Attempts at a row whose path was late (its delay line fell behind: the RTT, the verdict's
/// base, was not the path's) before it is reported unjudged, or whose transfer gave nothing to
/// judge before its failure is the lab's.
const ATTEMPTS: u32 = 3;

/// A transfer read after it was over (`reads::ended`), or whose sender ran another congestion
/// control than the row's: run again like a late path, as what the readings show is not the
/// row's experiment.
#[derive(Debug)]
struct Over(String);

impl std::fmt::Display for Over {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Over {}

/// What a transfer gave: its row, with the joined interval verdicts of both ends.
struct Judged {
    row: WanRow,
    receiver: Verdict,
    sender: Option<Verdict>,
    /// the receiver read alone over the interval, as on its own host
    alone: Option<Verdict>,
}

/// What stays the same through one row's runs: the tracer to run, the row, its congestion
/// control and which of the `--repeat` runs it is.
#[derive(Clone, Copy)]
struct RowRun<'a> {
    exe: &'a std::path::Path,
    spec: &'a Spec,
    cc: &'a str,
    run_no: u32,
}

/// One transfer on the row's setup, judged (the interval verdicts, both ends read together,
/// are the row's own; the four ways of reading in `reads`).
fn judge_run(r: RowRun, it: &mut dyn Readings, st: &run::Setup) -> Result<Judged> {
    let RowRun {
        exe,
        spec: s,
        cc,
        run_no,
    } = r;
    // a transfer that fails or never ends says what the delay line did meanwhile
    let r = run::transfer(exe, it, s, st, cc).with_context(|| {
        format!(
            "the path's delay line meanwhile: {:?}",
            st.pair.path.as_ref().map(|p| p.totals())
        )
    })?;
    let [first, _, last] = &r.readings;
    let target = st.rate_bps;
    let (rx, tx) = reads::ends(first, last, target).with_context(|| {
        format!(
            "no connection on port {} was read in {} / {}",
            run::PORT,
            st.pair.a,
            st.pair.b
        )
    })?;
    if let Some(why) = reads::ended(&r.readings, r.peer_readings.as_ref(), (rx, tx)) {
        return Err(Over(why).into());
    }
    // a sender not under the row's congestion control is not the row's experiment (once in 590
    // runs a BBR row's sender held snd_ssthresh 136, which BBR never sets)
    let own = s.app.and_then(|a| a.own_congestion());
    if let Some(other) = r
        .sender_ccs
        .iter()
        .find(|c| *c != cc && Some(c.as_str()) != own)
    {
        return Err(Over(format!(
            "the sender's socket ran {other}, not the row's {cc} (ss -ti in {}: {:?})",
            st.pair.a, r.sender_ccs
        ))
        .into());
    }
    let verdicts = reads::judged(first, last, target);
    let v = verdicts[rx].clone();
    let sv = tx.map(|t| verdicts[t].clone());
    let expected = s.expected_with(cc);
    let facts = &last[rx].facts;
    let totals = st
        .pair
        .path
        .as_ref()
        .map(|p| p.totals())
        .unwrap_or_default();
    let app_rate = app_rate(s, st);
    let sender_report = r.sender.as_ref();
    // each end's socket, as the last reading holds it
    let ends: Vec<(&str, &Seen)> = [("receiver", Some(rx)), ("sender", tx)]
        .into_iter()
        .filter_map(|(end, i)| Some((end, &last[i?])))
        .collect();
    let row = WanRow {
        scenario: s.scenario.into(),
        condition: s.condition(),
        app: s
            .app
            .map(|a| a.describe())
            .unwrap_or_else(|| "own endpoints".into()),
        run: run_no,
        queue_ms: st.queue_ms,
        rtt_ms: st.rtt_ms as f64,
        min_rtt_ms: sender_report
            .map(|r| r.min_rtt_us as f64 / 1000.0)
            .or(v.base_rtt_us.map(|b| b as f64 / 1000.0)),
        rate_limit_bps: st.rate_bps,
        mtu: s.mtu,
        gro: s.gro,
        cc: cc.into(),
        window: v.window,
        ceiling_bps: v.ceiling_bps,
        // the slowest of the window (at the base RTT), the bottleneck and the application
        predicted_bps: [
            v.base_ceiling_bps.or(v.ceiling_bps),
            st.rate_bps,
            Some(app_rate),
        ]
        .into_iter()
        .flatten()
        .min()
        .filter(|c| *c != u64::MAX),
        throughput_bps: r.throughput_bps,
        rwnd_limited_share: sender_report
            .and_then(|r| r.busy_us.filter(|b| *b > 0).zip(r.rwnd_limited_us))
            .map(|(b, r)| r as f64 / b as f64)
            .or(sv.as_ref().and_then(|t| t.rwnd_limited_share)),
        snd_wnd: sender_report.and_then(|r| r.steady_snd_wnd),
        verdict: Some(v.limit),
        sender_verdict: sv.as_ref().map(|t| t.limit),
        expected: expected.0,
        also_expected: expected.1,
        rtt_us: v.rtt_us,
        base_rtt_us: v.base_rtt_us,
        queue_us: v.queue_us,
        setting: v.setting.clone(),
        suggested: v.suggested.clone(),
        factors: v.factors.iter().map(|f| f.limit).collect(),
        scaling_ratio: facts.scaling_ratio,
        window_clamp: facts.window_clamp,
        sk_rcvbuf: facts.sk_rcvbuf,
        path_late: totals.late,
        path_max_late_us: totals.max_late_us,
        path_drops: totals.own_drops(),
        path_rx_late: totals.rx_late,
        path_max_rx_wait_us: totals.max_rx_wait_us,
        path_forwarded: totals.forwarded,
        path_added_rtt_us: totals.added_rtt_us,
        path_queue_full_retries: totals.queue_full_retries,
        path_send_retries: totals.send_retries,
        // veth has no delay line: nothing to be late
        path_on_time: st.pair.path.as_ref().is_none_or(|p| totals.on_time(p.rtt)),
        attempt: 1,
        gro_merged: true,
        reads: reads::reads(
            &r.readings,
            r.peer_readings.as_ref(),
            (rx, tx),
            expected,
            target,
            st.pair.path.is_none(),
        ),
        fix: None,
        fixed: None,
        counter: None,
        recorded: recorded(&ends, &r),
        peer_recorded: peer_recorded(&ends, &r),
    };
    Ok(Judged {
        row,
        receiver: v,
        sender: sv,
        alone: reads::alone(first, last, rx, target),
    })
}

/// The rate the application holds the transfer to, where the row sets one (u64::MAX: none).
fn app_rate(s: &Spec, st: &run::Setup) -> u64 {
    match (s.recv, st.app) {
        (Recv::SlowReader { bps }, None) => bps,
        (
            _,
            Some(App::Nginx {
                limit_rate: Some(r),
                ..
            }),
        ) => r,
        (
            _,
            Some(App::Nginx {
                server_rate: Some(r),
                ..
            }),
        ) => r,
        (
            _,
            Some(
                App::PyServe {
                    limit_rate: Some(r),
                }
                | App::Https {
                    limit_rate: Some(r),
                },
            ),
        ) => r,
        _ => u64::MAX,
    }
}

/// Each end's readings of the transfer, as the end's own host holds them.
fn recorded(ends: &[(&str, &Seen)], r: &run::Run) -> Vec<RecordedEnd> {
    ends.iter()
        .filter_map(|(end, me)| {
            let cookie = me.facts.id.cookie;
            recorded_end(
                end,
                r.readings
                    .iter()
                    .filter_map(|rd| rd.iter().find(|x| x.facts.id.cookie == cookie)),
            )
        })
        .collect()
}

/// Each end's peer readings over the network: the other end's socket, as its host's exporter
/// gave it.
fn peer_recorded(ends: &[(&str, &Seen)], r: &run::Run) -> Vec<RecordedEnd> {
    ends.iter()
        .filter_map(|(end, me)| {
            let want = tcpwin_model::id::other_end(&me.facts.id);
            recorded_end(
                end,
                r.peer_readings.as_ref()?.iter().filter_map(|p| {
                    let (_, seen) = p.iter().find(|(ns, _)| *ns == me.line_ns)?;
                    seen.iter().find(|x| x.facts.id.tuple() == want)
                }),
            )
        })
        .collect()
}

/// One end's readings in time order (those it was found in), with its namespace's limits as the
/// last of them gives them; None when it was found in none.
fn recorded_end<'a>(end: &str, seen: impl Iterator<Item = &'a Seen>) -> Option<RecordedEnd> {
    let seen: Vec<&Seen> = seen.collect();
    Some(RecordedEnd {
        end: end.into(),
        host: (*seen.last()?.host).clone(),
        readings: seen.iter().map(|x| x.facts.clone()).collect(),
    })
}

/// Every row's ways of reading judged again from its recorded readings (see
/// `reads::rejudge`), its both-ends verdicts with them; how many rows were.
pub(crate) fn rejudge(rows: &mut [crate::rows::WanRow]) -> usize {
    let mut n = 0;
    for row in rows.iter_mut() {
        let Some(again) = reads::rejudge(row) else {
            continue;
        };
        let both = |end: &str| {
            again
                .iter()
                .find(|r| {
                    r.read == crate::rows::Read::Interval
                        && r.view == crate::rows::View::Both
                        && r.end == end
                })
                .and_then(|r| r.verdict)
        };
        row.verdict = both("receiver");
        row.sender_verdict = both("sender");
        row.reads = again;
        n += 1;
    }
    n
}

/// A window limit's fix to apply: the one the joined verdict carries (a receiver's cap from the
/// receiving end, the send buffer from the sending end), or a setting of the peer's host as the
/// receiver read alone gives it.
fn fix_of(j: &Judged) -> Option<tcpwin_model::verdict::Fix> {
    // a setting of the peer's host, as the receiver read alone prints it: its command pasted on
    // the peer, as an operator with one end in view would
    if let Some(f) = j
        .alone
        .as_ref()
        .filter(|a| a.limit == j.receiver.limit)
        .and_then(|a| a.fix.clone())
        .filter(|f| f.on_peer.is_some())
    {
        return Some(f);
    }
    let v = if matches!(j.receiver.limit, Limit::Sndbuf | Limit::Pacing) {
        j.sender.as_ref()?
    } else {
        &j.receiver
    };
    fixable(v.limit).then(|| v.fix.clone()).flatten()
}

/// A limit whose fix the lab applies: a window's, the send buffer's, a sender's pacing cap.
fn fixable(l: Limit) -> bool {
    l.is_window() || matches!(l, Limit::Sndbuf | Limit::Pacing)
}

/// Whether a verdict still names a window (or a buffer, or a pacing cap) after its fix.
fn still_limited(l: Option<Limit>) -> bool {
    l.is_some_and(fixable)
}

/// Both ends' buffer maxima in a counter-proof: 16 MiB, four times this host's defaults.
const COUNTER_BUFFERS: u64 = 16 << 20;

/// A row whose expected verdict prints no TCP fix (the sending application, its own pacing
/// cap), on the namespace's default buffers: its counter-proof raises them.
fn counter_proves(s: &Spec, cc: &str) -> bool {
    s.recv == Recv::Auto
        && s.wmem_max.is_none()
        && matches!(s.expected_with(cc).0, Limit::AppLimited | Limit::Pacing)
}

/// The counter-proof: the row's transfer again with the sender's tcp_wmem max and the
/// receiver's tcp_rmem max at [`COUNTER_BUFFERS`], its rate held to the row's own (`rate`); where
/// it passes that, to the row's transfer run once more as it was, the faster of the two (a first
/// run the machine slowed is not a buffer's lift: run-to-run spread on the delay line is a few
/// percent, a buffer that bound lifts the rate by far more).
fn counter(
    r: RowRun,
    it: &mut dyn Readings,
    n: &mut usize,
    rate: Option<u64>,
) -> Result<crate::rows::CounterRun> {
    let holds = |after: Option<u64>, rate: Option<u64>| {
        after
            .zip(rate)
            .is_some_and(|(a, b)| (a as f64) < crate::rows::COUNTER_HOLDS * b as f64)
    };
    let mut run = |spec: &Spec| -> Result<Option<u64>> {
        let st = run::setup(spec, r.cc, *n, None)?;
        *n += 1;
        Ok(on_time_run(RowRun { spec, ..r }, it, &st)?
            .row
            .throughput_bps)
    };
    let spec = Spec {
        wmem_max: Some(COUNTER_BUFFERS),
        recv: Recv::RmemMax(COUNTER_BUFFERS),
        ..*r.spec
    };
    let after = run(&spec)?;
    let again = if holds(after, rate) {
        None
    } else {
        check_stop()?;
        run(r.spec)?
    };
    Ok(crate::rows::CounterRun {
        applied: vec![
            format!("the sender's net.ipv4.tcp_wmem max {COUNTER_BUFFERS}"),
            format!("the receiver's net.ipv4.tcp_rmem max {COUNTER_BUFFERS}"),
        ],
        throughput_bps: after,
        again_bps: again,
        held: holds(after, rate.max(again)),
    })
}

/// A transfer on a set-up path, run again (up to `ATTEMPTS`) while its delay line is late.
fn on_time_run(r: RowRun, it: &mut dyn Readings, st: &run::Setup) -> Result<Judged> {
    let mut attempt = 1;
    loop {
        let j = match judge_run(r, it, st) {
            Err(e) if attempt < ATTEMPTS && e.downcast_ref::<Over>().is_some() => {
                eprintln!("lab: {e}: running the transfer again");
                attempt += 1;
                check_stop()?;
                continue;
            }
            j => j?,
        };
        if j.row.path_on_time || attempt == ATTEMPTS {
            return Ok(j);
        }
        attempt += 1;
        check_stop()?;
    }
}

/// What the scenarios ask for: which, the quick subset, how many runs, which congestion
/// controls, and whether each window limit's fix is applied and the transfer run again.
pub struct Plan<'a> {
    pub scenario: &'a str,
    pub quick: bool,
    pub repeat: u32,
    /// empty: every row with bbr and reno, or with `quick` each row with its own
    pub ccs: Vec<String>,
    pub apply_fix: bool,
    /// with `apply_fix`, run the same path with nothing set to hold the repaired rate to
    pub baseline: bool,
}

impl Plan<'_> {
    /// The congestion controls row `s` runs with.
    fn ccs_of(&self, s: &Spec) -> Vec<String> {
        match (self.ccs.is_empty(), self.quick.then_some(s.quick).flatten()) {
            (false, _) => self.ccs.clone(),
            (true, Some(cc)) => vec![cc.to_string()],
            (true, None) => CCS.iter().map(|c| c.to_string()).collect(),
        }
    }
}

/// The rows of one scenario run: the row (its path late: run again, up to `ATTEMPTS`), and with
/// `--apply-fix` its fix applied and the transfer run again beside the same path's baseline.
fn one_row(r: RowRun, it: &mut dyn Readings, n: &mut usize, plan: &Plan) -> Result<WanRow> {
    let RowRun {
        exe, spec: s, cc, ..
    } = r;
    let mut attempt = 1;
    let (mut j, mut st) = loop {
        // each end's peer over the network: the fifth way of reading
        let st = run::setup(s, cc, *n, Some((exe, &*it)))?;
        *n += 1;
        let mut j = match judge_run(r, it, &st) {
            Ok(j) => j,
            // a transfer that gave nothing to judge (a program that failed to start or to
            // connect, a connection closed before the readings) is run again like a late path;
            // the last attempt's failure is the row's
            Err(e) if attempt < ATTEMPTS && e.downcast_ref::<Interrupted>().is_none() => {
                eprintln!("lab: {e:#}: running the row again");
                attempt += 1;
                check_stop()?;
                continue;
            }
            Err(e) => return Err(e),
        };
        j.row.attempt = attempt;
        j.row.gro_merged = !s.shows_gro || merged(j.row.scaling_ratio);
        if (j.row.path_on_time && j.row.gro_merged) || attempt == ATTEMPTS {
            break (j, st);
        }
        if !j.row.path_on_time {
            eprintln!(
                "lab: the path was late (the delay line added {} us to a round trip on average; of {} frames, {} left more than 1 ms late and {} waited more than 1 ms to be read; a frame can be both): running the row again",
                j.row.path_added_rtt_us,
                j.row.path_forwarded,
                j.row.path_late,
                j.row.path_rx_late
            );
        } else {
            eprintln!(
                "lab: GRO is on and the receiver's veth merged nothing (ratio {}, one segment per packet: its NAPI thread polled each frame alone): running the row again",
                j.row.scaling_ratio.map(|r| r.to_string()).unwrap_or("-".into())
            );
        }
        attempt += 1;
        check_stop()?;
    };
    // a path without a bottleneck (veth) has no rate a fix could be sized for and reached
    let fix = fix_of(&j).filter(|_| plan.apply_fix && st.rate_bps.is_some());
    // no fix printed where a sender holds itself: the buffers raised anyway do not move it
    if fix.is_none() && plan.apply_fix && st.rate_bps.is_some() && counter_proves(s, cc) {
        drop(st);
        j.row.counter = Some(counter(r, it, n, j.row.throughput_bps)?);
        return Ok(j.row);
    }
    if let Some(fix) = fix {
        // where two limits hold at once (`then`), a second round applies the fix the transfer
        // names after the first: one per end
        let mut earlier: Vec<Round> = Vec::new();
        let mut this = fix.clone();
        let (after, applied, gro_merged) = loop {
            check_stop()?;
            let applied = fixloop::apply(&this, &mut st)?;
            let (after, gro_merged) = fixed_run(r, it, &st, &this, j.row.scaling_ratio)?;
            let next = s
                .then
                .filter(|_| earlier.is_empty() && still_limited(after.row.verdict))
                .and_then(|_| fix_of(&after));
            match next {
                Some(f) => {
                    earlier.push(Round {
                        applied,
                        throughput_bps: after.row.throughput_bps,
                        verdict: after.row.verdict,
                        sender_verdict: after.row.sender_verdict,
                        named_next: after.row.verdict == s.then,
                        reads: after.row.reads,
                        recorded: after.row.recorded,
                    });
                    this = f;
                }
                None => break (after, applied, gro_merged),
            }
        };
        drop(st);
        check_stop()?;
        // the same path with nothing set (its rate, and whether its delay line kept time)
        let b = if plan.baseline {
            let base = s.baseline();
            let bst = run::setup(&base, cc, *n, None)?;
            *n += 1;
            let b = on_time_run(RowRun { spec: &base, ..r }, it, &bst)?;
            Some((b.row.throughput_bps, b.row.path_on_time))
        } else {
            None
        };
        let (rate, baseline) = (after.row.throughput_bps, b.and_then(|b| b.0));
        let closed = rate
            .zip(baseline)
            .is_some_and(|(r, b)| r as f64 >= FIX_CLOSES_SHARE * b as f64)
            && !still_limited(after.row.verdict)
            && !still_limited(after.row.sender_verdict)
            // every way of reading it clears too: each end alone, one snapshot
            && after.row.reads.iter().all(|r| !still_limited(r.verdict))
            // a second limit named as the scenario set it up, before its round
            && earlier.iter().all(|r| r.named_next);
        j.row.fix = Some(fix);
        j.row.fixed = Some(FixedRun {
            applied,
            throughput_bps: rate,
            baseline_bps: baseline,
            verdict: after.row.verdict,
            sender_verdict: after.row.sender_verdict,
            window: after.row.window,
            scaling_ratio: after.row.scaling_ratio,
            window_clamp: after.row.window_clamp,
            reads: after.row.reads,
            closed,
            baseline_run: b.is_some(),
            on_time: after.row.path_on_time && b.is_none_or(|b| b.1),
            gro_merged,
            earlier,
            recorded: after.row.recorded,
        });
    }
    Ok(j.row)
}

/// A transfer run again after `fix` was applied, with whether the receiver's veth merged
/// segments. The lab's veth merges only when its NAPI thread finds frames waiting together; on a
/// busy machine it can poll each alone, and a receiver with nothing merged holds a window of
/// one segment per truesize (ratio 158 at MTU 1500), growing it slowly: a fix that does not
/// touch GRO then meets another experiment than the one it was printed for (py-serve's
/// tcp_wmem fix, reno, once in 590 runs: 80 KB of window at 2 s, 294 Mbit/s where the other
/// nine fixed runs merged and moved 478). Run again while the ratio shows nothing merged where
/// the transfer before the fix merged, or where the fix turns GRO on; then say so rather than
/// judge the fix on it.
fn fixed_run(
    r: RowRun,
    it: &mut dyn Readings,
    st: &run::Setup,
    fix: &tcpwin_model::verdict::Fix,
    ratio_before: Option<u8>,
) -> Result<(Judged, bool)> {
    let turns_gro_on = fix.commands.iter().any(|c| c.contains(" gro on"));
    let merges = turns_gro_on || (r.spec.gro && ratio_before.is_some_and(|b| merged(Some(b))));
    let mut after = on_time_run(r, it, st)?;
    let mut attempt = 1;
    while merges && !merged(after.row.scaling_ratio) && attempt < ATTEMPTS {
        eprintln!(
            "lab: GRO is on and the receiver's veth merged nothing after the fix (ratio {}, one segment per packet: its NAPI thread polled each frame alone): running the fixed transfer again",
            after.row.scaling_ratio.map(|r| r.to_string()).unwrap_or("-".into())
        );
        attempt += 1;
        check_stop()?;
        after = on_time_run(r, it, st)?;
    }
    let gro_merged = !merges || merged(after.row.scaling_ratio);
    Ok((after, gro_merged))
}

/// Whether GRO merged anything in a run with GRO on, from the receiver's ratio alone: one segment
/// per packet stays under `LOW_RATIO` at MTU 1500 (158-162), any merge lifts it over (193).
fn merged(ratio: Option<u8>) -> bool {
    ratio.is_none_or(|r| r >= tcpwin_model::verdict::LOW_RATIO)
}

/// `--scenario`: every row asked, with every congestion control, `repeat` times; each row is
/// handed to `each` as it completes.
pub fn scenarios(
    exe: &std::path::Path,
    it: &mut dyn Readings,
    plan: &Plan,
    each: &mut dyn FnMut(&WanRow) -> Result<()>,
) -> Result<Vec<WanRow>> {
    let specs = rows(plan.scenario, plan.quick)?;
    let mut out = Vec::new();
    let mut n = 0;
    for run_no in 1..=plan.repeat {
        for s in &specs {
            for cc in &plan.ccs_of(s) {
                check_stop()?;
                eprintln!(
                    "lab: run {run_no}/{}: {} {}, {}, {}: {} ({cc})",
                    plan.repeat,
                    s.scenario,
                    match s.path {
                        Path::Veth => "veth".to_string(),
                        Path::Wan {
                            rtt_ms,
                            rate_bps,
                            queue_ms,
                        } => format!(
                            "rtt {rtt_ms} ms, {} Mbit/s{}",
                            rate_bps / M,
                            queue_ms
                                .map(|q| format!(", {q} ms queue"))
                                .unwrap_or_default()
                        ),
                    },
                    format_args!("MTU {} GRO {}", s.mtu, if s.gro { "on" } else { "off" }),
                    s.app
                        .map(|a| a.describe())
                        .unwrap_or_else(|| "own endpoints".into()),
                    s.recv.describe()
                );
                let run = RowRun {
                    exe,
                    spec: s,
                    cc,
                    run_no,
                };
                let row = one_row(run, it, &mut n, plan)
                    .with_context(|| format!("row {s:?} with {cc}"))?;
                each(&row)?;
                out.push(row);
            }
        }
    }
    Ok(out)
}

/// `--path`: the path alone, measured with ample windows.
pub fn path(exe: &std::path::Path, it: &mut dyn Readings, p: PathSpec) -> Result<WanRow> {
    // without a rate the path is as fast as the delay line holds
    let rate = p.rate_bps.unwrap_or(crate::pair::WAN_MAX_RATE);
    let s = Spec {
        scenario: "path",
        path: Path::Wan {
            rtt_ms: p.rtt.as_millis() as u64,
            rate_bps: rate,
            queue_ms: None,
        },
        ..BASE
    };
    let plan = Plan {
        scenario: s.scenario,
        quick: false,
        repeat: 1,
        ccs: vec![],
        apply_fix: false,
        baseline: false,
    };
    let run = RowRun {
        exe,
        spec: &s,
        cc: "reno",
        run_no: 1,
    };
    one_row(run, it, &mut 0, &plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names() {
        let all = rows("all", false).unwrap();
        assert_eq!(all.len(), 59);
        // two limits at once: one at each end, each fixed in a round of its own
        let two: Vec<&Spec> = all.iter().filter(|s| s.then.is_some()).collect();
        assert_eq!(two.len(), 2);
        for s in two {
            let ends = [s.expected, s.then.unwrap()].map(|l| l == Limit::Sndbuf);
            assert!(ends[0] != ends[1], "{s:?}");
            assert!(s.wmem_max.is_some() && s.recv != Recv::Auto, "{s:?}");
        }
        // the gate's rows: one per family (a limit, or a cause of one no other row shows: the
        // application's clamp before the handshake), each with a congestion control the lab
        // can set
        let quick = rows("all", true).unwrap();
        assert_eq!(quick.len(), 13);
        let families: std::collections::BTreeSet<(Limit, &str)> = quick
            .iter()
            .map(|s| {
                (
                    s.expected,
                    if s.scenario == "app-before-handshake" {
                        s.scenario
                    } else {
                        ""
                    },
                )
            })
            .collect();
        assert_eq!(families.len(), quick.len());
        assert!(quick
            .iter()
            .all(|s| s.quick.is_some_and(|c| CCS.contains(&c))));
        let plan = |ccs: &[&str]| Plan {
            scenario: "all",
            quick: true,
            repeat: 1,
            ccs: ccs.iter().map(|c| c.to_string()).collect(),
            apply_fix: false,
            baseline: true,
        };
        let loss = quick.iter().find(|s| s.scenario == "loss").unwrap();
        assert_eq!(plan(&[]).ccs_of(loss), ["reno"]);
        assert_eq!(plan(&["bbr"]).ccs_of(loss), ["bbr"]);
        let full = Plan {
            quick: false,
            ..plan(&[])
        };
        assert_eq!(full.ccs_of(loss), CCS);
        assert_eq!(rows("gro", false).unwrap().len(), 3);
        let e = rows("nope", false).unwrap_err().to_string();
        assert!(e.contains("wscale-off") && e.contains("all"), "{e}");
        // every limit a verdict can name on a connection judged from both ends has a scenario
        // (taken from Limit::ALL, so a new limit needs one); not: memory pressure (host-wide),
        // peer-window (a sender alone), idle and unknown
        for l in Limit::ALL.iter().copied().filter(|l| {
            !matches!(
                l,
                Limit::MemoryPressure | Limit::PeerWindow | Limit::Idle | Limit::Unknown
            )
        }) {
            assert!(all.iter().any(|s| s.expected == l), "no scenario shows {l}");
        }
    }

    /// Whether GRO merged anything on the lab's veth, from the ratio after the fix.
    #[test]
    fn a_ratio_one_segment_per_packet_gives_is_no_merge() {
        // one segment per packet moves between 158 and 162: not a merge
        assert!(!merged(Some(158)));
        assert!(!merged(Some(162)));
        assert!(merged(Some(193)));
        assert!(merged(None), "nothing to compare: judged");
    }
}
