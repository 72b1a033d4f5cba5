//! Two network namespaces joined by a veth pair, removed on drop (also when a test panics).
//! Used by the demo and the end-to-end tests.
use std::process::{Command, Output};

use anyhow::{bail, Context, Result};

pub struct Pair {
    /// sender side namespace ("a") and receiver side ("b")
    pub a: String,
    pub b: String,
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

impl Pair {
    /// Creates `<prefix>-a` and `<prefix>-b`. Refuses if either name is taken.
    pub fn create(prefix: &str, mtu: u32) -> Result<Pair> {
        let p = Pair {
            a: format!("{prefix}-a"),
            b: format!("{prefix}-b"),
            dev_a: "veth-a",
            dev_b: "veth-b",
            ip_a: "10.248.0.1",
            ip_b: "10.248.0.2",
            ip6_a: "fd00:248::1",
            ip6_b: "fd00:248::2",
        };
        for n in [&p.a, &p.b] {
            if exists(n) {
                bail!("network namespace {n} already exists: remove it (`ip netns del {n}`) or choose another name");
            }
        }
        // From here on, Drop removes whatever was created.
        ip(&["netns", "add", &p.a]).context("creating a network namespace needs root")?;
        ip(&["netns", "add", &p.b])?;
        ip(&[
            "-n", &p.a, "link", "add", p.dev_a, "type", "veth", "peer", "name", p.dev_b, "netns",
            &p.b,
        ])?;
        for (ns, dev, v4, v6) in [
            (&p.a, p.dev_a, p.ip_a, p.ip6_a),
            (&p.b, p.dev_b, p.ip_b, p.ip6_b),
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
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(p)
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

    /// A command run inside a namespace.
    pub fn exec(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }

    /// `ethtool -K` inside a namespace.
    pub fn offload(ns: &str, dev: &str, feature: &str, on: bool) -> Result<()> {
        run(Self::exec(ns, "ethtool").args(["-K", dev, feature, if on { "on" } else { "off" }]))
            .with_context(|| format!("ethtool -K {dev} {feature} (apt-get install ethtool)"))?;
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
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        run(Self::exec(ns, "sh").args(["-c", &format!("echo '{value}' > {path}")]))?;
        Ok(())
    }

    pub fn read_sysctl(ns: &str, key: &str) -> Result<String> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
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

impl Drop for Pair {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            if exists(n) {
                let _ = Command::new("ip").args(["netns", "del", n]).output();
            }
        }
    }
}
