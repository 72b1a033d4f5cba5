//! The exporter's HTTP server counting itself (responses, refused credentials, the time spent
//! checking passwords, connections open and dropped), shared by its tasks, published at each
//! scrape as `tcpwin_http_*`.
use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        Mutex,
    },
    time::Duration,
};

use crate::ui::openmetrics::HttpCounts;

#[derive(Default)]
pub struct Stats {
    responses: Mutex<BTreeMap<u16, u64>>,
    auth_failures: Mutex<BTreeMap<&'static str, u64>>,
    dropped: Mutex<BTreeMap<&'static str, u64>>,
    checks: AtomicU64,
    check_ns: AtomicU64,
    connections: AtomicU64,
}

fn bump<K: Ord>(m: &Mutex<BTreeMap<K, u64>>, k: K) {
    *m.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(k)
        .or_default() += 1;
}

impl Stats {
    pub fn response(&self, code: u16) {
        bump(&self.responses, code);
    }

    pub fn auth_failure(&self, reason: &'static str) {
        bump(&self.auth_failures, reason);
    }

    /// A connection closed before it asked anything: `evicted`, `rate`, `tls_handshake`,
    /// `header_timeout`.
    pub fn dropped(&self, why: &'static str) {
        bump(&self.dropped, why);
    }

    pub fn add_check(&self, took: Duration) {
        self.checks.fetch_add(1, Relaxed);
        self.check_ns.fetch_add(took.as_nanos() as u64, Relaxed);
    }

    pub fn checks(&self) -> u64 {
        self.checks.load(Relaxed)
    }

    pub fn check_seconds(&self) -> f64 {
        self.check_ns.load(Relaxed) as f64 / 1e9
    }

    pub fn opened(&self) {
        self.connections.fetch_add(1, Relaxed);
    }

    pub fn closed(&self) {
        self.connections.fetch_sub(1, Relaxed);
    }

    pub fn counts(&self) -> HttpCounts {
        HttpCounts {
            responses: self.responses.lock().map(|m| m.clone()).unwrap_or_default(),
            auth_failures: self
                .auth_failures
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            auth_checks: self.checks(),
            auth_check_seconds: self.check_seconds(),
            connections: self.connections.load(Relaxed),
            dropped: self.dropped.lock().map(|m| m.clone()).unwrap_or_default(),
        }
    }
}
