//! What the lab asks of the product: its readings of sockets, taken as a user's `ss` takes
//! them, and its client of another host's exporter (`--peer`). The product hands the lab an
//! implementation; the lab judges what it reads with the model's judge.
use anyhow::Result;
use tcpwin_model::facts::Seen;

/// The product's readings, as the lab's runs take them.
pub trait Readings {
    /// One reading of the sockets of `port` in the namespaces named (both ends of a lab path),
    /// each with its namespace's limits.
    fn read(&mut self, namespaces: &[&str], port: u16) -> Result<Vec<Seen>>;

    /// A client of the exporter at `url`, asked from the thread that calls it (the lab asks
    /// from inside an end's namespace).
    fn peer(&self, url: &str) -> Result<Box<dyn PeerClient>>;
}

/// A client of another host's exporter: the other ends of this host's connections.
pub trait PeerClient: Send {
    /// The peer's ends of `local`'s connections of `port`, as sockets of this reading.
    fn read(&mut self, local: &[Seen], port: u16) -> Vec<Seen>;

    /// What the client has to say since it was last asked (a peer that did not answer, a
    /// connection it could not match).
    fn news(&mut self) -> Vec<String>;
}
