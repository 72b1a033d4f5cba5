//! `tcpwin-trace ss`: every TCP socket now, with what `ss` cannot show (scaling_ratio,
//! window_clamp, the buffer lock, unread bytes, the chrono times) and the verdict: which limit
//! binds its window. Read through the socket iterator; costs nothing while it does not run.
use std::{
    io::Write,
    time::{Duration, Instant},
};

use anyhow::Result;
use tcpwin_model::{facts::state_name, judge::Judge, schema::SsLine};

use crate::{
    cli::SsArgs,
    gather::{
        scope,
        snapshot::{self, Source, SourceKind},
    },
    host::kconfig,
    ui,
};
use tcpwin_common::stop::{install_stop_handler, wait_or_stop};

/// Without `-i`, how long after the first reading the sockets moving data are read again.
const SECOND_READING: Duration = Duration::from_millis(250);

/// A connection that sent or received data lately (or whose source cannot say).
fn moving(f: &tcpwin_model::facts::SockFacts) -> bool {
    f.state == tcpwin_model::facts::ESTABLISHED
        && f.idle_now().map_or(
            f.bytes_received.unwrap_or(0) + f.bytes_acked.unwrap_or(0) > 0,
            |idle| !idle,
        )
}

pub fn run(args: SsArgs) -> Result<()> {
    args.kernel.validate()?;
    // a process's sockets live in its namespace: read that one unless --netns says otherwise
    let mut rereading = snapshot::Rereading::new(args.sockets.scope()?);
    let source = args.source.into();
    let mut src = Source::open(source, &args.kernel.kernel())?;
    if source == SourceKind::SockDiag {
        eprintln!(
            "tcpwin-trace: reading sock_diag (what iproute2's ss reads): {} are null{}",
            crate::host::sockdiag::MISSING.join(", "),
            if crate::kernel::object::check_privileges().is_err() {
                "; without root only this namespace is read and other users' sockets have no owner"
            } else {
                ""
            }
        );
    }
    if let Source::Iterator(it) = &src {
        for (field, why) in &it.absent {
            eprintln!("tcpwin-trace: {field} {why}: reported as null");
        }
    }
    let hz = kconfig::hz();
    if hz.is_none() {
        eprintln!("tcpwin-trace: the kernel's CONFIG_HZ is unknown (no /boot/config-* or /proc/config.gz): busy/rwnd-limited/sndbuf-limited times are null");
    }
    let mut peers = args.peer.peers()?;
    let port = rereading.scope.port;
    // a reading, and the peers' ends of its connections at the same moment
    let mut read =
        |rereading: &mut snapshot::Rereading, src: &mut Source| -> Result<Vec<snapshot::Seen>> {
            let mut seen = rereading.read(src, hz)?;
            if let Some(p) = peers.as_mut() {
                let theirs = p.read(&seen, port);
                seen.extend(theirs);
                for n in p.news() {
                    eprintln!("tcpwin-trace: {n}");
                }
            }
            Ok(seen)
        };
    install_stop_handler();
    let mut judge = match args.interval {
        Some(_) => Judge::new(args.target.target),
        None => Judge::one_shot(args.target.target),
    };
    let mut taken = 0u64;
    let mut said_rcv_wnd = false;
    // one write per buffer, not per line (stdout is line-buffered): 10,000 lines are 10,000
    // system calls otherwise
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    loop {
        let t0 = Instant::now();
        let mut seen = match read(&mut rereading, &mut src) {
            Ok(seen) => seen,
            // `-i`: the process or workload watched ended since the last reading
            Err(e) if taken > 0 && scope::ended(&e).is_some() => {
                eprintln!("tcpwin-trace: {e}; stopping");
                break;
            }
            Err(e) => return Err(e),
        };
        // one reading has no rate: without -i, sockets moving data are read again a moment
        // later and judged over that interval (said on stderr)
        if args.interval.is_none() && seen.iter().any(|s| moving(&s.facts)) {
            judge = Judge::new(args.target.target);
            judge.judge(seen.iter().map(|s| (&s.facts, &*s.host)));
            if wait_or_stop(SECOND_READING) {
                break;
            }
            seen = read(&mut rereading, &mut src)?;
            eprintln!(
                "tcpwin-trace: verdicts over the {} ms between two readings (one reading has no rate to hold against a window; -i MS for longer intervals)",
                SECOND_READING.as_millis()
            );
        }
        // sock_diag's tcp_info carries the advertised window from 6.2 only: say why it is null
        if !said_rcv_wnd
            && matches!(src, Source::SockDiag)
            && !seen.is_empty()
            && seen.iter().all(|s| s.facts.rcv_wnd.is_none())
        {
            eprintln!("tcpwin-trace: rcv_wnd is null: this kernel's tcp_info has no tcpi_rcv_wnd (Linux 6.2+)");
            said_rcv_wnd = true;
        }
        // the owner (a scan of every process's fds) only where it is shown: JSON, -e and the
        // owner column (--workload, or where containers are read: --netns all, --container,
        // --cgroup)
        let owners = args.workload
            || args.sockets.container.is_some()
            || args.sockets.cgroup.is_some()
            || args.sockets.netns.as_deref() == Some("all");
        if args.json || args.extended || owners {
            snapshot::add_owners(&mut seen);
        }
        let select = args.selection();
        taken += 1;
        // an interval's first snapshot has no rates yet: its verdicts are the static ones
        let mut text =
            ui::ss::Renderer::new(args.interval.is_some() && taken > 1, args.extended, owners);
        // each socket judged and printed in turn: nothing but the sockets read is held at once
        // (not every verdict's text)
        let now: Vec<_> = seen.iter().map(|s| (&s.facts, &*s.host)).collect();
        let source = src.name();
        judge.judge_each(&now, |i, v| -> Result<()> {
            let s = &seen[i];
            let l = SsLine {
                host: None,
                other_end: None,
                source: source.into(),
                netns_name: s.line_ns.clone(),
                state_name: state_name(s.facts.state).into(),
                facts: s.facts.clone(),
                verdict: v,
            };
            if !select.keeps(&l) {
                return Ok(());
            }
            if args.json {
                serde_json::to_writer(&mut out, &l)?;
                writeln!(out)?;
            } else {
                text.line(&l, &mut out)?;
            }
            Ok(())
        })?;
        if !args.json {
            text.finish(&mut out)?;
        }
        out.flush()?;
        let Some(ms) = args.interval else {
            break;
        };
        if args.count.is_some_and(|c| taken >= c) {
            break;
        }
        let wait = Duration::from_millis(ms).saturating_sub(t0.elapsed());
        if wait_or_stop(wait) {
            break;
        }
    }
    if rereading.gone > 0 {
        eprintln!(
            "tcpwin-trace: {} namespace(s) disappeared between listing and reading (skipped)",
            rereading.gone
        );
    }
    Ok(())
}
