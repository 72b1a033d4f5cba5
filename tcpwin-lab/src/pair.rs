//! Two network namespaces joined by a veth pair, or by a path namespace that delays and limits
//! what crosses it (a WAN: `Pair::create_wan`); removed on drop (also when a test panics).
//! Used by the lab, the demo, the end-to-end tests and the bench.
use std::{
    process::{Command, Output},
    time::Duration,
};

use anyhow::{bail, Context, Result};

use crate::delay::{Bottleneck, DelayLine, Impair, Totals};

/// The path namespace of a WAN pair: its delay line and bottleneck.
pub struct WanPath {
    pub ns: String,
    pub rtt: Duration,
    pub rate_bps: Option<u64>,
    line: Option<DelayLine>,
}

impl WanPath {
    /// What the delay line forwarded and lost so far.
    pub fn totals(&self) -> Totals {
        self.line.as_ref().map(|l| l.totals()).unwrap_or_default()
    }

    pub fn reset(&self) {
        if let Some(l) = &self.line {
            l.reset()
        }
    }
}

/// The highest rate the delay line holds on this machine kind (2 vCPUs, measured at 18 ms):
/// 1 Gbit/s through it gives 956 Mbit/s with frames at most ~1 ms late; at 1.2 Gbit/s frames
/// leave up to 8 ms late. Faster paths are refused: they would measure the forwarder.
pub const WAN_MAX_RATE: u64 = 1_000_000_000;
/// The delay line's timer works in microseconds, its precision is tens of them: below 2 ms of
/// RTT the delay would be mostly error; above 2 s the queues would hold too much.
pub const WAN_RTT_RANGE: (Duration, Duration) = (Duration::from_millis(2), Duration::from_secs(2));

pub struct Pair {
    /// sender side namespace ("a") and receiver side ("b")
    pub a: String,
    pub b: String,
    /// with `create_wan`: the path between them
    pub path: Option<WanPath>,
    pub dev_a: &'static str,
    pub dev_b: &'static str,
    pub ip_a: &'static str,
    pub ip_b: &'static str,
    pub ip6_a: &'static str,
    pub ip6_b: &'static str,
}

fn run(cmd: &mut Command) -> Result<Output> {
    let desc = format!("{cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {desc} (is iproute2 installed?)"))?;
    if !out.status.success() {
        bail!(
            "{desc} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

pub fn ip(args: &[&str]) -> Result<Output> {
    run(Command::new("ip").args(args))
}

fn exists(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

/// Creates these namespaces, refusing (before creating any) if a name is taken.
fn add_namespaces(names: &[&String]) -> Result<()> {
    if let Some(n) = names.iter().find(|n| exists(n)) {
        bail!("network namespace {n} already exists: remove it (`ip netns del {n}`) or choose another name");
    }
    for n in names {
        ip(&["netns", "add", n]).context("creating a network namespace needs root")?;
    }
    Ok(())
}

impl Pair {
    /// The pair's names and addresses (`<prefix>-a`, `<prefix>-b`), nothing created yet.
    fn named(prefix: &str, path: Option<WanPath>) -> Pair {
        Pair {
            a: format!("{prefix}-a"),
            b: format!("{prefix}-b"),
            dev_a: "veth-a",
            dev_b: "veth-b",
            ip_a: "10.248.0.1",
            ip_b: "10.248.0.2",
            ip6_a: "fd00:248::1",
            ip6_b: "fd00:248::2",
            path,
        }
    }

    /// Creates `<prefix>-a` and `<prefix>-b`. Refuses if either name is taken.
    pub fn create(prefix: &str, mtu: u32) -> Result<Pair> {
        let p = Pair::named(prefix, None);
        // From here on, Drop removes whatever was created.
        add_namespaces(&[&p.a, &p.b])?;
        ip(&[
            "-n", &p.a, "link", "add", p.dev_a, "type", "veth", "peer", "name", p.dev_b, "netns",
            &p.b,
        ])?;
        p.address_endpoints(mtu, &[])?;
        Ok(p)
    }

    /// A second link between the two ends, beside the path (no delay, no bottleneck): a
    /// management network, as monitoring is best reached. Returns the two ends' addresses on it
    /// (removed with the namespaces).
    pub fn management_link(&self) -> Result<(&'static str, &'static str)> {
        let (a, b) = ("10.249.0.1", "10.249.0.2");
        ip(&[
            "-n", &self.a, "link", "add", "mgmt-a", "type", "veth", "peer", "name", "mgmt-b",
            "netns", &self.b,
        ])?;
        for (ns, dev, addr) in [(&self.a, "mgmt-a", a), (&self.b, "mgmt-b", b)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok((a, b))
    }

    /// MTU, addresses and links up on both endpoints, with these offloads off first.
    fn address_endpoints(&self, mtu: u32, offloads_off: &[&str]) -> Result<()> {
        for (ns, dev, v4, v6) in [
            (&self.a, self.dev_a, self.ip_a, self.ip6_a),
            (&self.b, self.dev_b, self.ip_b, self.ip6_b),
        ] {
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu.to_string()])?;
            ip(&["-n", ns, "addr", "add", &format!("{v4}/24"), "dev", dev])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{v6}/64"),
                "dev",
                dev,
                "nodad",
            ])?;
            for f in offloads_off {
                Self::offload(ns, dev, f, false)?;
            }
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    pub fn set_mtu(&self, mtu: u32) -> Result<()> {
        ip(&[
            "-n",
            &self.a,
            "link",
            "set",
            self.dev_a,
            "mtu",
            &mtu.to_string(),
        ])?;
        ip(&[
            "-n",
            &self.b,
            "link",
            "set",
            self.dev_b,
            "mtu",
            &mtu.to_string(),
        ])?;
        Ok(())
    }

    /// A command run inside a namespace (the mounts kept: `/sys` is the host's).
    pub fn exec(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        tcpwin_common::netns::command_named(ns, program)
    }

    /// `ethtool -K` inside a namespace.
    pub fn offload(ns: &str, dev: &str, feature: &str, on: bool) -> Result<()> {
        run(Self::exec(ns, "ethtool").args(["-K", dev, feature, if on { "on" } else { "off" }]))
            .with_context(|| format!("ethtool -K {dev} {feature} (apt-get install ethtool)"))?;
        Ok(())
    }

    /// Receiver GRO. Behind a delay line the receiver's veth also polls in a thread of its own
    /// (threaded NAPI), so frames the line sends together are polled, and merged, together, as
    /// a NIC's interrupt coalescing would hand them over; with softirq polling each frame would
    /// be polled alone and GRO would merge nothing.
    pub fn set_receiver_gro(&self, on: bool) -> Result<()> {
        Self::offload(&self.b, self.dev_b, "gro", on)?;
        if on {
            self.threaded_napi()?;
        }
        Ok(())
    }

    /// Behind a delay line, the receiver's veth polls in a thread of its own (threaded NAPI, which
    /// veth has only with GRO on): frames the line sends together are polled, and merged,
    /// together, as a NIC's interrupt coalescing would hand them over. Also what makes a GRO
    /// turned on later (a printed fix) merge as a NIC's would.
    pub fn threaded_napi(&self) -> Result<()> {
        if self.path.is_some() {
            // the one write that needs the namespace's own sysfs (its devices): `ip netns exec`
            // mounts one for the program
            run(Command::new("ip")
                .args(["netns", "exec", &self.b, "sh"])
                .args([
                    "-c",
                    &format!("echo 1 > /sys/class/net/{}/threaded", self.dev_b),
                ]))
            .context("threaded NAPI on the receiver's veth")?;
        }
        Ok(())
    }

    /// Sender TSO/GSO and receiver GRO.
    pub fn set_offloads(&self, sender_tso: bool, receiver_gro: bool) -> Result<()> {
        Self::offload(&self.a, self.dev_a, "tso", sender_tso)?;
        Self::offload(&self.a, self.dev_a, "gso", sender_tso)?;
        Self::offload(&self.b, self.dev_b, "gro", receiver_gro)?;
        Ok(())
    }

    /// `sysctl -w` inside a namespace (net.ipv4.* is per namespace).
    pub fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
        let path = crate::sysctl::path_of(key);
        run(Self::exec(ns, "sh").args(["-c", &format!("echo '{value}' > {path}")]))?;
        Ok(())
    }

    pub fn read_sysctl(ns: &str, key: &str) -> Result<String> {
        let path = crate::sysctl::path_of(key);
        let out = run(Self::exec(ns, "cat").arg(path))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Receiver buffer pinned: no autotuning, `tcp_rmem` max = default = `bytes`.
    pub fn pin_receiver_buffer(&self, bytes: u32) -> Result<()> {
        Self::sysctl(&self.b, "net.ipv4.tcp_moderate_rcvbuf", "0")?;
        Self::sysctl(
            &self.b,
            "net.ipv4.tcp_rmem",
            &format!("4096 {bytes} {bytes}"),
        )?;
        Ok(())
    }
}

impl Pair {
    /// Sender `<prefix>-a`, path `<prefix>-p`, receiver `<prefix>-b`: the path namespace forwards
    /// frames between its two interfaces after `rtt / 2` in each direction; with `rate_bps`, a
    /// tbf on the sender's egress is the bottleneck. The endpoints' transmit checksum offload and
    /// TSO are off (a frame forwarded with a partial checksum would be dropped); the path's GRO,
    /// TSO and GSO are off; the receiver's GRO is left on (the lab sets it).
    pub fn create_wan(
        prefix: &str,
        mtu: u32,
        rtt: Duration,
        rate_bps: Option<u64>,
    ) -> Result<Pair> {
        Self::create_wan_with(prefix, mtu, rtt, rate_bps, None)
    }

    /// As [`Pair::create_wan`], with `queue`: the bottleneck inside the path instead of on the
    /// sender, holding this many bytes (a deep queue: the RTT grows with it) and dropping beyond.
    pub fn create_wan_with(
        prefix: &str,
        mtu: u32,
        rtt: Duration,
        rate_bps: Option<u64>,
        queue: Option<u64>,
    ) -> Result<Pair> {
        Self::create_wan_lossy(prefix, mtu, rtt, rate_bps, queue, 0)
    }

    /// As [`Pair::create_wan_with`], losing `loss_ppm` per million of the frames towards the
    /// receiver at random (a lossy link; counted apart from the line's own drops).
    pub fn create_wan_lossy(
        prefix: &str,
        mtu: u32,
        rtt: Duration,
        rate_bps: Option<u64>,
        queue: Option<u64>,
        loss_ppm: u32,
    ) -> Result<Pair> {
        if rtt < WAN_RTT_RANGE.0 || rtt > WAN_RTT_RANGE.1 {
            bail!(
                "rtt {rtt:?}: the delay line holds RTTs between {:?} and {:?} on this machine",
                WAN_RTT_RANGE.0,
                WAN_RTT_RANGE.1
            );
        }
        if rate_bps.is_some_and(|r| r > WAN_MAX_RATE) {
            bail!(
                "rate {} bit/s: the delay line carries at most {WAN_MAX_RATE} bit/s on this machine kind (2 vCPUs); a faster path would measure the forwarder, not the window",
                rate_bps.unwrap_or(0)
            );
        }
        let p_ns = format!("{prefix}-p");
        let mut p = Pair::named(
            prefix,
            Some(WanPath {
                ns: p_ns.clone(),
                rtt,
                rate_bps,
                line: None,
            }),
        );
        // From here on, Drop removes whatever was created.
        add_namespaces(&[&p.a, &p_ns, &p.b])?;
        ip(&[
            "-n", &p.a, "link", "add", p.dev_a, "type", "veth", "peer", "name", "pa", "netns",
            &p_ns,
        ])?;
        ip(&[
            "-n", &p.b, "link", "add", p.dev_b, "type", "veth", "peer", "name", "pb", "netns",
            &p_ns,
        ])?;
        p.address_endpoints(mtu, &["tx", "tso"])?;
        Self::sysctl(&p_ns, "net.ipv6.conf.all.disable_ipv6", "1")?;
        for dev in ["pa", "pb"] {
            ip(&["-n", &p_ns, "link", "set", dev, "mtu", &mtu.to_string()])?;
            for f in ["gro", "tso", "gso"] {
                Self::offload(&p_ns, dev, f, false)?;
            }
            ip(&["-n", &p_ns, "link", "set", dev, "up"])?;
        }
        let one_way = rtt / 2;
        let mut queue_limit = 4 << 20;
        let in_path = rate_bps
            .zip(queue)
            .map(|(rate_bps, queue_bytes)| Bottleneck {
                rate_bps,
                queue_bytes,
            });
        if let (Some(r), None) = (rate_bps, in_path) {
            // The bottleneck is the sender's own egress: a tbf whose queue TCP small queues keep
            // short (the sender's TCP waits instead of losing packets). At the path's egress the
            // TX ring would retry what the qdisc refuses (tpacket_snd re-queues a dropped frame),
            // so drops there would stall the line instead of acting as losses.
            let bdp = (r as f64 * rtt.as_secs_f64() / 8.0) as u64;
            let burst = (r / 8 / 250).max(128 << 10);
            run(Self::exec(&p.a, "tc").args([
                "qdisc",
                "add",
                "dev",
                p.dev_a,
                "root",
                "tbf",
                "rate",
                &format!("{r}bit"),
                "burst",
                &burst.to_string(),
                "limit",
                &bdp.max(256 << 10).to_string(),
            ]))
            .context("tc qdisc add tbf (iproute2)")?;
        }
        // what can be in flight one way at the fastest rate, twice over
        let in_flight = (WAN_MAX_RATE as f64 * one_way.as_secs_f64() / 8.0) as usize;
        queue_limit = queue_limit.max(2 * in_flight);
        let line = DelayLine::start(
            &std::path::Path::new("/run/netns").join(&p_ns),
            "pa",
            "pb",
            one_way,
            queue_limit,
            mtu,
            Impair {
                bottleneck: in_path,
                loss_ppm,
            },
        )?;
        if let Some(w) = p.path.as_mut() {
            w.line = Some(line);
        }
        Ok(p)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // the delay line's threads first: they hold sockets in the path namespace
        if let Some(mut w) = self.path.take() {
            drop(w.line.take());
            if exists(&w.ns) {
                let _ = Command::new("ip").args(["netns", "del", &w.ns]).output();
            }
        }
        for n in [&self.a, &self.b] {
            if exists(n) {
                let _ = Command::new("ip").args(["netns", "del", n]).output();
            }
        }
    }
}

/// Runs `f` on a thread inside the named namespace `ns` (sockets it opens live there); for tests
/// and the bench.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let file = std::fs::File::open(tcpwin_common::netns::path_of(ns))
        .unwrap_or_else(|e| panic!("namespace {ns}: {e}"));
    std::thread::spawn(move || {
        if let Err(e) = tcpwin_common::netns::enter_thread(&file) {
            panic!("setns: {e}");
        }
        f()
    })
}
