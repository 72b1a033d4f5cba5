//! `tcpwin-trace demo`: the same 1 MiB receive buffer, two packet shapes, a different window.
//! Two namespaces joined by veth (removed at the end, also on error), the receiver buffer pinned
//! at 1 MiB, one transfer with every offload off and one with receiver GRO on; the tracer runs as
//! a child and prints its live lines and summary.
use std::{process::Stdio, time::Duration};

use anyhow::{Context, Result};

use tcpwin_lab::{
    harness::{Tracer, Transfer},
    pair::Pair,
};

use crate::kernel::object::check_privileges;

const PORT: u16 = 5299;
const BUF: u32 = 1 << 20;

pub fn run() -> Result<()> {
    check_privileges()?;
    let exe = std::env::current_exe().context("locating tcpwin-trace")?;
    let pair = Pair::create(&format!("tcpwin-demo-{}", std::process::id()), 1500)?;
    pair.pin_receiver_buffer(BUF)?;
    println!(
        "demo: namespaces {} -> {} over veth, MTU 1500, receiver buffer pinned at {BUF} bytes",
        pair.a, pair.b
    );
    let tracer = Tracer::start(
        &exe,
        &["--netns", "all", "--port", &PORT.to_string()],
        Stdio::inherit(),
        Duration::from_secs(60),
    )?;
    for (n, (label, tso, gro)) in [
        ("all offloads off (1448-byte packets)", false, false),
        ("receiver GRO on (aggregated packets)", false, true),
    ]
    .into_iter()
    .enumerate()
    {
        pair.set_offloads(tso, gro)?;
        println!("\ndemo: transfer {}: {label}", n + 1);
        let truths = Transfer {
            exe: exe.clone(),
            pair: &pair,
            port: PORT,
            bytes: 32 << 20,
            conns: 1,
            ipv6: false,
            rcvbuf: None,
            timeout: Duration::from_secs(60),
            send: Default::default(),
        }
        .run()?;
        for t in truths {
            println!(
                "demo: receiver's getsockopt: TCP_WINDOW_CLAMP={} tcpi_rcv_ssthresh={} cookie={:x} -> window/buffer = {:.1}%",
                t.window_clamp, t.rcv_ssthresh, t.cookie,
                t.window_clamp as f64 * 100.0 / BUF as f64
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let (status, _, _) = tracer.stop(Duration::from_secs(20))?;
    println!(
        "\ndemo: same buffer, different packet shape, different window: scaling_ratio = skb->len*256/truesize of the first data packets (tracer exit: {status})"
    );
    Ok(())
}
