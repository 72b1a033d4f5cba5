//! The product's readings as the lab takes them: one socket iterator loaded for the lab's
//! runs, read as `ss` reads (`gather::snapshot`), and the `--peer` client.
use anyhow::{Context, Result};
use tcpwin_lab::readings::{PeerClient, Readings};
use tcpwin_model::facts::Seen;

use crate::{
    gather::{peer::Peers, scope::Scope, snapshot},
    host::netns,
    kernel::{iter::SocketIter, Kernel},
};

/// The iterator the lab reads with, and the kernel's tick rate its facts need.
pub struct Product {
    source: snapshot::Source,
    hz: Option<u32>,
}

impl Product {
    /// The socket iterator, loaded with this kernel's BTF and the built-in object.
    pub fn load() -> Result<Product> {
        let kernel = Kernel::default();
        Ok(Product {
            source: snapshot::Source::Iterator(Box::new(SocketIter::load(&kernel)?)),
            hz: kernel.hz(),
        })
    }
}

impl Readings for Product {
    fn read(&mut self, namespaces: &[&str], port: u16) -> Result<Vec<Seen>> {
        let filter = Scope {
            port: Some(port),
            ..Scope::default()
        };
        let mut targets = Vec::new();
        for ns in namespaces {
            targets.extend(netns::resolve(Some(ns))?);
        }
        snapshot::read(&mut self.source, &targets, &filter, self.hz)
    }

    fn peer(&self, url: &str) -> Result<Box<dyn PeerClient>> {
        let peers = Peers::new(&[url.to_string()], None)?.context("a peer")?;
        Ok(Box::new(peers))
    }
}

impl PeerClient for Peers {
    fn read(&mut self, local: &[Seen], port: u16) -> Vec<Seen> {
        Peers::read(self, local, Some(port))
    }

    fn news(&mut self) -> Vec<String> {
        Peers::news(self)
    }
}
