//! Lab results as text tables or JSON lines.
use std::collections::BTreeMap;

use tcpwin_model::verdict::{fmt_rate, Limit};

use crate::rows::{LabLine, MatrixRow, WanRow};

use crate::experiment::{on, LabResult, Row};
use crate::wan;
use anyhow::{bail, Context, Result};

/// A value, or `-` where there is none.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

impl Row {
    pub fn share(&self) -> Option<f64> {
        match (self.window_clamp, self.sk_rcvbuf) {
            (Some(w), Some(b)) if b > 0 => Some(w as f64 / b as f64),
            _ => None,
        }
    }

    pub fn to_line(&self) -> MatrixRow {
        MatrixRow {
            mtu: self.cond.mtu,
            gro: self.cond.gro,
            tso: self.cond.tso,
            buffer: self.cond.buffer.name().to_string(),
            scaling_ratio: self.scaling_ratio,
            first_skb_len: self.first_skb_len,
            first_skb_truesize: self.first_skb_truesize,
            window_clamp: self.window_clamp,
            sk_rcvbuf: self.sk_rcvbuf,
            window_share: self.share(),
            snd_wnd_peak: self.snd_wnd_peak,
            throughput_bps: self.throughput_bps,
            init_rcv_wnd: self.init_rcv_wnd,
            getsockopt_window_clamp: self.getsockopt_window_clamp,
        }
    }
}

impl LabResult {
    pub fn lines(&self) -> Vec<LabLine> {
        let rows = self.rows.iter().map(|r| LabLine::Matrix(r.to_line()));
        let hs = self.handshake.iter().cloned().map(LabLine::Handshake);
        let sw = self.sysctl.iter().cloned().map(LabLine::AdvWinScale);
        rows.chain(hs).chain(sw).collect()
    }

    pub fn print_json(&self) {
        for l in self.lines() {
            println!(
                "{}",
                serde_json::to_string(&l).expect("plain data serializes")
            );
        }
    }

    pub fn print_text(&self) {
        println!(
            "\ntcpwin-trace lab on Linux {}: same receiver, different packet shapes",
            self.kernel
        );
        println!(
            "{:>5} {:>4} {:>4} {:<14} {:>5} {:>16} {:>12} {:>10} {:>7} {:>12} {:>11} {:>12}",
            "MTU",
            "GRO",
            "TSO",
            "buffer",
            "ratio",
            "skb len/truesize",
            "window_clamp",
            "sk_rcvbuf",
            "win/buf",
            "snd_wnd peak",
            "Mbit/s",
            "init rcv_wnd"
        );
        for r in &self.rows {
            let skb = match (r.first_skb_len, r.first_skb_truesize) {
                (Some(l), Some(t)) => format!("{l}/{t}"),
                _ => "-".into(),
            };
            println!(
                "{:>5} {:>4} {:>4} {:<14} {:>5} {:>16} {:>12} {:>10} {:>7} {:>12} {:>11} {:>12}",
                r.cond.mtu,
                on(r.cond.gro),
                on(r.cond.tso),
                r.cond.buffer.name(),
                opt(r.scaling_ratio),
                skb,
                opt(r.window_clamp),
                opt(r.sk_rcvbuf),
                r.share()
                    .map(|s| format!("{:.1}%", s * 100.0))
                    .unwrap_or_else(|| "-".into()),
                opt(r.snd_wnd_peak),
                r.throughput_bps
                    .map(|b| format!("{:.0}", b as f64 / 1e6))
                    .unwrap_or_else(|| "-".into()),
                opt(r.init_rcv_wnd),
            );
        }
        println!("(throughput is for information only: it varies 2-3x between runs)");
        println!("\nSYN-ACK initial window for a 64 KiB receive buffer (window rounded down to a multiple of the MSS):");
        println!(
            "{:>5} {:>8} {:>7} {:>15}",
            "MTU", "rcvbuf", "advmss", "SYN-ACK window"
        );
        for h in &self.handshake {
            println!(
                "{:>5} {:>8} {:>7} {:>15}",
                h.mtu,
                h.rcvbuf,
                opt(h.advmss),
                opt(h.syn_ack_window)
            );
        }
        println!("\ntcp_adv_win_scale sweep (64 KiB buffer, MTU 1500): does the sysctl change the window?");
        println!(
            "{:>17} {:>15} {:>13}",
            "tcp_adv_win_scale", "SYN-ACK window", "window_clamp"
        );
        for s in &self.sysctl {
            println!(
                "{:>17} {:>15} {:>13}",
                s.tcp_adv_win_scale,
                opt(s.syn_ack_window),
                opt(s.window_clamp)
            );
        }
        let distinct: std::collections::BTreeSet<Option<u64>> =
            self.sysctl.iter().map(|s| s.syn_ack_window).collect();
        if distinct.len() == 1 {
            println!("-> the same window for every value: tcp_adv_win_scale is not used by this kernel (obsolete since 6.6)");
        } else {
            println!("-> the window follows tcp_adv_win_scale on this kernel");
        }
    }
}

fn rate(v: Option<u64>) -> String {
    v.map(fmt_rate).unwrap_or_else(|| "-".into())
}

/// The WAN rows' header.
pub fn wan_header() {
    println!(
        "{:<18} {:<32} {:<39} {:>4} {:>6} {:>8} {:>6} {:>4} {:>10} {:>14} {:>14} {:>14} {:>6} {:<20} {:<20}",
        "scenario", "traffic", "receiver", "cc", "rtt", "base rtt", "queue", "gro", "window", "ceiling",
        "bottleneck", "measured", "rwnd%", "verdict (receiver)", "sender"
    );
}

/// One WAN row as it completes: the setup, what the tool judged at both ends, what was measured.
pub fn wan_row(r: &WanRow) {
    let v = |l: Option<Limit>| {
        let id = l.map(|l| l.id().to_string()).unwrap_or_else(|| "-".into());
        if r.accepts(l) {
            id
        } else {
            format!("{id} (!)")
        }
    };
    let ms = |us: Option<u32>| {
        us.map(|u| format!("{:.1}ms", u as f64 / 1000.0))
            .unwrap_or_else(|| "-".into())
    };
    println!(
        "{:<18} {:<32} {:<39} {:>4} {:>4}ms {:>8} {:>6} {:>4} {:>10} {:>14} {:>14} {:>14} {:>6} {:<20} {:<20}",
        r.scenario,
        r.app,
        r.condition,
        r.cc,
        r.rtt_ms,
        ms(r.base_rtt_us),
        ms(r.queue_us),
        on(r.gro),
        opt(r.window),
        rate(r.ceiling_bps),
        rate(r.rate_limit_bps),
        rate(r.throughput_bps),
        r.rwnd_limited_share
            .map(|s| format!("{:.0}", s * 100.0))
            .unwrap_or_else(|| "-".into()),
        v(r.verdict),
        v(r.sender_verdict),
    );
}

/// After the rows: the delay line's troubles and each row's setting and fix.
pub fn wan_notes(rows: &[WanRow]) {
    println!("(both ends read together and judged as one connection; measured = the sender's bytes acknowledged over the last 4 of 6 s (the lab's endpoints) or from 2 to 5 s (a program's connections, by the kernel's count); (!) marks a verdict other than the scenario's)");
    for r in rows.iter().filter(|r| {
        r.path_drops > 0
            || r.path_late + r.path_rx_late > 0
            || r.path_queue_full_retries + r.path_send_retries > 0
    }) {
        println!(
            "path {} {} (attempt {}): {} us added to a round trip on average; of {} frames, {} left more than 1 ms late (latest {} us) and {} waited more than 1 ms to be read (longest {} us); {} sends found the receiving veth's queue full (ENOBUFS) and {} its own send buffer full (EAGAIN), their frames kept and sent again; {} lost by the delay line{}",
            r.scenario,
            r.condition,
            r.attempt,
            r.path_added_rtt_us,
            r.path_forwarded,
            r.path_late,
            r.path_max_late_us,
            r.path_rx_late,
            r.path_max_rx_wait_us,
            r.path_queue_full_retries,
            r.path_send_retries,
            r.path_drops,
            if r.path_on_time { "" } else { ": not judged" }
        );
    }
    for r in rows.iter().filter(|r| r.suggested.is_some() && r.run == 1) {
        println!(
            "{} {} ({}): {} -> {}",
            r.scenario,
            r.app,
            r.cc,
            r.setting.as_deref().unwrap_or("-"),
            r.suggested.as_deref().unwrap_or("-")
        );
    }
}

/// What the summary did not judge, and why: runs on a late path, fixes whose run the lab could
/// not stand behind.
fn not_judged(x: &super::wan::Summary) -> String {
    let mut why = Vec::new();
    if x.unjudged > 0 {
        why.push(format!("{} not judged: path late", x.unjudged));
    }
    for (reason, n) in &x.fixes_unjudged {
        why.push(format!("{n} fix not judged: {reason}"));
    }
    if why.is_empty() {
        String::new()
    } else {
        format!("  ({})", why.join("; "))
    }
}

/// The verdicts a summary row expected, one per congestion control where they differ; each
/// verdict through `show` (`a|b`: either).
fn expected_of(x: &super::wan::Summary, show: &dyn Fn(&str) -> String) -> String {
    let e: Vec<&String> = x.expected.values().collect();
    if e.windows(2).all(|w| w[0] == w[1]) {
        e.first().map(|e| show(e)).unwrap_or_default()
    } else {
        x.expected
            .iter()
            .map(|(cc, e)| format!("{cc}: {}", show(e)))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `ok/n`, or `-` where nothing was judged.
fn cell((ok, n): (u32, u32)) -> String {
    if n == 0 {
        "-".to_string()
    } else {
        format!("{ok}/{n}")
    }
}

/// A summary row's five cells: the four ways of reading, then the fixes.
fn cells(x: &super::wan::Summary) -> [(u32, u32); 7] {
    [
        x.reads[0], x.reads[1], x.reads[2], x.reads[3], x.reads[4], x.reads[5], x.fixes,
    ]
}

/// The cells of every row added up.
fn totals<'a>(rows: impl IntoIterator<Item = &'a super::wan::Summary>) -> [String; 7] {
    let mut sum = [(0, 0); 7];
    for x in rows {
        for (s, c) in sum.iter_mut().zip(cells(x)) {
            *s = (s.0 + c.0, s.1 + c.1);
        }
    }
    sum.map(cell)
}

/// The text tables' seven columns: each way of reading, then the fix loop.
const WAYS: [&str; 7] = [
    "snap both",
    "snap alone",
    "snap peer",
    "int both",
    "int alone",
    "int peer",
    "fixed",
];

/// Seven cells (headers, counts or totals) at the text tables' column widths.
fn ways<S: std::fmt::Display>([a, b, p, c, d, q, f]: [S; 7]) -> String {
    format!("{a:>9} {b:>10} {p:>9} {c:>9} {d:>10} {q:>9} {f:>7}")
}

/// Each scenario row in one line: the verdicts right per way of reading (both congestion
/// controls, both ends, every run) and the fixes that closed the loop.
pub fn print_summary(t: &BTreeMap<(String, String), super::wan::Summary>) {
    let plain = |e: &str| e.to_string();
    // columns as wide as their longest cell: setups name the path and GRO
    let sw = col_width(t.keys().map(|(_, s)| s.len()), 5);
    let ew = col_width(t.values().map(|x| expected_of(x, &plain).len()), 29);
    println!(
        "\n{:<18} {:<sw$} {:<ew$} {}",
        "scenario",
        "setup",
        "expected (both ends together)",
        ways(WAYS)
    );
    for ((scenario, setup), x) in t {
        let expected = expected_of(x, &plain);
        println!(
            "{scenario:<18} {setup:<sw$} {expected:<ew$} {}{}",
            ways(cells(x).map(cell)),
            not_judged(x)
        );
    }
    println!(
        "{:<18} {:<sw$} {:<ew$} {}",
        "all",
        "",
        "",
        ways(totals(t.values()))
    );
}

/// The summary as a Markdown table (the README's): the same rows and cells as
/// [`print_summary`], the expected verdicts in backquotes.
pub fn print_summary_markdown(t: &BTreeMap<(String, String), super::wan::Summary>) {
    let quoted = |e: &str| {
        e.split('|')
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    println!("| scenario | setup | expected (both ends) | one snapshot, both ends | one snapshot, one end | one snapshot, with the peer's exporter | interval, both ends | interval, one end | interval, with the peer's exporter | fix closed the loop |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for ((scenario, setup), x) in t {
        let [a, b, p, c, d, q, f] = cells(x).map(cell);
        println!(
            "| {scenario} | {setup} | {} | {a} | {b} | {p} | {c} | {d} | {q} | {f}{} |",
            expected_of(x, &quoted),
            not_judged(x).replacen("  ", " ", 1)
        );
    }
    let [a, b, p, c, d, q, f] = totals(t.values());
    println!(
        "| **all** | | | **{a}** | **{b}** | **{p}** | **{c}** | **{d}** | **{q}** | **{f}** |"
    );
}

/// The summary per program that drove the traffic: the verdicts right per way of reading and the
/// fixes that closed the loop, over every row it ran (`markdown`: as the README's table).
pub fn print_by_program(t: &BTreeMap<String, super::wan::Summary>, markdown: bool) {
    if markdown {
        println!("\n| program | one snapshot, both ends | one snapshot, one end | one snapshot, with the peer's exporter | interval, both ends | interval, one end | interval, with the peer's exporter | fix closed the loop |");
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    } else {
        println!("\n{:<18} {}", "program", ways(WAYS));
    }
    let line = |name: &str, [a, b, p, c, d, q, f]: [String; 7]| {
        if markdown {
            println!("| {name} | {a} | {b} | {p} | {c} | {d} | {q} | {f} |");
        } else {
            println!("{name:<18} {}", ways([a, b, p, c, d, q, f]));
        }
    };
    for (program, x) in t {
        line(program, cells(x).map(cell));
    }
    let all = totals(t.values());
    if markdown {
        line("**all**", all.map(|s| format!("**{s}**")));
    } else {
        line("all", all);
    }
}

/// The fix loop: per scenario row and congestion control, the fixes that repaired their
/// transfer (the rate at 80 % of the same path with nothing set, no window limit named after).
pub fn print_fix_loops(t: &BTreeMap<(String, String, String), (u32, u32)>) {
    if t.is_empty() {
        return;
    }
    let sw = col_width(t.keys().map(|(_, s, _)| s.len()), 5);
    println!(
        "\n{:<18} {:<sw$} {:<5} fixes that closed the loop",
        "scenario", "setup", "cc"
    );
    for ((scenario, setup, cc), (ok, n)) in t {
        println!("{scenario:<18} {setup:<sw$} {cc:<5} {ok}/{n}");
    }
}

/// The accuracy table: scenario x congestion control x end, expected vs got over the runs; the
/// measured / predicted throughput as a spread (median, worst); rows not judged (late path).
pub fn print_accuracy(t: &super::wan::Accuracy) {
    // setups name the path and GRO: the column as wide as the longest
    let sw = col_width(t.keys().map(|k| k.setup.len()), 5);
    println!(
        "\n{:<18} {:<sw$} {:<5} {:<24} {:<37} {:>8}  {:<17} got",
        "scenario", "setup", "cc", "read", "expected", "accuracy", "measured/predicted"
    );
    for (k, x) in t {
        let got: Vec<String> = x.got.iter().map(|(l, c)| format!("{l} x{c}")).collect();
        let spread = x
            .spread()
            .map(|(m, w)| format!("{m:.2} (worst {w:.2})"))
            .unwrap_or_else(|| "-".into());
        let unjudged = if x.unjudged > 0 {
            format!("; {} not judged: path late", x.unjudged)
        } else {
            String::new()
        };
        println!(
            "{:<18} {:<sw$} {:<5} {:<24} {:<37} {:>3}/{:<3} {:>3.0}%  {:<17} {}{unjudged}",
            k.scenario,
            k.setup,
            k.cc,
            format!(
                "{} {} {}",
                match k.read {
                    crate::rows::Read::Snapshot => "snapshot",
                    crate::rows::Read::Interval => "interval",
                },
                match k.view {
                    crate::rows::View::Both => "both",
                    crate::rows::View::Alone => "alone",
                    crate::rows::View::Peer => "peer",
                },
                k.end
            ),
            match k.also {
                Some(a) => format!("{}|{}", k.expected.id(), a.id()),
                None => k.expected.id().to_string(),
            },
            x.ok,
            x.n,
            x.ok as f64 * 100.0 / x.n.max(1) as f64,
            spread,
            got.join(", ")
        );
    }
}

/// A column as wide as its longest cell, and at least as wide as its heading.
fn col_width(cells: impl Iterator<Item = usize>, heading: usize) -> usize {
    cells.max().unwrap_or(0).max(heading)
}

/// A scenario run's tables and its outcome: the notes, the accuracy table, the fix loops and the
/// summary; an error when a verdict differed or a fix did not close.
pub fn print_tables(rows: &[WanRow]) -> Result<()> {
    let acc = wan::accuracy(rows);
    wan_notes(rows);
    print_accuracy(&acc);
    print_fix_loops(&wan::fix_loops(rows));
    let (held, n) = wan::counters(rows);
    if n > 0 {
        println!(
            "counter-proofs (no fix printed: both buffers raised anyway): {held} of {n} held, the rate did not move"
        );
    }
    print_summary(&wan::summary(rows));
    print_by_program(&wan::by_program(rows), false);
    let (checked, refused) = wan::checked(rows);
    println!(
        "the judge's own check: {checked} verdicts read, {} refused (a why, fix and facts that disagree)",
        refused.len()
    );
    wan::outcome(&acc, rows)
}

/// `--from FILE`: the tables of an earlier `--json` run, from its rows (`markdown`: the summary
/// alone, as the README shows it; `judge_again`: every way of reading judged again by this build).
pub fn tables_from(f: &std::path::Path, markdown: bool, judge_again: bool) -> Result<()> {
    let text = std::fs::read_to_string(f)
        .with_context(|| format!("--from {}: cannot read it", f.display()))?;
    let mut rows = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str::<WanRow>(l).with_context(|| {
                format!(
                    "--from {}: line {} is not a row of `lab --scenario ... --json`",
                    f.display(),
                    i + 1
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if rows.is_empty() {
        bail!("--from {}: no rows in it", f.display());
    }
    if judge_again {
        let again = wan::rejudge(&mut rows);
        eprintln!(
            "lab: {again} of {} rows judged again by this build from their recorded readings (the others kept too few; fix loops as they ran)",
            rows.len()
        );
    }
    if markdown {
        print_summary_markdown(&wan::summary(&rows));
        print_by_program(&wan::by_program(&rows), true);
        return wan::outcome(&wan::accuracy(&rows), &rows);
    }
    print_tables(&rows)
}
