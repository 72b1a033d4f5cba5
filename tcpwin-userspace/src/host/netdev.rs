//! Network interfaces through netlink: MTU and XDP from rtnetlink, offload features (GRO, LRO,
//! TSO, GSO) from ethtool's generic netlink family. Read in the calling thread's network
//! namespace (the sockets are opened there).
use std::collections::BTreeMap;

use anyhow::{Context, Result};
use ethtool::{EthtoolAttr, EthtoolFeatureAttr, EthtoolHeader};
use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::{LinkAttribute, LinkXdp, XdpAttached};
use tcpwin_model::check::Iface;

/// ethtool's names of the features that shape packets on receive and send.
const FEATURES: [(&str, Feature); 4] = [
    ("rx-gro", Feature::Gro),
    ("rx-lro", Feature::Lro),
    ("tx-tcp-segmentation", Feature::Tso),
    ("tx-generic-segmentation", Feature::Gso),
];

#[derive(Clone, Copy)]
enum Feature {
    Gro,
    Lro,
    Tso,
    Gso,
}

fn set(i: &mut Iface, f: Feature, on: bool) {
    let slot = match f {
        Feature::Gro => &mut i.gro,
        Feature::Lro => &mut i.lro,
        Feature::Tso => &mut i.tso,
        Feature::Gso => &mut i.gso,
    };
    *slot = Some(on);
}

async fn links(by_name: &mut BTreeMap<String, Iface>) -> Result<()> {
    let (conn, handle, _) = rtnetlink::new_connection().context("rtnetlink socket")?;
    tokio::spawn(conn);
    let mut s = handle.link().get().execute();
    while let Some(msg) = s.try_next().await.context("listing links")? {
        let mut i = Iface {
            index: Some(msg.header.index),
            ..Iface::default()
        };
        for a in &msg.attributes {
            match a {
                LinkAttribute::IfName(n) => i.name = n.clone(),
                LinkAttribute::Mtu(m) => i.mtu = Some(*m),
                LinkAttribute::Xdp(x) => {
                    i.xdp = x.iter().find_map(|x| match x {
                        LinkXdp::Attached(a) => Some(*a != XdpAttached::None),
                        _ => None,
                    })
                }
                _ => {}
            }
        }
        by_name.insert(i.name.clone(), i);
    }
    Ok(())
}

async fn features(by_name: &mut BTreeMap<String, Iface>) -> Result<()> {
    let (conn, mut handle, _) = ethtool::new_connection().context("ethtool netlink socket")?;
    tokio::spawn(conn);
    let mut s = handle
        .feature()
        .get(None)
        .execute()
        .await
        .context("ethtool features")?;
    while let Some(msg) = s.try_next().await.context("ethtool features")? {
        let mut name = None;
        // the kernel lists the features that are on (without a mask, a listed bit is set)
        let mut active = None;
        for a in &msg.payload.nlas {
            if let EthtoolAttr::Feature(f) = a {
                match f {
                    EthtoolFeatureAttr::Header(h) => {
                        name = h.iter().find_map(|h| match h {
                            EthtoolHeader::DevName(n) => Some(n.clone()),
                            _ => None,
                        })
                    }
                    EthtoolFeatureAttr::Active(bits) => active = Some(bits.clone()),
                    _ => {}
                }
            }
        }
        let Some(i) = name.and_then(|n| by_name.get_mut(&n)) else {
            continue;
        };
        let Some(active) = active else {
            continue;
        };
        for (fname, f) in FEATURES {
            set(i, f, active.iter().any(|b| b.name == fname && b.value));
        }
    }
    Ok(())
}

/// `(ifindex, name)` of every interface of the calling thread's namespace.
pub fn names() -> Result<Vec<(u32, String)>> {
    super::netlink::exchange(|| async {
        let mut by_name = BTreeMap::new();
        links(&mut by_name).await?;
        Ok(by_name
            .into_values()
            .filter_map(|i| Some((i.index?, i.name)))
            .collect())
    })
}

/// Every interface of the calling thread's namespace. Features the kernel does not report stay
/// absent (e.g. without ethtool netlink, before 5.6). Callable from inside a runtime too (see
/// `netlink::exchange`).
pub fn interfaces() -> Result<Vec<Iface>> {
    super::netlink::exchange(|| async {
        let mut by_name = BTreeMap::new();
        links(&mut by_name).await?;
        if let Err(e) = features(&mut by_name).await {
            eprintln!("tcpwin-trace: interface offloads unknown ({e:#}): GRO/LRO/TSO/GSO reported as absent");
        }
        Ok(by_name.into_values().collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ground truth: loopback exists with its MTU as sysfs shows it.
    #[test]
    fn loopback_as_sysfs_says() {
        let v = interfaces().unwrap();
        let lo = v.iter().find(|i| i.name == "lo").expect("lo");
        let mtu: u32 = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(lo.mtu, Some(mtu));
    }

    /// The live trace reads interfaces from inside its runtime: no nested-runtime panic.
    #[test]
    fn readable_from_inside_a_runtime() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let v = rt.block_on(async { interfaces() }).unwrap();
        assert!(v.iter().any(|i| i.name == "lo"));
    }
}
