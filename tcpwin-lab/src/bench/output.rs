//! The bench's tables (text) and rows (JSON): medians of per-run figures, ratios to the untraced
//! runs of the same pairs.
use std::collections::HashMap;

use tcpwin_lab::rows::{BenchRow, BulkRow, ChurnRow, ProgramCost};

use crate::{measure::median, Mode, Sample, CHURN_BYTES, FLOOR_PROG};

/// One JSON row on stdout.
pub fn print_row(row: &BenchRow) {
    println!(
        "{}",
        serde_json::to_string(row).expect("bench rows serialize")
    );
}

/// Per program: total hits, median per-run ns per hit and, where the floor ran alongside (and
/// `with_floor`), median per-run ns above it.
type PerProgram = std::collections::BTreeMap<String, (u64, f64, Option<f64>)>;

fn per_program(v: &[Sample], with_floor: bool) -> PerProgram {
    let mut progs: std::collections::BTreeMap<String, (u64, Vec<f64>, Vec<f64>)> =
        Default::default();
    for smp in v {
        let floor = smp
            .per_prog
            .get(FLOOR_PROG)
            .filter(|(_, n)| *n > 0 && with_floor)
            .map(|(ns, n)| *ns as f64 / *n as f64);
        for (k, (ns, n)) in smp.per_prog.iter().filter(|(_, (_, n))| *n > 0) {
            let e = progs.entry(k.clone()).or_default();
            let per = *ns as f64 / *n as f64;
            e.0 += n;
            e.1.push(per);
            if let Some(f) = floor {
                e.2.push(per - f);
            }
        }
    }
    progs
        .into_iter()
        .map(|(k, (n, per, above))| {
            let above = (!above.is_empty()).then(|| median(above));
            (k, (n, median(per), above))
        })
        .collect()
}

fn progs_json(progs: &PerProgram) -> std::collections::BTreeMap<String, ProgramCost> {
    progs
        .iter()
        .map(|(k, (n, per, above))| {
            (
                k.clone(),
                ProgramCost {
                    hits: *n,
                    ns_per_hit: *per,
                    ns_above_floor: *above,
                },
            )
        })
        .collect()
}

fn progs_line(progs: &PerProgram) -> String {
    progs
        .iter()
        .map(|(k, (n, per, _))| format!("{k} {per:.0} ns x {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn median_of(v: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    v.iter().map(f).collect::<Option<Vec<_>>>().map(median)
}

/// The churn table: what tracing costs per connection (state changes, teardown, a few packets).
pub fn report_churn(
    samples: &HashMap<Mode, Vec<Sample>>,
    modes: &[Mode],
    conns: u32,
    json_out: bool,
) {
    let base = &samples[&Mode::Untraced];
    let rate = |s: &Sample| s.conns as f64 / s.wall_s;
    let cpu = |s: &Sample| s.transfer_cpu_s / s.conns as f64;
    let (base_rate, base_cpu) = (
        median(base.iter().map(rate).collect()),
        median(base.iter().map(cpu).collect()),
    );
    if !json_out {
        println!(
            "\nshort connections (batches of {conns} x {CHURN_BYTES} B, sequential, for 3 s or more per run; untraced: {base_rate:.0} conn/s, {:.1} CPU-us/conn)",
            base_cpu * 1e6
        );
    }
    for m in modes {
        if let Some(v) = samples.get(m) {
            churn_row(*m, v, base_rate, base_cpu, json_out);
        }
    }
    // the tracer's BPF time per connection beside tcplife's and the empty programs', same runs
    let us = |m: Mode| {
        median_of(samples.get(&m)?, |s| {
            Some(s.bpf_ns as f64 / 1e3 / s.conns as f64)
        })
    };
    if let (false, Some(ours)) = (json_out, us(Mode::Default)) {
        let beside = [
            (Mode::Tcplife, "tcplife's"),
            (Mode::EmptyAll, "the empty programs'"),
        ]
        .into_iter()
        .filter_map(|(m, name)| us(m).map(|t| format!("{:.2}x {name} ({t:.2} us)", ours / t)))
        .collect::<Vec<_>>();
        println!(
            "default per connection: {ours:.2} us of BPF time, {}",
            beside.join(", ")
        );
    }
}

fn churn_row(mode: Mode, v: &[Sample], base_rate: f64, base_cpu: f64, json_out: bool) {
    let rate = |s: &Sample| s.conns as f64 / s.wall_s;
    let cpu = |s: &Sample| s.transfer_cpu_s / s.conns as f64;
    let rate_ratio = median(v.iter().map(|s| rate(s) / base_rate).collect());
    let cpu_ratio = median(v.iter().map(|s| cpu(s) / base_cpu).collect());
    let bpf_us = median_of(v, |s| Some(s.bpf_ns as f64 / 1e3 / s.conns as f64));
    let bpf_share = median_of(v, |s| Some(s.bpf_ns as f64 / 1e9 / s.transfer_cpu_s));
    let events = median_of(v, |s| Some(s.changes_seen? as f64 / s.conns as f64));
    let records = median_of(v, |s| Some(s.records_seen? as f64 / s.conns as f64));
    let drops = v.iter().map(|s| s.drops).sum::<Option<u64>>();
    let tcpu = median_of(v, |s| s.tracer_cpu_share);
    let progs = per_program(v, false);
    if json_out {
        print_row(&BenchRow::Churn(ChurnRow {
            mode: mode.name().into(),
            // connections per run (whole batches of `conns` for 3 s or more), the median run's
            conns: median(v.iter().map(|s| s.conns as f64).collect()) as u32,
            conns_per_sec_ratio: rate_ratio,
            cpu_per_conn_ratio: cpu_ratio,
            bpf_us_per_conn: bpf_us,
            bpf_cpu_share: bpf_share,
            drops,
            events_per_conn: events,
            records_per_conn: records,
            tracer_cpu_share: tcpu,
            runs: v.len(),
            bpf_programs: progs_json(&progs),
        }));
        return;
    }
    let o = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map(f).unwrap_or_else(|| "-".into());
    println!(
        "{:<9} conn/s ratio {rate_ratio:.3}  CPU/conn ratio {cpu_ratio:.3}  BPF {} us/conn ({})  events/conn {} (records {})  drops {}  tracer CPU {}",
        mode.name(),
        o(bpf_us, &|x| format!("{x:.2}")),
        o(bpf_share, &|x| format!("{:.2}%", x * 100.0)),
        o(events, &|x| format!("{x:.1}")),
        o(records, &|x| format!("{x:.1}")),
        drops.map(|d| d.to_string()).unwrap_or_else(|| "-".into()),
        o(tcpu, &|x| format!("{:.2}%", x * 100.0)),
    );
    println!("          per program: {}", progs_line(&progs));
}

pub fn report(samples: &HashMap<Mode, Vec<Sample>>, modes: &[Mode], json_out: bool) {
    let base = &samples[&Mode::Untraced];
    let base_tp = median(base.iter().map(|s| s.throughput_bps).collect());
    let base_cpu = median(base.iter().map(|s| s.cpu_per_gb).collect());
    let range = |v: Vec<f64>| {
        let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (median(v), min, max)
    };
    if !json_out {
        println!(
            "\n{:<9} {:>22} {:>22} {:>10} {:>10} {:>9} {:>9} {:>6} {:>8} {:>11} {:>10}",
            "mode",
            "throughput ratio",
            "CPU/GB ratio",
            "BPF ns/hit",
            "BPF ms/GB",
            "BPF share",
            "events/s",
            "drops",
            "changes",
            "tracer CPU",
            "tracer RSS"
        );
    }
    let raw = BulkRow {
        mode: "raw".into(),
        bpf_ns_per_hit: None,
        bpf_ms_per_gb: None,
        bpf_cpu_share: None,
        throughput_ratio: None,
        throughput_ratio_min: None,
        throughput_ratio_max: None,
        cpu_per_gb_ratio: None,
        cpu_per_gb_ratio_min: None,
        cpu_per_gb_ratio_max: None,
        drops: None,
        events_per_sec: None,
        changes_seen: None,
        tracer_cpu_share: None,
        tracer_rss_bytes: None,
        runs: None,
        bpf_programs: Default::default(),
        note: Some("no per-packet raw mode: per-packet facts are aggregated in the kernel".into()),
    };
    for &m in modes {
        let v = &samples[&m];
        let tp = range(v.iter().map(|s| s.throughput_bps / base_tp).collect());
        let cpu = range(v.iter().map(|s| s.cpu_per_gb / base_cpu).collect());
        // Medians of per-run figures: a run disturbed by the host (every program slower at once)
        // would dominate pooled sums.
        let ns_per_hit = median_of(v, |s| {
            (s.bpf_hits > 0).then(|| s.bpf_ns as f64 / s.bpf_hits as f64)
        });
        let ms_per_gb = median_of(v, |s| {
            (s.bpf_hits > 0).then(|| s.bpf_ns as f64 / 1e6 / s.gb)
        });
        let bpf_share = median_of(v, |s| {
            (s.bpf_hits > 0).then(|| s.bpf_ns as f64 / 1e9 / s.transfer_cpu_s)
        });
        let drops = v.iter().map(|s| s.drops).sum::<Option<u64>>();
        let eps = median_of(v, |s| s.events_per_sec);
        let changes = median_of(v, |s| s.changes_seen.map(|c| c as f64)).map(|c| c as u64);
        let tcpu = median_of(v, |s| s.tracer_cpu_share);
        let rss = v.iter().filter_map(|s| s.tracer_rss).max();
        let progs = per_program(v, m == Mode::Default);
        if json_out {
            print_row(&BenchRow::Bulk(BulkRow {
                mode: m.name().into(),
                bpf_ns_per_hit: ns_per_hit,
                bpf_ms_per_gb: ms_per_gb,
                bpf_cpu_share: bpf_share,
                throughput_ratio: Some(tp.0),
                throughput_ratio_min: Some(tp.1),
                throughput_ratio_max: Some(tp.2),
                cpu_per_gb_ratio: Some(cpu.0),
                cpu_per_gb_ratio_min: Some(cpu.1),
                cpu_per_gb_ratio_max: Some(cpu.2),
                drops,
                events_per_sec: eps,
                changes_seen: changes,
                tracer_cpu_share: tcpu,
                tracer_rss_bytes: rss,
                runs: Some(v.len()),
                bpf_programs: progs_json(&progs),
                note: None,
            }));
        } else {
            let o = |x: Option<String>| x.unwrap_or_else(|| "-".into());
            println!(
                "{:<9} {:>22} {:>22} {:>10} {:>10} {:>9} {:>9} {:>6} {:>8} {:>11} {:>10}",
                m.name(),
                format!("{:.3} ({:.3}-{:.3})", tp.0, tp.1, tp.2),
                format!("{:.3} ({:.3}-{:.3})", cpu.0, cpu.1, cpu.2),
                o(ns_per_hit.map(|v| format!("{v:.0}"))),
                o(ms_per_gb.map(|v| format!("{v:.2}"))),
                o(bpf_share.map(|v| format!("{:.2}%", v * 100.0))),
                o(eps.map(|v| format!("{v:.0}"))),
                o(drops.map(|v| v.to_string())),
                o(changes.map(|v| v.to_string())),
                o(tcpu.map(|v| format!("{:.2}%", v * 100.0))),
                o(rss.map(|v| format!("{:.1} MiB", v as f64 / 1048576.0))),
            );
            if !progs.is_empty() {
                println!("          per program: {}", progs_line(&progs));
            }
            let above: Vec<String> = progs
                .iter()
                .filter(|(k, _)| k.as_str() != FLOOR_PROG)
                .filter_map(|(k, (_, _, a))| a.map(|a| format!("{k} {a:+.0}")))
                .collect();
            if !above.is_empty() {
                println!(
                    "          ns above the same-run floor: {}",
                    above.join(", ")
                );
            }
        }
    }
    // median per-run ns per hit of one program (the one on the floor's hook: tcp_probe)
    let per_hit = |m: Mode, prog: &str| -> Option<f64> {
        median_of(samples.get(&m)?, |s| {
            s.per_prog
                .get(prog)
                .filter(|(_, n)| *n > 0)
                .map(|(ns, n)| *ns as f64 / *n as f64)
        })
    };
    if json_out {
        print_row(&BenchRow::Bulk(raw));
    } else {
        if let (Some(e), Some(d)) = (
            per_hit(Mode::Empty, FLOOR_PROG),
            per_hit(Mode::Default, "tcp_probe"),
        ) {
            println!(
                "empty-tp: an empty program on tcp:tcp_probe costs {e:.0} ns per hit here (trampoline + bpf_stats); the tracer's tcp_probe {d:.0} ns, {:.0} ns above it (the floor moves between runs: --floor-alongside measures it in the same runs)",
                d - e
            );
        }
        println!("raw       (none: per-packet facts are aggregated in the kernel, never streamed)");
        println!(
            "untraced: median {:.2} Gbit/s, {:.2} CPU-s/GB over {} runs",
            base_tp / 1e9,
            base_cpu,
            base.len()
        );
    }
}
