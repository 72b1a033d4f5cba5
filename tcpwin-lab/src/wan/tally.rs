//! How the lab's rows add up: per scenario, congestion control, way of reading and end, how many
//! verdicts named the limit the row set up, the fix loops closed, the rows not judged and why, the
//! judge's own check over every reading; and whether the lab passes. Pure over the rows.
use std::collections::BTreeMap;

use crate::rows::{Read, View, WanRow};
use anyhow::{bail, Result};
use tcpwin_model::verdict::Limit;

/// One line of the accuracy table: a scenario's row with one congestion control, one way of
/// reading, one end.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AccuracyKey {
    pub scenario: String,
    pub setup: String,
    pub cc: String,
    pub read: Read,
    pub view: View,
    pub end: String,
    pub expected: Limit,
    pub also: Option<Limit>,
}

/// One key's runs: how many named the scenario's limit, of how many judged, the verdicts got,
/// and each run's measured / predicted throughput (a property of the path and this machine,
/// stated as a spread, never a pass or fail); rows not judged because their path was late.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub ok: u32,
    pub n: u32,
    pub got: BTreeMap<Limit, u32>,
    pub throughput_ratios: Vec<f64>,
    pub unjudged: u32,
}

impl Tally {
    /// The median and the worst (farthest from 1) of measured / predicted.
    pub fn spread(&self) -> Option<(f64, f64)> {
        let mut v = self.throughput_ratios.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        let worst = v
            .iter()
            .copied()
            .max_by(|a, b| (a - 1.0).abs().total_cmp(&(b - 1.0).abs()))?;
        Some((median, worst))
    }
}

pub type Accuracy = BTreeMap<AccuracyKey, Tally>;

/// A row's verdicts by way of reading: its `reads`, or (a row without them) the joined interval
/// verdicts of both ends.
fn reads_of(r: &WanRow) -> Vec<(Read, View, String, Option<Limit>, bool)> {
    if !r.reads.is_empty() {
        return r
            .reads
            .iter()
            .map(|x| (x.read, x.view, x.end.clone(), x.verdict, x.accepted))
            .collect();
    }
    [("receiver", r.verdict), ("sender", r.sender_verdict)]
        .into_iter()
        .map(|(e, got)| {
            (
                Read::Interval,
                View::Both,
                e.to_string(),
                got,
                r.accepts(got),
            )
        })
        .collect()
}

/// Expected against got, per scenario row x congestion control x way of reading x end; rows
/// whose path was late are counted apart, not judged.
pub fn accuracy(rows: &[WanRow]) -> Accuracy {
    let mut t: Accuracy = BTreeMap::new();
    for r in rows {
        for (read, view, end, got, ok) in reads_of(r) {
            let key = AccuracyKey {
                scenario: r.scenario.clone(),
                setup: r.setup(),
                cc: r.cc.clone(),
                read,
                view,
                end,
                expected: r.expected,
                also: r.also_expected,
            };
            let e = t.entry(key).or_default();
            if !r.path_on_time {
                e.unjudged += 1;
                continue;
            }
            e.n += 1;
            if ok {
                e.ok += 1;
            }
            *e.got.entry(got.unwrap_or(Limit::Unknown)).or_default() += 1;
            if let (Read::Interval, View::Both, Some(m), Some(p)) = (
                read,
                view,
                r.throughput_bps,
                r.predicted_bps.filter(|p| *p > 0),
            ) {
                e.throughput_ratios.push(m as f64 / p as f64);
            }
        }
    }
    t
}

/// One scenario row over every run, both congestion controls and both ends: verdicts right per
/// way of reading (snapshot both, snapshot alone, interval both, interval alone), fixes that
/// closed the loop, and what each congestion control expected.
#[derive(Default, Debug, PartialEq)]
pub struct Summary {
    /// (right, judged) per way of reading, in `READS` order
    pub reads: [(u32, u32); 6],
    /// (closed, applied and judged)
    pub fixes: (u32, u32),
    /// the verdicts accepted with both ends read together, per congestion control
    pub expected: BTreeMap<String, String>,
    /// runs whose path was late: not judged
    pub unjudged: u32,
    /// fixes applied but not judged, per reason (see `FixedRun::unjudged_because`)
    pub fixes_unjudged: BTreeMap<&'static str, u32>,
}

/// The ways of reading, in the summary's column order: one snapshot and an interval, each with
/// both ends together, each end alone, and each end with its peer over the network.
pub const READS: [(Read, View); 6] = [
    (Read::Snapshot, View::Both),
    (Read::Snapshot, View::Alone),
    (Read::Snapshot, View::Peer),
    (Read::Interval, View::Both),
    (Read::Interval, View::Alone),
    (Read::Interval, View::Peer),
];

/// Every scenario row summarised (see `Summary`), keyed by (scenario, setup: see `WanRow::setup`).
pub fn summary(rows: &[WanRow]) -> BTreeMap<(String, String), Summary> {
    let mut t: BTreeMap<(String, String), Summary> = BTreeMap::new();
    for r in rows {
        let e = t.entry((r.scenario.clone(), r.setup())).or_default();
        e.expected
            .entry(r.cc.clone())
            .or_insert_with(|| match r.also_expected {
                Some(a) => format!("{}|{}", r.expected.id(), a.id()),
                None => r.expected.id().to_string(),
            });
        if !r.path_on_time {
            e.unjudged += 1;
            continue;
        }
        for (read, view, _, _, ok) in reads_of(r) {
            if let Some(i) = READS.iter().position(|x| *x == (read, view)) {
                e.reads[i].1 += 1;
                e.reads[i].0 += ok as u32;
            }
        }
        if let Some(f) = r.fixed.as_ref() {
            match f.unjudged_because() {
                None => {
                    e.fixes.1 += 1;
                    e.fixes.0 += f.closed as u32;
                }
                Some(why) => *e.fixes_unjudged.entry(why).or_default() += 1,
            }
        }
    }
    t
}

/// The summary per program that drove the traffic (`own endpoints`, `iperf3`, `nginx -> curl`,
/// ...): every row it ran, both congestion controls, every way of reading.
pub fn by_program(rows: &[WanRow]) -> BTreeMap<String, Summary> {
    let mut t: BTreeMap<String, Summary> = BTreeMap::new();
    for ((_, setup), x) in summary(rows) {
        let program = rows
            .iter()
            .find(|r| r.setup() == setup)
            .map(|r| r.program())
            .unwrap_or_default();
        let e = t.entry(program).or_default();
        for (a, b) in e.reads.iter_mut().zip(x.reads) {
            a.0 += b.0;
            a.1 += b.1;
        }
        e.fixes.0 += x.fixes.0;
        e.fixes.1 += x.fixes.1;
        e.unjudged += x.unjudged;
        for (k, v) in x.fixes_unjudged {
            *e.fixes_unjudged.entry(k).or_default() += v;
        }
    }
    t
}

/// The fix loop per scenario row and congestion control: (fixes that closed the loop, fixes
/// applied and judged: see `FixedRun::judged`).
pub fn fix_loops(rows: &[WanRow]) -> BTreeMap<(String, String, String), (u32, u32)> {
    let mut t: BTreeMap<(String, String, String), (u32, u32)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.path_on_time) {
        if let Some(f) = r.fixed.as_ref().filter(|f| f.judged()) {
            let e = t
                .entry((r.scenario.clone(), r.setup(), r.cc.clone()))
                .or_default();
            e.1 += 1;
            if f.closed {
                e.0 += 1;
            }
        }
    }
    t
}

/// The lab's outcome: an error naming how many verdicts differ from their scenario's, or how
/// many fixes did not repair their transfer (the lab exits 1), or Ok.
pub fn outcome(t: &Accuracy, rows: &[WanRow]) -> Result<()> {
    let (checked, refused) = checked(rows);
    if !refused.is_empty() {
        bail!(
            "the judge's own check refused {} of {checked} verdicts (a why, fix and facts that disagree): {}",
            refused.len(),
            refused.join("; ")
        );
    }
    let missed: u32 = t.values().map(|x| x.n - x.ok).sum();
    let all: u32 = t.values().map(|x| x.n).sum();
    if missed > 0 {
        bail!(
            "{missed} of {all} verdicts differ from the limit their scenario sets up (marked (!))"
        );
    }
    let loops = fix_loops(rows);
    let open: u32 = loops.values().map(|(ok, n)| n - ok).sum();
    if open > 0 {
        bail!(
            "{open} of {} fixes did not repair their transfer",
            loops.values().map(|(_, n)| n).sum::<u32>()
        );
    }
    let (held, n) = counters(rows);
    if held < n {
        bail!(
            "{} of {n} counter-proofs did not hold: raising both buffers lifted a rate whose verdict printed no fix",
            n - held
        );
    }
    Ok(())
}

/// The counter-proofs (see `WanRow::counter`) of the rows judged: (held, run).
pub fn counters(rows: &[WanRow]) -> (u32, u32) {
    rows.iter()
        .filter(|r| r.path_on_time)
        .filter_map(|r| r.counter.as_ref())
        .fold((0, 0), |(h, n), c| (h + u32::from(c.held), n + 1))
}

/// Every verdict the lab read (each way of reading, before and after a fix): how many, and what
/// the judge's own check refused in them, each with its row.
pub fn checked(rows: &[WanRow]) -> (u32, Vec<String>) {
    let mut n = 0;
    let mut refused = Vec::new();
    for r in rows {
        let after = r
            .fixed
            .iter()
            .flat_map(|f| f.earlier.iter().flat_map(|e| &e.reads).chain(&f.reads));
        for x in r.reads.iter().chain(after) {
            n += 1;
            refused.extend(x.refused.iter().map(|why| {
                format!(
                    "{} {} ({}), {} {:?} {:?}: {why}",
                    r.scenario,
                    r.setup(),
                    r.cc,
                    x.end,
                    x.read,
                    x.view
                )
            }));
        }
    }
    (n, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::FixedRun;

    fn row(expected: Limit, got: Limit, cc: &str) -> WanRow {
        WanRow {
            scenario: "s".into(),
            condition: "c".into(),
            app: "a".into(),
            run: 1,
            queue_ms: None,
            rtt_ms: 20.0,
            min_rtt_ms: None,
            rate_limit_bps: None,
            mtu: 1500,
            gro: true,
            cc: cc.into(),
            window: None,
            ceiling_bps: None,
            predicted_bps: None,
            throughput_bps: None,
            rwnd_limited_share: None,
            snd_wnd: None,
            verdict: Some(got),
            sender_verdict: Some(expected),
            expected,
            also_expected: None,
            rtt_us: None,
            base_rtt_us: None,
            queue_us: None,
            setting: None,
            suggested: None,
            factors: Vec::new(),
            scaling_ratio: None,
            window_clamp: None,
            sk_rcvbuf: None,
            path_late: 0,
            path_max_late_us: 0,
            path_drops: 0,
            path_rx_late: 0,
            path_max_rx_wait_us: 0,
            path_forwarded: 0,
            path_added_rtt_us: 0,
            path_queue_full_retries: 0,
            path_send_retries: 0,
            path_on_time: true,
            attempt: 1,
            gro_merged: true,
            reads: Vec::new(),
            fix: None,
            counter: None,
            fixed: None,
            recorded: Vec::new(),
            peer_recorded: Vec::new(),
        }
    }

    #[test]
    fn accuracy_counts_per_congestion_control_and_end() {
        let rows = vec![
            row(Limit::Sndbuf, Limit::Sndbuf, "bbr"),
            row(Limit::Sndbuf, Limit::NotWindowLimited, "bbr"),
            row(Limit::Sndbuf, Limit::Sndbuf, "reno"),
        ];
        let t = accuracy(&rows);
        let bbr_rx = t
            .iter()
            .find(|(k, _)| k.cc == "bbr" && k.end == "receiver")
            .unwrap()
            .1;
        assert_eq!((bbr_rx.ok, bbr_rx.n), (1, 2));
        let bbr_tx = t
            .iter()
            .find(|(k, _)| k.cc == "bbr" && k.end == "sender")
            .unwrap()
            .1;
        assert_eq!((bbr_tx.ok, bbr_tx.n), (2, 2));
        assert_eq!(t.len(), 4);
        // one mismatch: the lab fails, saying how many
        let e = outcome(&t, &rows).unwrap_err().to_string();
        assert!(e.starts_with("1 of 6 verdicts differ"), "{e}");
        assert!(outcome(&accuracy(&rows[2..]), &rows[2..]).is_ok());
        // a fix that did not repair its transfer fails the lab too
        let mut open = rows[2].clone();
        open.fixed = Some(FixedRun {
            applied: vec!["sysctl -w net.core.rmem_max=1".into()],
            throughput_bps: Some(10),
            baseline_bps: Some(100),
            verdict: Some(Limit::RcvbufLocked),
            sender_verdict: None,
            window: None,
            scaling_ratio: None,
            window_clamp: None,
            reads: vec![],
            closed: false,
            baseline_run: true,
            on_time: true,
            gro_merged: true,
            earlier: vec![],
            recorded: vec![],
        });
        // the summary: one line per scenario row, both congestion controls and ends merged
        let t = summary(&[rows[0].clone(), rows[1].clone(), open.clone()]);
        assert_eq!(t.len(), 1);
        let x = t.values().next().unwrap();
        // (interval, both): 2 + 1 + 2 right of 6
        assert_eq!(x.reads[3], (5, 6));
        assert_eq!(x.reads[0], (0, 0), "no snapshot reads in these rows");
        assert_eq!(x.fixes, (0, 1));
        assert_eq!(x.expected.len(), 2);
        // the same scenario with GRO off, or on another path, is a row of its own
        let mut gro_off = rows[0].clone();
        gro_off.gro = false;
        let mut slower = rows[0].clone();
        slower.rate_limit_bps = Some(40_000_000);
        let t = summary(&[rows[0].clone(), gro_off.clone(), slower.clone()]);
        assert_eq!(t.len(), 3, "{:?}", t.keys().collect::<Vec<_>>());
        assert!(t.keys().any(|(_, s)| s.ends_with("; GRO off")));
        // and so in the accuracy table and the fix loops, keyed the same way
        let t = accuracy(&[rows[0].clone(), gro_off.clone(), slower.clone()]);
        assert_eq!(t.keys().filter(|k| k.end == "receiver").count(), 3);
        let mut fixed = [rows[0].clone(), gro_off, slower];
        for r in fixed.iter_mut() {
            r.fixed = open.fixed.clone();
        }
        assert_eq!(fix_loops(&fixed).len(), 3);
        let e = outcome(&accuracy(std::slice::from_ref(&open)), &[open])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("1 of 1 fixes did not repair"), "{e}");
    }

    /// A GRO fix run on which the lab's veth merged nothing (the ratio as before) is not
    /// judged, and the summary says so; one that merged, or closed anyway, is.
    #[test]
    fn a_gro_fix_on_a_veth_that_merged_nothing_is_said_not_judged() {
        let mut r = row(Limit::LowRatio, Limit::LowRatio, "bbr");
        let f = FixedRun {
            applied: vec!["ethtool -K veth-b gro on".into()],
            throughput_bps: Some(80),
            baseline_bps: Some(100),
            verdict: Some(Limit::LowRatio),
            sender_verdict: None,
            window: None,
            scaling_ratio: Some(158),
            window_clamp: None,
            reads: vec![],
            closed: false,
            baseline_run: true,
            on_time: true,
            gro_merged: false,
            earlier: vec![],
            recorded: vec![],
        };
        assert!(!f.judged());
        assert_eq!(
            f.unjudged_because(),
            Some("GRO on, the lab's veth merged nothing")
        );
        r.fixed = Some(f.clone());
        let t = summary(std::slice::from_ref(&r));
        let x = t.values().next().unwrap();
        assert_eq!(x.fixes, (0, 0));
        assert_eq!(
            x.fixes_unjudged
                .get("GRO on, the lab's veth merged nothing"),
            Some(&1)
        );
        assert!(outcome(&accuracy(std::slice::from_ref(&r)), &[r.clone()]).is_ok());
        // a closed loop is closed however the veth merged; a late path is said as such
        let closed = FixedRun {
            closed: true,
            ..f.clone()
        };
        assert!(closed.judged() && closed.unjudged_because().is_none());
        let late = FixedRun {
            on_time: false,
            gro_merged: true,
            ..f
        };
        assert_eq!(late.unjudged_because(), Some("path late"));
        // without a baseline run (the gate's `--no-baseline`) no loop is judged, closed or not,
        // and the lab does not fail on it
        let unmeasured = FixedRun {
            baseline_run: false,
            baseline_bps: None,
            gro_merged: true,
            ..late
        };
        assert!(!unmeasured.judged());
        assert_eq!(unmeasured.unjudged_because(), Some("no baseline run"));
        r.fixed = Some(unmeasured);
        assert!(fix_loops(std::slice::from_ref(&r)).is_empty());
        assert!(outcome(&accuracy(std::slice::from_ref(&r)), &[r]).is_ok());
    }

    /// A row measured on a late path is not judged (not a match, not a miss), and the
    /// throughput is a spread: median and the run farthest from the prediction.
    #[test]
    fn late_paths_are_not_judged_and_throughput_is_a_spread() {
        let mut late = row(Limit::Sndbuf, Limit::NotWindowLimited, "bbr");
        late.path_on_time = false;
        let ratio = |m: u64| {
            let mut r = row(Limit::Sndbuf, Limit::Sndbuf, "bbr");
            r.predicted_bps = Some(100);
            r.throughput_bps = Some(m);
            r
        };
        let rows = [late, ratio(90), ratio(100), ratio(70)];
        let t = accuracy(&rows);
        assert!(outcome(&t, &rows).is_ok());
        let rx = t.iter().find(|(k, _)| k.end == "receiver").unwrap().1;
        assert_eq!((rx.ok, rx.n, rx.unjudged), (3, 3, 1));
        assert_eq!(rx.spread(), Some((0.9, 0.7)));
        assert_eq!(Tally::default().spread(), None);
    }
}
