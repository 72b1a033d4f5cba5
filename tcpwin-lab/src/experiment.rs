//! The experiment of article 004, measured instead of derived: the same buffer, different packet
//! shapes (MTU, receiver GRO, sender TSO/GSO), different windows. The ratio comes from the kernel
//! through the tracer; the receiver's and sender's own getsockopt are recorded beside it.
use std::{process::Stdio, time::Duration};

use anyhow::{bail, Context, Result};
use tcpwin_model::{
    kind::EventKind,
    schema::{parse_trace, EventLine},
};

use crate::{
    harness::{check_stop, Tracer, Transfer},
    pair::Pair,
    rows::{AdvWinScaleRow, EndpointReport, HandshakeRow},
};

/// One condition's transfer, as the tracer and the endpoints saw it.
pub struct Row {
    pub cond: Condition,
    pub scaling_ratio: Option<u64>,
    /// the packet that set the settled ratio (`tcp_measure_rcv_mss`'s len and truesize)
    pub first_skb_len: Option<u64>,
    pub first_skb_truesize: Option<u64>,
    pub window_clamp: Option<u64>,
    pub sk_rcvbuf: Option<u64>,
    pub snd_wnd_peak: Option<u64>,
    pub throughput_bps: Option<u64>,
    pub init_rcv_wnd: Option<u64>,
    /// the receiver's own TCP_WINDOW_CLAMP, for cross-checking
    pub getsockopt_window_clamp: Option<u64>,
}

/// The experiment's rows, handshakes and tcp_adv_win_scale sweep, on kernel `kernel`.
pub struct LabResult {
    pub kernel: String,
    pub rows: Vec<Row>,
    pub handshake: Vec<HandshakeRow>,
    pub sysctl: Vec<AdvWinScaleRow>,
}

pub const PINNED: u32 = 1 << 20;
const SMALL_BUF: u32 = 64 << 10;
const PORT: u16 = 5401;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// `tcp_moderate_rcvbuf=0`, `tcp_rmem` pinned at 1 MiB in the receiver's namespace
    Pinned1m,
    /// autotuning with the default `tcp_rmem`
    Auto,
    /// the receiver sets `SO_RCVBUF` 64 KiB (autotuning off for the socket)
    SoRcvbuf64k,
}

impl Buffer {
    pub fn name(self) -> &'static str {
        match self {
            Buffer::Pinned1m => "pinned-1m",
            Buffer::Auto => "auto",
            Buffer::SoRcvbuf64k => "so_rcvbuf-64k",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Condition {
    pub mtu: u32,
    pub gro: bool,
    pub tso: bool,
    pub buffer: Buffer,
}

const fn c(mtu: u32, gro: bool, tso: bool, buffer: Buffer) -> Condition {
    Condition {
        mtu,
        gro,
        tso,
        buffer,
    }
}

/// The main contrasts in well under a minute.
pub const QUICK: [Condition; 7] = [
    c(1500, false, false, Buffer::Pinned1m),
    c(1500, true, false, Buffer::Pinned1m),
    c(1500, false, true, Buffer::Pinned1m),
    c(9000, false, false, Buffer::Pinned1m),
    c(9000, true, false, Buffer::Pinned1m),
    c(1500, false, false, Buffer::SoRcvbuf64k),
    c(1500, true, true, Buffer::Auto),
];

pub fn full() -> Vec<Condition> {
    let mut v = Vec::new();
    for buffer in [Buffer::Pinned1m, Buffer::Auto, Buffer::SoRcvbuf64k] {
        for mtu in [1500, 9000] {
            for gro in [false, true] {
                for tso in [false, true] {
                    v.push(c(mtu, gro, tso, buffer));
                }
            }
        }
    }
    v
}

/// `tcp_adv_win_scale` values swept (the documented range is -31..31).
pub const ADV_WIN_SCALES: [i32; 7] = [-31, -2, 0, 1, 2, 4, 31];

fn apply_buffer(pair: &Pair, b: Buffer) -> Result<()> {
    match b {
        Buffer::Pinned1m => pair.pin_receiver_buffer(PINNED),
        Buffer::Auto | Buffer::SoRcvbuf64k => {
            Pair::sysctl(&pair.b, "net.ipv4.tcp_moderate_rcvbuf", "1")?;
            Pair::sysctl(&pair.b, "net.ipv4.tcp_rmem", "4096 131072 6291456")
        }
    }
}

/// What one transfer produced: the receiver's and sender's own reports.
pub struct Done {
    pub receiver: EndpointReport,
    pub sender: EndpointReport,
}

fn transfer(pair: &Pair, exe: &std::path::Path, bytes: u64, rcvbuf: Option<u32>) -> Result<Done> {
    let t = Transfer {
        exe: exe.to_path_buf(),
        pair,
        port: PORT,
        bytes,
        conns: 1,
        ipv6: false,
        rcvbuf,
        timeout: Duration::from_secs(90),
        send: Default::default(),
    };
    let (rx, tx) = t.run_both(true)?;
    Ok(Done {
        receiver: rx
            .into_iter()
            .next()
            .context("the receiver reported nothing")?,
        sender: tx
            .into_iter()
            .next()
            .context("the sender reported nothing")?,
    })
}

pub struct LabOpts {
    pub full: bool,
    pub json: bool,
    pub bytes: u64,
}

/// The experiment's transfers in `pair`, traced by the tracer at `exe`, on the kernel
/// `kernel` (its release, for the tables).
pub fn run_in(
    pair: &Pair,
    exe: &std::path::Path,
    opts: &LabOpts,
    kernel: String,
) -> Result<LabResult> {
    let conditions = if opts.full { full() } else { QUICK.to_vec() };
    let tracer = Tracer::start(
        exe,
        &["--json", "--netns", "all", "--port", &PORT.to_string()],
        Stdio::piped(),
        Duration::from_secs(60),
    )?;
    let mut matrix = Vec::new();
    for cond in &conditions {
        check_stop()?;
        pair.set_mtu(cond.mtu)?;
        pair.set_offloads(cond.tso, cond.gro)?;
        apply_buffer(pair, cond.buffer)?;
        let rcvbuf = (cond.buffer == Buffer::SoRcvbuf64k).then_some(SMALL_BUF);
        let done = transfer(pair, exe, opts.bytes, rcvbuf)
            .with_context(|| format!("transfer for {cond:?}"))?;
        if !opts.json {
            eprintln!(
                "lab: MTU {} GRO {} TSO {} {}: done",
                cond.mtu,
                on(cond.gro),
                on(cond.tso),
                cond.buffer.name()
            );
        }
        matrix.push((*cond, done));
    }
    // The SYN-ACK window for a 64 KiB buffer (article 004's quantization table), and whether
    // tcp_adv_win_scale changes it.
    pair.set_offloads(false, false)?;
    Pair::sysctl(&pair.b, "net.ipv4.tcp_moderate_rcvbuf", "0")?;
    Pair::sysctl(
        &pair.b,
        "net.ipv4.tcp_rmem",
        &format!("4096 {SMALL_BUF} {SMALL_BUF}"),
    )?;
    let mut handshakes = Vec::new();
    for mtu in [1500, 9000] {
        check_stop()?;
        pair.set_mtu(mtu)?;
        handshakes.push((mtu, transfer(pair, exe, 64 << 10, None)?));
    }
    pair.set_mtu(1500)?;
    let original = Pair::read_sysctl(&pair.b, "net.ipv4.tcp_adv_win_scale")?;
    let mut sweep = Vec::new();
    for n in ADV_WIN_SCALES {
        check_stop()?;
        Pair::sysctl(&pair.b, "net.ipv4.tcp_adv_win_scale", &n.to_string())?;
        sweep.push((n, transfer(pair, exe, 64 << 10, None)?));
    }
    Pair::sysctl(&pair.b, "net.ipv4.tcp_adv_win_scale", &original)?;
    std::thread::sleep(Duration::from_millis(300));
    let (status, out, stderr) = tracer.stop(Duration::from_secs(30))?;
    if !status.success() {
        bail!("the tracer failed: {}", stderr.join("\n"));
    }
    let tcpwin_model::schema::Trace {
        events, summary, ..
    } = parse_trace(&out).context("the tracer's output")?;
    if summary.events_lost > 0 {
        eprintln!(
            "lab: WARNING: the tracer lost {} events: some rows may be incomplete",
            summary.events_lost
        );
    }
    let of = |cookie: u64| -> Vec<&EventLine> {
        events
            .iter()
            .filter(|e| e.id.cookie == Some(cookie))
            .collect()
    };
    let rows = matrix
        .iter()
        .map(|(cond, d)| Row::from_events(*cond, &of(d.receiver.cookie), d))
        .collect();
    let init_wnd = |d: &Done| -> Option<u64> {
        of(d.receiver.cookie)
            .iter()
            .find(|e| e.event == EventKind::Init)
            .map(|e| e.rcv_wnd as u64)
    };
    let handshake = handshakes
        .iter()
        .map(|(mtu, d)| HandshakeRow {
            mtu: *mtu,
            rcvbuf: SMALL_BUF as u64,
            advmss: Some(d.receiver.advmss as u64),
            syn_ack_window: init_wnd(d),
        })
        .collect();
    let sysctl = sweep
        .iter()
        .map(|(n, d)| AdvWinScaleRow {
            tcp_adv_win_scale: *n,
            syn_ack_window: init_wnd(d),
            window_clamp: Some(d.receiver.window_clamp as u64),
        })
        .collect();
    Ok(LabResult {
        kernel,
        rows,
        handshake,
        sysctl,
    })
}

pub fn on(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

impl Row {
    fn from_events(cond: Condition, events: &[&EventLine], d: &Done) -> Row {
        let setter = events
            .iter()
            .rfind(|e| e.event == EventKind::Ratio)
            .and_then(|e| e.cause.as_ref());
        let last = events.last();
        Row {
            cond,
            scaling_ratio: last.and_then(|e| e.scaling_ratio).map(u64::from),
            first_skb_len: setter.and_then(|c| c.skb_len).map(u64::from),
            first_skb_truesize: setter.and_then(|c| c.skb_truesize).map(u64::from),
            window_clamp: last.map(|e| e.window_clamp as u64),
            sk_rcvbuf: last.map(|e| e.sk_rcvbuf as u64),
            snd_wnd_peak: d.sender.snd_wnd_peak.map(u64::from),
            throughput_bps: d.sender.throughput_bps,
            init_rcv_wnd: events
                .iter()
                .find(|e| e.event == EventKind::Init)
                .map(|e| e.rcv_wnd as u64),
            getsockopt_window_clamp: Some(d.receiver.window_clamp as u64),
        }
    }
}
