//! One row's path and settings, and its transfers: the namespaces, the delay line and what the
//! row sets up (kept between a transfer and its rerun once a fix is applied), and a transfer
//! read three times while it runs (at 2 s, a quarter second later, and at 5 s).
use std::time::Duration;

use crate::rows::EndpointReport;
use crate::{
    harness::{Proc, SendOpts, Transfer},
    pair::Pair,
    programs::App,
    sysctl::GlobalSysctl,
};
use anyhow::{bail, Context, Result};

use super::specs::{Path, Recv, Spec};
use crate::readings::{PeerClient, Readings};
use tcpwin_model::facts::Seen;

pub(super) const PORT: u16 = 5403;
/// Seconds per transfer; the verdict is taken over [2 s, 5 s], the sender's own rate over the
/// last two thirds.
const SECS: f64 = 6.0;
/// When the readings are taken: the first, the one `ss` takes after it without `-i`, the end of
/// the interval.
const JUDGE_FROM: Duration = Duration::from_secs(2);
pub(super) const SNAPSHOT_AFTER: Duration = Duration::from_millis(250);
const JUDGE_UNTIL: Duration = Duration::from_secs(5);

/// A row's path and what it sets up, ready for transfers.
pub(super) struct Setup {
    pub pair: Pair,
    pub rtt_ms: u64,
    pub rate_bps: Option<u64>,
    pub queue_ms: Option<u32>,
    /// the lab's own endpoints' socket options (the row's, or a fix's)
    pub rcvbuf: Option<u32>,
    pub window_clamp: Option<u32>,
    /// TCP_WINDOW_CLAMP on the receiver's listener, before any handshake
    pub listen_clamp: Option<u32>,
    /// the program and its options (the row's, or a fix's)
    pub app: Option<App>,
    /// global sysctls changed for the row (or by a fix), restored on drop, the last changed
    /// first (a fix's guard saved the row's value; the row's guard the machine's)
    pub globals: Vec<GlobalSysctl>,
    /// each end's peer over the network (the fifth way of reading), where asked
    pub peers: Option<PeerViews>,
}

/// The port each end's exporter listens on, on its own address in its own namespace.
const EXPORTER_PORT: u16 = 9943;

/// Each end's peer over the network: an exporter in each end's namespace, reading only that
/// namespace (as one host's exporter), and each end's client of the other's (`--peer`), asked
/// at each reading from inside the end's namespace. They talk over a management link beside the
/// path, as monitoring is best reached: over the path itself a query waits behind the transfer
/// in the bottleneck's queue, and on a 100 ms path was answered after the transfer had ended.
pub(super) struct PeerViews {
    _exporters: Vec<Proc>,
    /// (an end's namespace, its client of the other end's exporter)
    ends: Vec<(String, std::sync::Mutex<Box<dyn PeerClient>>)>,
}

impl PeerViews {
    fn start(exe: &std::path::Path, pair: &Pair, product: &dyn Readings) -> Result<PeerViews> {
        let (ip_a, ip_b) = pair.management_link()?;
        let mut exporters = Vec::new();
        for (ns, ip) in [(&pair.a, ip_a), (&pair.b, ip_b)] {
            exporters.push(Proc(
                Pair::exec(ns, exe)
                    .args(["exporter", "--listen", &format!("{ip}:{EXPORTER_PORT}")])
                    .args(["--port", &PORT.to_string(), "--fresh-ms", "0"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .context("the lab's exporter in an end's namespace")?,
            ));
        }
        let mut ends = Vec::new();
        for (ns, other_ip) in [(&pair.a, ip_b), (&pair.b, ip_a)] {
            // the other end's exporter answers from this end's namespace
            in_namespace(ns, || {
                let until = std::time::Instant::now() + Duration::from_secs(20);
                while std::net::TcpStream::connect((other_ip, EXPORTER_PORT)).is_err() {
                    if std::time::Instant::now() > until {
                        bail!(
                            "the exporter at {other_ip}:{EXPORTER_PORT} did not listen within 20 s"
                        );
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(())
            })?;
            let peer = product.peer(&format!("http://{other_ip}:{EXPORTER_PORT}"))?;
            ends.push((ns.clone(), std::sync::Mutex::new(peer)));
        }
        Ok(PeerViews {
            _exporters: exporters,
            ends,
        })
    }

    /// Each end's peer readings of the connections of `reading`: (the end's namespace, the
    /// other end's sockets as its exporter answered, ready to judge beside the end's own). Both
    /// ends ask at once, each from its namespace (a thread each).
    fn read(&self, reading: &[Seen]) -> Result<PeerReading> {
        std::thread::scope(|sc| {
            let asks: Vec<_> = self
                .ends
                .iter()
                .map(|(ns, peers)| {
                    sc.spawn(move || -> Result<(String, Vec<Seen>)> {
                        enter(ns)?;
                        let local: Vec<Seen> = reading
                            .iter()
                            .filter(|s| s.line_ns == *ns)
                            .cloned()
                            .collect();
                        let mut p = peers.lock().map_err(|_| anyhow::anyhow!("peer poisoned"))?;
                        let theirs = p.read(&local, PORT);
                        for n in p.news() {
                            eprintln!("lab: {ns}: {n}");
                        }
                        Ok((ns.clone(), theirs))
                    })
                })
                .collect();
            asks.into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| anyhow::anyhow!("a peer reading panicked"))?
                })
                .collect()
        })
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        while let Some(g) = self.globals.pop() {
            drop(g);
        }
    }
}

/// Creates the row's path (`n` keeps namespace names apart) and sets it up with congestion
/// control `cc`.
pub(super) fn setup(
    s: &Spec,
    cc: &str,
    n: usize,
    peers: Option<(&std::path::Path, &dyn Readings)>,
) -> Result<Setup> {
    if let Some(app) = s.app {
        app.require()?;
    }
    let prefix = format!("tcpwin-wan-{}-{n}", std::process::id());
    let (pair, rtt_ms, rate_bps, queue_ms) = match s.path {
        Path::Veth => (
            Pair::create(&prefix, s.mtu).context("the lab's veth pair")?,
            0,
            None,
            None,
        ),
        Path::Wan {
            rtt_ms,
            rate_bps,
            queue_ms,
        } => {
            let queue = queue_ms.map(|q| rate_bps * q as u64 / 8 / 1000);
            let p = Pair::create_wan_lossy(
                &prefix,
                s.mtu,
                Duration::from_millis(rtt_ms),
                Some(rate_bps),
                queue,
                s.loss_ppm,
            )
            .context("the lab's WAN path (namespaces, veth, delay line)")?;
            (p, rtt_ms, Some(rate_bps), queue_ms)
        }
    };
    pair.set_receiver_gro(s.gro)?;
    for ns in [&pair.a, &pair.b] {
        Pair::sysctl(ns, "net.ipv4.tcp_congestion_control", cc)?;
    }
    if let Some(m) = s.wmem_max {
        Pair::sysctl(&pair.a, "net.ipv4.tcp_wmem", &format!("4096 16384 {m}"))?;
    }
    if s.sender_wscale_off {
        Pair::sysctl(&pair.a, "net.ipv4.tcp_window_scaling", "0")?;
    }
    let mut st = Setup {
        pair,
        rtt_ms,
        rate_bps,
        queue_ms,
        rcvbuf: None,
        window_clamp: None,
        listen_clamp: None,
        app: s.app,
        globals: Vec::new(),
        peers: None,
    };
    if let Some((exe, product)) = peers {
        st.peers = Some(PeerViews::start(exe, &st.pair, product)?);
    }
    let pair = &st.pair;
    match s.recv {
        Recv::Auto | Recv::SlowReader { .. } => {}
        Recv::WscaleOff => Pair::sysctl(&pair.b, "net.ipv4.tcp_window_scaling", "0")?,
        Recv::SoRcvbuf { req, rmem_max } => {
            st.rcvbuf = Some(req);
            st.globals.push(GlobalSysctl::set(
                "net.core.rmem_max",
                &rmem_max.to_string(),
            )?);
        }
        Recv::RmemMax(m) => {
            Pair::sysctl(&pair.b, "net.ipv4.tcp_rmem", &format!("4096 131072 {m}"))?
        }
        Recv::Pinned(b) => pair.pin_receiver_buffer(b as u32)?,
        Recv::Clamped { buf, clamp } => {
            pair.pin_receiver_buffer(buf as u32)?;
            st.window_clamp = Some(clamp);
        }
        Recv::ClampBeforeHandshake(c) => st.listen_clamp = Some(c),
        Recv::RouteWindow(w) => {
            crate::pair::ip(&[
                "-n",
                &pair.b,
                "route",
                "add",
                &format!("{}/32", pair.ip_a),
                "dev",
                pair.dev_b,
                "window",
                &w.to_string(),
            ])
            .context("the receiver's route with a window metric")?;
        }
    }
    Ok(st)
}

/// Each end's peer readings at one moment: (the end's namespace, the other end's sockets from
/// its exporter).
pub(super) type PeerReading = Vec<(String, Vec<Seen>)>;

/// A transfer, read three times while it runs, with what the sender measured itself.
pub(super) struct Run {
    /// at 2 s, 250 ms later, at 5 s
    pub readings: [Vec<Seen>; 3],
    /// each end's peer over the network at the same moments, where the setup has them
    pub peer_readings: Option<[PeerReading; 3]>,
    pub throughput_bps: Option<u64>,
    /// the lab's own sender's report (null with a real program)
    pub sender: Option<EndpointReport>,
    /// the congestion control of each socket of the port in the sender's namespace at the last
    /// reading, as `ss -ti` names it
    pub sender_ccs: Vec<String>,
}

/// The congestion controls `ss -tin` names for the established sockets of `port` in namespace
/// `ns` (iproute2 reads them over sock_diag, `INET_DIAG_CONG`). What the sysctl set is not
/// proof of what a socket runs: this is.
fn congestion_controls(ns: &str, port: u16) -> Result<Vec<String>> {
    let filter = format!("( sport = :{port} or dport = :{port} )");
    // `ss` started from a thread inside the namespace runs there (the lab's one way in)
    let mut out = None;
    in_namespace(ns, || {
        let o = std::process::Command::new("ss")
            .args(["-tinH", "state", "established", &filter])
            .output()
            .context("running `ss -tin` in the sender's namespace")?;
        out = Some(o);
        Ok(())
    })?;
    let out = out.context("`ss -tin` did not run")?;
    if !out.status.success() {
        bail!(
            "`ss -tin` in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(ccs_of_ss(&String::from_utf8_lossy(&out.stdout)))
}

/// Each socket's congestion control in `ss -ti` output: on its info line, the last word before
/// the first `name:value` one (`ts sack cubic wscale:7,7 rto:204 ...`).
fn ccs_of_ss(out: &str) -> Vec<String> {
    const FLAGS: [&str; 5] = ["ts", "sack", "ecn", "ecnseen", "fastopen"];
    out.lines()
        .filter(|l| l.starts_with(char::is_whitespace))
        .filter_map(|l| {
            l.split_whitespace()
                .take_while(|w| !w.contains(':'))
                .filter(|w| !FLAGS.contains(w))
                .last()
                .map(str::to_string)
        })
        .collect()
}

/// A program's rate as the kernel counted it, as the lab's own sender counts its own: the bytes
/// its connections had acknowledged at the last reading (5 s) less at the first (2 s), over the
/// time between, so slow start and the program's own start are left out. None where a
/// connection that moved data at the first reading is gone by the last (the program's own
/// report stands then).
fn acked_between(first: &[Seen], last: &[Seen]) -> Option<u64> {
    let mut bps = 0.0;
    for a in first.iter().map(|s| &s.facts) {
        let acked = a.bytes_acked.unwrap_or(0);
        let Some(b) = last.iter().map(|s| &s.facts).find(|b| b.id == a.id) else {
            match acked {
                0 => continue,
                _ => return None,
            }
        };
        let sent = b.bytes_acked?.saturating_sub(acked);
        let ns = b.ts_ns.checked_sub(a.ts_ns)?;
        bps += sent as f64 * 8e9 / ns.max(1) as f64;
    }
    (bps > 0.0).then_some(bps as u64)
}

/// Both ends' sockets of `port` in the pair's namespaces, read together.
fn sample(it: &mut dyn Readings, pair: &Pair) -> Result<Vec<Seen>> {
    it.read(&[&pair.a, &pair.b], PORT)
}

/// Moves the calling thread into the lab's namespace `name`.
fn enter(name: &str) -> Result<()> {
    tcpwin_common::netns::enter_named(name).with_context(|| format!("entering {name}"))
}

/// Runs `f` on a thread of its own inside the lab's namespace `name`.
fn in_namespace(name: &str, f: impl FnOnce() -> Result<()> + Send) -> Result<()> {
    std::thread::scope(|sc| {
        sc.spawn(|| {
            enter(name)?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("a thread in {name} panicked"))?
    })
}

/// One transfer through the row's path with congestion control `cc`.
pub(super) fn transfer(
    exe: &std::path::Path,
    it: &mut dyn Readings,
    s: &Spec,
    st: &Setup,
    cc: &str,
) -> Result<Run> {
    let pair = &st.pair;
    type Watched = ([Vec<Seen>; 3], Option<[PeerReading; 3]>, Vec<String>);
    // each reading, and at the same moment each end's peer over the network: the peers are
    // asked (for the connections of the reading before, the same ones) while the ends are
    // read, so the two readings of a connection are milliseconds apart, not a round of
    // questions; with nothing read before, they are asked after
    let at = |it: &mut dyn Readings, before: &[Seen]| -> Result<(Vec<Seen>, Option<PeerReading>)> {
        match st.peers.as_ref() {
            None => Ok((sample(it, pair)?, None)),
            Some(p) if before.is_empty() => {
                let r = sample(it, pair)?;
                let theirs = p.read(&r)?;
                Ok((r, Some(theirs)))
            }
            Some(p) => std::thread::scope(|sc| {
                let asked = sc.spawn(|| p.read(before));
                let r = sample(it, pair);
                let theirs = asked
                    .join()
                    .map_err(|_| anyhow::anyhow!("a peer reading panicked"))??;
                Ok((r?, Some(theirs)))
            }),
        }
    };
    let watch = |it: &mut dyn Readings| -> Result<Watched> {
        // the first and last readings keep to the clock of the transfer's start, whatever the
        // readings before them took (with each end's peer asked, three of them took long
        // enough on a busy machine to push the last past a 6 s sender's end); the snapshot is
        // a quarter second after the first, as `ss` run twice
        let start = std::time::Instant::now();
        let at_offset = |t: Duration| {
            std::thread::sleep((start + t).saturating_duration_since(std::time::Instant::now()))
        };
        // the connections the peers are asked about at the first reading
        let ahead = Duration::from_millis(200);
        at_offset(JUDGE_FROM - ahead);
        let early = match st.peers {
            Some(_) => sample(it, pair)?,
            None => Vec::new(),
        };
        at_offset(JUDGE_FROM);
        let (first, p0) = at(it, &early)?;
        std::thread::sleep(SNAPSHOT_AFTER);
        let (soon, p1) = at(it, &first)?;
        at_offset(JUDGE_UNTIL);
        let (last, p2) = at(it, &soon)?;
        let ccs = congestion_controls(&pair.a, PORT)?;
        let peers = match (p0, p1, p2) {
            (Some(a), Some(b), Some(c)) => Some([a, b, c]),
            _ => None,
        };
        Ok(([first, soon, last], peers, ccs))
    };
    match st.app {
        None => {
            let t = Transfer {
                exe: exe.to_path_buf(),
                pair,
                port: PORT,
                bytes: 0,
                conns: 1,
                ipv6: false,
                rcvbuf: st.rcvbuf,
                timeout: Duration::from_secs(60),
                send: SendOpts {
                    secs: Some(SECS),
                    cc: Some(cc.into()),
                    window_clamp: st.window_clamp,
                    read_bps: match s.recv {
                        Recv::SlowReader { bps } => Some(bps),
                        _ => None,
                    },
                    listen_clamp: st.listen_clamp,
                },
            };
            let (_, tx, readings) = t.run_watched(true, || watch(it))?;
            let sender = tx.first().context("the sender reported nothing")?.clone();
            let (readings, peer_readings, sender_ccs) = readings?;
            Ok(Run {
                readings,
                peer_readings,
                throughput_bps: sender.steady_bps,
                sender: Some(sender),
                sender_ccs,
            })
        }
        Some(app) => {
            let lead = app.lead();
            let running = app.start(pair, PORT, SECS + lead.as_secs_f64(), cc)?;
            std::thread::sleep(lead);
            let readings = watch(it);
            let rate = running.finish(Duration::from_secs(30))?;
            let (readings, peer_readings, sender_ccs) = readings?;
            Ok(Run {
                throughput_bps: acked_between(&readings[0], &readings[2]).or(rate),
                readings,
                peer_readings,
                sender: None,
                sender_ccs,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ss -tinH` of iproute2 6.1 (Debian 12): a connection line, then its info line.
    #[test]
    fn each_sockets_congestion_control_is_read_from_ss() {
        let out = "ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000\n\t ts sack bbr wscale:7,7 rto:204 rtt:100/50 cwnd:10\nESTAB 0 0 10.0.0.1:5201 10.0.0.2:40002\n\t sack cubic rto:204 rtt:1/0.5\n\t reno wscale:9,9 rto:201\n";
        assert_eq!(ccs_of_ss(out), ["bbr", "cubic", "reno"]);
        assert!(ccs_of_ss("").is_empty());
    }
    use tcpwin_model::{facts::SockFacts, id::SocketId};

    fn seen(cookie: u64, ts_ms: u64, acked: u64) -> Seen {
        Seen {
            line_ns: "a".into(),
            facts: SockFacts {
                ts_ns: ts_ms * 1_000_000,
                id: SocketId {
                    cookie: Some(cookie),
                    ..Default::default()
                },
                bytes_acked: Some(acked),
                ..Default::default()
            },
            host: Default::default(),
        }
    }

    /// Every connection's bytes over its own time between the readings, summed (iperf3 -P 4);
    /// a listener that closed counts for nothing, a data connection that closed leaves the rate
    /// to the program's report.
    #[test]
    fn a_programs_rate_is_what_its_connections_had_acknowledged_between_the_readings() {
        let first = [
            seen(1, 2000, 1_000_000),
            seen(2, 2001, 0),
            seen(3, 2002, 50),
        ];
        let last = [seen(1, 5000, 4_750_000), seen(3, 5002, 1_250_050)];
        assert_eq!(acked_between(&first, &last), Some(10_000_000 + 3_333_333));
        let gone = [seen(1, 5000, 4_750_000)];
        assert_eq!(acked_between(&first, &gone), None);
        assert_eq!(acked_between(&first, &first), None, "nothing moved");
    }
}
