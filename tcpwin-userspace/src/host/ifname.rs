//! Interface names for `(netns, ifindex)` pairs: the tracer's own namespace from /sys/class/net,
//! named namespaces (`ip netns`) through `ip -n NAME link`.
use std::{collections::HashMap, fs, os::unix::fs::MetadataExt, process::Command};

#[derive(Default)]
pub struct IfNames {
    cache: HashMap<(u32, u32), String>,
}

fn own_netns() -> Option<u32> {
    fs::metadata("/proc/self/ns/net")
        .ok()
        .map(|m| m.ino() as u32)
}

/// `3: veth0@if2: <...>` lines from `ip -o link`.
pub fn parse_ip_link(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ": ");
            let idx = parts.next()?.trim().parse().ok()?;
            let name = parts.next()?.split('@').next()?.to_string();
            Some((idx, name))
        })
        .collect()
}

impl IfNames {
    pub fn name(&mut self, netns: u32, ifindex: u32) -> String {
        if ifindex == 0 {
            return "unknown-if".into();
        }
        if let Some(n) = self.cache.get(&(netns, ifindex)) {
            return n.clone();
        }
        self.load(netns);
        self.cache
            .get(&(netns, ifindex))
            .cloned()
            .unwrap_or_else(|| format!("if{ifindex}@netns{netns}"))
    }

    fn load(&mut self, netns: u32) {
        if Some(netns) == own_netns() {
            if let Ok(dir) = fs::read_dir("/sys/class/net") {
                for e in dir.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if let Ok(idx) = fs::read_to_string(e.path().join("ifindex")) {
                        if let Ok(idx) = idx.trim().parse() {
                            self.cache.insert((netns, idx), name);
                        }
                    }
                }
            }
            return;
        }
        let Ok(dir) = fs::read_dir("/run/netns") else {
            return;
        };
        for e in dir.flatten() {
            if e.metadata().ok().map(|m| m.ino() as u32) != Some(netns) {
                continue;
            }
            let ns = e.file_name().to_string_lossy().into_owned();
            if let Ok(out) = Command::new("ip").args(["-n", &ns, "-o", "link"]).output() {
                for (idx, name) in parse_ip_link(&String::from_utf8_lossy(&out.stdout)) {
                    self.cache.insert((netns, idx), format!("{name}@{ns}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_link_output() {
        let t = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue\n3: veth0@if2: <BROADCAST> mtu 1500\n";
        assert_eq!(
            parse_ip_link(t),
            vec![(1, "lo".to_string()), (3, "veth0".to_string())]
        );
    }

    #[test]
    fn loopback_in_own_namespace() {
        let mut n = IfNames::default();
        let ns = own_netns().unwrap();
        assert_eq!(n.name(ns, 1), "lo");
        assert_eq!(n.name(ns, 0), "unknown-if");
    }
}
