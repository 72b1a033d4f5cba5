//! Basic auth that the network cannot turn into a CPU weapon. bcrypt is slow on purpose (tens of
//! ms a check at cost 10), so a check is work an unauthenticated client makes the exporter do:
//! - credentials that passed are remembered (a Prometheus sends the same header every scrape);
//! - a header that failed is remembered too, for a minute: the same wrong password costs nothing;
//! - checks run one at a time, in arrival order, each source with at most one waiting (a second
//!   one from the same address is throttled without a check), and at most [`MAX_WAITING`] in all;
//! - after a check that failed the checker rests three times as long as the check took: failures
//!   cost at most a quarter of one core, however many clients send them;
//! - a refusal for wrong credentials is answered after [`FAIL_DELAY`] (as login programs delay a
//!   failed password), so a client that waits for its answer tries once a second.
//!
//! A scrape whose credentials are remembered never waits behind any of this.
use std::{
    collections::{HashMap, HashSet, VecDeque},
    net::IpAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use super::webconfig::WebConfig;
use tokio::sync::Semaphore;

use super::stats::Stats;

/// Checks waiting (or running) at once, over every source; beyond it a request is throttled.
pub const MAX_WAITING: usize = 16;
/// How long a failed header is remembered as failed.
const FAILED_FOR: Duration = Duration::from_secs(60);
/// Headers remembered: passed (a handful of scrapers) and failed (a flood's distinct guesses).
const MAX_PASSED: usize = 64;
const MAX_FAILED: usize = 1024;
/// After a failed check the checker rests this many times as long as the check took.
const REST: u32 = 3;
/// A refusal of wrong credentials is answered this long after the request arrived.
pub const FAIL_DELAY: Duration = Duration::from_secs(1);

/// What the credentials of a request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// no `Authorization: Basic` header
    Missing,
    /// checked (now or within the last minute) and wrong
    Wrong,
    /// not checked: its source already had a check waiting, or too many were waiting
    Throttled,
}

impl Outcome {
    /// The `reason` label of a failure.
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Outcome::Pass => None,
            Outcome::Missing => Some("missing"),
            Outcome::Wrong => Some("wrong"),
            Outcome::Throttled => Some("throttled"),
        }
    }
}

#[derive(Default)]
struct Memory {
    passed: HashSet<String>,
    failed: HashMap<String, Instant>,
    /// failed headers in the order they failed, to forget the oldest first
    failed_order: VecDeque<String>,
    /// sources with a check waiting or running
    pending: HashSet<IpAddr>,
}

impl Memory {
    fn remember_failed(&mut self, header: &str, now: Instant) {
        while self.failed.len() >= MAX_FAILED {
            match self.failed_order.pop_front() {
                Some(old) => {
                    self.failed.remove(&old);
                }
                None => break,
            }
        }
        if self.failed.insert(header.to_string(), now).is_none() {
            self.failed_order.push_back(header.to_string());
        }
    }

    fn failed_recently(&mut self, header: &str, now: Instant) -> bool {
        match self.failed.get(header) {
            Some(at) if now.duration_since(*at) < FAILED_FOR => true,
            Some(_) => {
                self.failed.remove(header);
                self.failed_order.retain(|h| h != header);
                false
            }
            None => false,
        }
    }
}

pub struct Guard {
    web: Arc<WebConfig>,
    memory: Mutex<Memory>,
    /// one check at a time (tokio's semaphore is fair: first come, first checked)
    checker: Arc<Semaphore>,
    stats: Arc<Stats>,
}

impl Guard {
    pub fn new(web: Arc<WebConfig>, stats: Arc<Stats>) -> Guard {
        Guard {
            web,
            memory: Mutex::default(),
            checker: Arc::new(Semaphore::new(1)),
            stats,
        }
    }

    /// Whether basic auth is asked at all.
    pub fn enabled(&self) -> bool {
        !self.web.basic_auth_users.is_empty()
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        // a panic while holding it leaves plain sets behind: still usable
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides on a request's `Authorization` header from `source`.
    pub async fn check(self: &Arc<Self>, source: IpAddr, authorization: Option<&str>) -> Outcome {
        if !self.enabled() {
            return Outcome::Pass;
        }
        let Some(header) = authorization.filter(|h| h.trim_start().starts_with("Basic ")) else {
            return Outcome::Missing;
        };
        {
            let now = Instant::now();
            let mut m = self.memory();
            if m.passed.contains(header) {
                return Outcome::Pass;
            }
            if m.failed_recently(header, now) {
                return Outcome::Wrong;
            }
            if m.pending.contains(&source) || m.pending.len() >= MAX_WAITING {
                return Outcome::Throttled;
            }
            m.pending.insert(source);
        }
        // the check runs as a task of its own: a client that leaves while it waits does not
        // cancel it, so its source stays pending and the checker busy until bcrypt and the rest
        // are over (a dropped wait must not let the next check start beside a running one)
        let (me, header) = (self.clone(), header.to_string());
        let check = tokio::spawn(async move {
            let _leave = Leave(me.clone(), source);
            let Ok(_permit) = me.checker.clone().acquire_owned().await else {
                return false;
            };
            let (web, h) = (me.web.clone(), header.clone());
            let t0 = Instant::now();
            // bcrypt on a blocking thread: the server's own thread keeps serving
            let ok = tokio::task::spawn_blocking(move || web.allows(Some(&h)))
                .await
                .unwrap_or(false);
            let took = t0.elapsed();
            me.stats.add_check(took);
            {
                let mut m = me.memory();
                if ok {
                    if m.passed.len() >= MAX_PASSED {
                        m.passed.clear();
                    }
                    m.passed.insert(header);
                    return true;
                }
                m.remember_failed(&header, Instant::now());
            }
            // the checker rests three times as long as the failed check took, the permit held:
            // failures get at most a quarter of one core
            tokio::time::sleep(took * REST).await;
            false
        });
        match check.await {
            Ok(true) => Outcome::Pass,
            Ok(false) => Outcome::Wrong,
            Err(_) => Outcome::Throttled,
        }
    }
}

/// Takes a source out of the pending set when its check is over, however it ends.
struct Leave(Arc<Guard>, IpAddr);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.memory().pending.remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use std::collections::BTreeMap;

    fn header(u: &str, p: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
        )
    }

    fn guard() -> (Arc<Guard>, Arc<Stats>) {
        let web = WebConfig {
            tls_server_config: None,
            basic_auth_users: BTreeMap::from([(
                "prometheus".to_string(),
                bcrypt::hash("s3cret", 4).unwrap(),
            )]),
        };
        let stats = Arc::new(Stats::default());
        (Arc::new(Guard::new(Arc::new(web), stats.clone())), stats)
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn remembered_headers_cost_no_check() {
        let (g, stats) = guard();
        rt().block_on(async {
            assert_eq!(g.check(A, None).await, Outcome::Missing);
            assert_eq!(g.check(A, Some("Bearer x")).await, Outcome::Missing);
            let good = header("prometheus", "s3cret");
            assert_eq!(g.check(A, Some(&good)).await, Outcome::Pass);
            assert_eq!(stats.checks(), 1);
            assert_eq!(g.check(B, Some(&good)).await, Outcome::Pass);
            assert_eq!(stats.checks(), 1, "a passed header is remembered");
            let bad = header("prometheus", "guess");
            assert_eq!(g.check(A, Some(&bad)).await, Outcome::Wrong);
            assert_eq!(stats.checks(), 2);
            assert_eq!(g.check(B, Some(&bad)).await, Outcome::Wrong);
            assert_eq!(stats.checks(), 2, "a failed header is remembered");
            assert_eq!(
                g.check(A, Some(&header("other", "s3cret"))).await,
                Outcome::Wrong
            );
        });
    }

    /// One source has at most one check waiting; the second is throttled without a check. A
    /// remembered scrape passes while checks wait.
    #[test]
    fn a_source_waits_for_one_check_at_a_time() {
        let (g, stats) = guard();
        rt().block_on(async {
            let good = header("prometheus", "s3cret");
            assert_eq!(g.check(B, Some(&good)).await, Outcome::Pass);
            let (h1, h2) = (header("prometheus", "a"), header("prometheus", "b"));
            let first = g.check(A, Some(&h1));
            let second = async {
                tokio::task::yield_now().await;
                g.check(A, Some(&h2)).await
            };
            let third = async {
                tokio::task::yield_now().await;
                g.check(B, Some(&good)).await
            };
            let (a, b, c) = tokio::join!(first, second, third);
            assert_eq!(
                (a, b, c),
                (Outcome::Wrong, Outcome::Throttled, Outcome::Pass)
            );
            assert_eq!(stats.checks(), 2);
            // the source is free again once its check is done
            assert_eq!(g.check(A, Some(&h2)).await, Outcome::Wrong);
        });
    }

    /// Distinct sources queue (up to MAX_WAITING), one check at a time, each failure followed by
    /// a rest three times as long as the check: the checker is busy at most a quarter of the time.
    #[test]
    fn failures_get_at_most_a_quarter_of_the_checker() {
        let (g, stats) = guard();
        let t0 = Instant::now();
        rt().block_on(async {
            let futs: Vec<_> = (0..4u8)
                .map(|i| {
                    let g = g.clone();
                    let src = IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 0, i));
                    async move {
                        g.check(src, Some(&header("prometheus", &i.to_string())))
                            .await
                    }
                })
                .collect();
            for o in futures_util::future::join_all(futs).await {
                assert_eq!(o, Outcome::Wrong);
            }
        });
        let busy = stats.check_seconds();
        assert_eq!(stats.checks(), 4);
        assert!(
            t0.elapsed().as_secs_f64() >= 4.0 * busy * 0.99,
            "{:?} for {busy} s of checks",
            t0.elapsed()
        );
    }

    /// A client that leaves while its check runs does not free its source or the checker: the
    /// check goes on to its end (and its rest), and a new request from that source meanwhile is
    /// throttled, not checked beside it.
    #[test]
    fn a_client_that_leaves_does_not_free_the_checker() {
        let (g, stats) = guard();
        rt().block_on(async {
            let g2 = g.clone();
            let waiting =
                tokio::spawn(async move { g2.check(A, Some(&header("prometheus", "x"))).await });
            while g.memory().pending.is_empty() {
                tokio::task::yield_now().await;
            }
            waiting.abort();
            assert_eq!(
                g.check(A, Some(&header("prometheus", "y"))).await,
                Outcome::Throttled
            );
            // the first check ends (and rests) on its own, then the source is free
            while !g.memory().pending.is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(stats.checks(), 1);
            assert_eq!(
                g.check(A, Some(&header("prometheus", "y"))).await,
                Outcome::Wrong
            );
        });
    }

    #[test]
    fn the_failed_memory_is_bounded() {
        let mut m = Memory::default();
        let now = Instant::now();
        for i in 0..MAX_FAILED + 10 {
            m.remember_failed(&i.to_string(), now);
        }
        assert_eq!(m.failed.len(), MAX_FAILED);
        assert!(!m.failed_recently("0", now), "the oldest went first");
        assert!(m.failed_recently(&(MAX_FAILED + 9).to_string(), now));
        assert!(!m.failed_recently("5", now + FAILED_FOR + Duration::from_secs(1)));
    }
}
