//! One netlink exchange, run to completion from synchronous code: on a thread of its own with
//! its own runtime, so that a caller already inside an async runtime (the live trace judges from
//! its tokio task) does not nest one. A new thread starts in its creator's network namespace:
//! what the exchange reads is still the caller's namespace.
use std::future::Future;

use anyhow::{anyhow, Result};

/// Runs the future `f` builds to completion and returns its result.
pub fn exchange<T, F, Fut>(f: F) -> Result<T>
where
    T: Send,
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = Result<T>>,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()?
                .block_on(f())
        })
        .join()
        .map_err(|_| anyhow!("the netlink thread panicked"))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inside a runtime too: no nested-runtime panic, and the answer comes back.
    #[test]
    fn from_inside_a_runtime() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let v = rt.block_on(async { exchange(|| async { Ok(7) }) }).unwrap();
        assert_eq!(v, 7);
        assert_eq!(exchange(|| async { Ok("outside") }).unwrap(), "outside");
    }
}
