//! The events ring buffer, polled by tokio: each item decoded into a `Record`; an undecodable
//! item is counted and reported, never skipped silently.
use anyhow::{Context, Result};
use aya::{
    maps::{MapData, RingBuf},
    Ebpf,
};
use tcpwin_common::names;
use tcpwin_model::decode::{self, InitsSeen, Record};
use tokio::io::unix::AsyncFd;

pub struct Ring {
    fd: AsyncFd<RingBuf<MapData>>,
    pub received: u64,
    /// records handed over: those received, a deferred `init` carried by another counted apart
    pub records: u64,
    pub decode_errors: u64,
    inits: InitsSeen,
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
            records: 0,
            decode_errors: 0,
            inits: InitsSeen::default(),
        })
    }

    /// Waits until the kernel wakes the reader (it does so only when a quarter of the ring is
    /// used: see emit.rs); then [`Ring::drain`].
    pub async fn readable(&mut self) -> Result<()> {
        let mut guard = self.fd.readable_mut().await?;
        guard.clear_ready();
        Ok(())
    }

    /// Reads everything in the ring now; a record that carries its socket's deferred `init` is
    /// handed over as the two records it stands for.
    pub fn drain(&mut self, on: &mut dyn FnMut(Record) -> Result<()>) -> Result<()> {
        let mut records = 0;
        let (received, errors) = drain(self.fd.get_mut(), &mut self.inits, &mut |r| {
            records += 1;
            on(r)
        })?;
        self.records += records;
        self.received += received;
        self.decode_errors += errors;
        Ok(())
    }
}

fn drain(
    ring: &mut RingBuf<MapData>,
    inits: &mut InitsSeen,
    on: &mut dyn FnMut(Record) -> Result<()>,
) -> Result<(u64, u64)> {
    let (mut received, mut errors) = (0, 0);
    while let Some(item) = ring.next() {
        received += 1;
        match decode::decode(&item) {
            Ok(r) => {
                let (init, rest) = decode::split(r);
                if let Some(i) = init.filter(|i| inits.first(i)) {
                    on(i)?;
                }
                if let Some(r) = rest {
                    on(r)?;
                }
            }
            Err(e) => {
                errors += 1;
                eprintln!("tcpwin-trace: undecodable event: {e}");
            }
        }
    }
    Ok((received, errors))
}
