//! Interface names for `(netns, ifindex)` pairs (the packet histogram's keys), listed through
//! rtnetlink in that namespace: the tracer's own as `NAME`, a named one (`ip netns`) as
//! `NAME@NETNS`; one the tool cannot see or enter as `ifINDEX@netnsINODE`.
use std::collections::HashMap;

use super::{netdev, netns};

#[derive(Default)]
pub struct IfNames {
    cache: HashMap<(u32, u32), String>,
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

    fn load(&mut self, inode: u32) {
        let own = netns::own().ok().filter(|n| n.inode as u32 == inode);
        let Some(ns) = own.or_else(|| netns::named().into_iter().find(|n| n.inode as u32 == inode))
        else {
            return;
        };
        let Ok(_inside) = netns::enter(&ns) else {
            return;
        };
        let Ok(links) = netdev::names() else {
            return;
        };
        for (idx, name) in links {
            let shown = if ns.name == "-" {
                name
            } else {
                format!("{name}@{}", ns.name)
            };
            self.cache.insert((inode, idx), shown);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_in_own_namespace() {
        let mut n = IfNames::default();
        let ns = netns::own().unwrap().inode as u32;
        assert_eq!(n.name(ns, 1), "lo");
        assert_eq!(n.name(ns, 0), "unknown-if");
        assert_eq!(n.name(ns, 999_999), format!("if999999@netns{ns}"));
    }

    /// A named namespace's interfaces are listed inside it: its loopback (index 1 in every
    /// namespace) is named with the namespace's name. Needs root (the gate runs as root).
    #[test]
    fn loopback_in_a_named_namespace() {
        let name = format!("tcpwin-ifname-{}", std::process::id());
        let ok = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip netns add {name}: this test needs root");
        struct Gone(String);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::process::Command::new("ip")
                    .args(["netns", "del", &self.0])
                    .status();
            }
        }
        let _gone = Gone(name.clone());
        let ns = netns::named().into_iter().find(|n| n.name == name).unwrap();
        let mut n = IfNames::default();
        assert_eq!(n.name(ns.inode as u32, 1), format!("lo@{name}"));
    }
}
