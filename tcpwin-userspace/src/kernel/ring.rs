//! The events ring buffer, polled by tokio: each item decoded into a `Record`; an undecodable
//! item is counted and reported, never skipped silently.
use anyhow::{Context, Result};
use aya::{
    maps::{MapData, RingBuf},
    Ebpf,
};
use tcpwin_common::names;
use tcpwin_model::decode::{self, Record};
use tokio::io::unix::AsyncFd;

pub struct Ring {
    fd: AsyncFd<RingBuf<MapData>>,
    pub received: u64,
    pub decode_errors: u64,
}

impl Ring {
    /// Takes the events map out of the object.
    pub fn take(bpf: &mut Ebpf) -> Result<Ring> {
        let ring = RingBuf::try_from(bpf.take_map(names::EVENTS).context("EVENTS map")?)?;
        // SAFETY: the ring buffer owns its fd and keeps it open for as long as the AsyncFd lives.
        let fd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
            .map_err(|e| anyhow::anyhow!("polling the ring buffer: {}", e.into_parts().1))?;
        Ok(Ring {
            fd,
            received: 0,
            decode_errors: 0,
        })
    }

    /// Waits until the kernel wakes the reader (it does so only when a quarter of the ring is
    /// used: see emit.rs); then [`Ring::drain`].
    pub async fn readable(&mut self) -> Result<()> {
        let mut guard = self.fd.readable_mut().await?;
        guard.clear_ready();
        Ok(())
    }

    /// Reads everything in the ring now.
    pub fn drain(&mut self, on: &mut dyn FnMut(Record) -> Result<()>) -> Result<()> {
        let (received, errors) = drain(self.fd.get_mut(), on)?;
        self.received += received;
        self.decode_errors += errors;
        Ok(())
    }
}

fn drain(
    ring: &mut RingBuf<MapData>,
    on: &mut dyn FnMut(Record) -> Result<()>,
) -> Result<(u64, u64)> {
    let (mut received, mut errors) = (0, 0);
    while let Some(item) = ring.next() {
        received += 1;
        match decode::decode(&item) {
            Ok(r) => on(r)?,
            Err(e) => {
                errors += 1;
                eprintln!("tcpwin-trace: undecodable event: {e}");
            }
        }
    }
    Ok((received, errors))
}
