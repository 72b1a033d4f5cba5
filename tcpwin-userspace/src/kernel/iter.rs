//! The socket iterator (`iter/tcp`): a snapshot of every TCP socket of one network namespace,
//! read as fixed records. Nothing runs per packet; the program runs only while it is read.
use std::io::Read;

use anyhow::{Context, Result};
use aya::{
    maps::PerCpuHashMap,
    programs::{BtfTracePoint, Iter},
    Ebpf,
};
use tcpwin_common::{counter, hook, names, ClosedSums, Config, Offsets, SockRecord};
use tcpwin_model::metrics::Counts;

use super::{
    attach::reason,
    cache,
    log::KernelLog,
    object::{self, LoadOpts},
    Kernel,
};

pub struct SocketIter {
    /// the object this process loaded; `None` when it reads the pinned iterator
    bpf: Option<Ebpf>,
    /// the iterator a previous command pinned (see `cache`)
    pinned: Option<cache::Cached>,
    pub offsets: Offsets,
    /// kernel members the iterator cannot read here (reported as absent)
    pub absent: Vec<(String, String)>,
    /// the programs' own lines (`--ebpf-log`)
    log: KernelLog,
    /// the kernel and object asked for (`--btf`, `--obj`): what a reload loads again
    kernel: Kernel,
}

impl SocketIter {
    /// The iterator: the one a previous command pinned when it is this build's for this kernel
    /// (see `cache`), else loaded with the running kernel's offsets (and pinned for the next).
    pub fn load(kernel: &Kernel) -> Result<SocketIter> {
        if !kernel.cacheable() {
            return Self::load_with(kernel, &Counting::default());
        }
        object::check_privileges()?;
        if let Ok(c) = cache::lookup() {
            return Ok(SocketIter {
                offsets: c.layout.offsets,
                absent: c.layout.absent.clone(),
                bpf: None,
                pinned: Some(c),
                log: KernelLog::default(),
                kernel: kernel.clone(),
            });
        }
        let mut it = Self::load_with(kernel, &Counting::default())?;
        if let Some(bpf) = it.bpf.as_mut() {
            let layout = &kernel.btf()?.layout;
            // best effort: without it the next command loads again (and says why not)
            if let Err(e) = cache::store(bpf, layout) {
                eprintln!(
                    "tcpwin-trace: note: the socket iterator is not kept for the next command ({e:#}); {}=off stops trying",
                    cache::ENV
                );
            }
        }
        Ok(it)
    }

    /// Loads the iterator and attaches the exporter's counters asked for.
    pub fn load_with(kernel: &Kernel, c: &Counting) -> Result<SocketIter> {
        object::load_reading_cookies(|by_read| Self::load_config(kernel, c, by_read))
            .map(|(it, _)| it)
    }

    fn load_config(kernel: &Kernel, c: &Counting, cookie_by_read: bool) -> Result<SocketIter> {
        object::check_privileges()?;
        let k = kernel.btf()?;
        let (layout, btf) = (&k.layout, &k.aya);
        let opts = LoadOpts {
            obj: kernel.obj(),
            config: Config {
                port: c.filter.port,
                cookie_by_read: cookie_by_read as u8,
                addr_family: c.filter.addr_family,
                addr: c.filter.addr,
                addr_mask: c.filter.addr_mask,
                ..Config::default()
            },
            // the tracer's ring buffer is not used here: the smallest one
            ringbuf_bytes: 4096,
        };
        let mut bpf = object::load(&opts, layout, btf)?;
        let log = KernelLog::start(&mut bpf)?;
        log.name_programs([(hook::ITER, format!("{} (iter/tcp)", names::ITER_TCP))]);
        prepare(&mut bpf, btf)?;
        if c.states {
            attach_counter(
                &mut bpf,
                btf,
                names::COUNT_STATES,
                "inet_sock_set_state",
                "the handshake and close counter (tp_btf sock:inet_sock_set_state)",
            )?;
            log.name_programs([(
                hook::TP_SET_STATE,
                format!("{} (tp_btf sock:inet_sock_set_state)", names::COUNT_STATES),
            )]);
        }
        if c.packets {
            attach_counter(
                &mut bpf,
                btf,
                names::COUNT_PACKET,
                "tcp_probe",
                "the per-packet histogram (tp_btf tcp:tcp_probe)",
            )?;
            log.name_programs([(
                hook::TP_TCP_PROBE,
                format!("{} (tp_btf tcp:tcp_probe)", names::COUNT_PACKET),
            )]);
        }
        Ok(SocketIter {
            bpf: Some(bpf),
            pinned: None,
            offsets: layout.offsets,
            absent: layout.absent.clone(),
            log,
            kernel: kernel.clone(),
        })
    }

    /// Every TCP socket (outside LISTEN) of the calling thread's network namespace; the
    /// reading's `--ebpf-log` lines are printed before it returns.
    pub fn read(&mut self) -> Result<Vec<SockRecord>> {
        parse_records(&self.read_bytes()?)
    }

    /// [`SocketIter::read`], each record handed to `each` as the iterator writes it: a buffer
    /// of 64 KiB is all a reading holds, whatever the number of sockets.
    pub fn read_each(&mut self, each: &mut dyn FnMut(SockRecord)) -> Result<()> {
        if let Some(p) = &self.pinned {
            if let Ok(f) = p.open() {
                return each_record(f, each);
            }
        }
        records(&self.read_bytes()?)?.for_each(each);
        Ok(())
    }

    /// [`SocketIter::read`] as the iterator wrote it: whole records, not yet copied out (a
    /// reading of 19,000 sockets holds them once, 4.7 MB, not twice).
    fn read_bytes(&mut self) -> Result<Vec<u8>> {
        if let Some(p) = &self.pinned {
            match p.read() {
                Ok(bytes) => return Ok(bytes),
                // removed under us (`cache --clear`, another build replacing it): load ours
                Err(_) => {
                    self.pinned = None;
                    self.bpf =
                        Some(Self::load_with(&self.kernel, &Counting::default())?.take_bpf());
                }
            }
        }
        let bpf = self.bpf.as_mut().context("no socket iterator loaded")?;
        let r = read_bytes(bpf);
        self.log.flush();
        r
    }

    fn take_bpf(mut self) -> Ebpf {
        self.bpf.take().expect("a loaded iterator")
    }

    fn bpf(&self) -> Result<&Ebpf> {
        self.bpf
            .as_ref()
            .context("the exporter's counters need the iterator loaded by this process")
    }

    /// Handshakes counted so far (with `load_with(.., true)`): (netns, wscale negotiated,
    /// passive, count), summed over CPUs.
    pub fn established(&self) -> Result<Vec<(u32, bool, bool, u64)>> {
        let m: PerCpuHashMap<_, u64, u64> = PerCpuHashMap::try_from(
            self.bpf()?
                .map(names::ESTAB_COUNTS)
                .context("ESTAB_COUNTS map")?,
        )?;
        let mut v = Vec::new();
        for item in m.iter() {
            let (k, per_cpu) = item?;
            let (ns, ok, passive) = tcpwin_common::estab_parts(k);
            v.push((ns, ok, passive, per_cpu.iter().sum()));
        }
        Ok(v)
    }

    /// Closed connections' chrono sums per namespace (with `Counting::states`), summed over
    /// CPUs.
    pub fn closed(&self) -> Result<Vec<(u32, ClosedSums)>> {
        let m: PerCpuHashMap<_, u32, ClosedSums> = PerCpuHashMap::try_from(
            self.bpf()?
                .map(names::CLOSED_SUMS)
                .context("CLOSED_SUMS map")?,
        )?;
        let mut v = Vec::new();
        for item in m.iter() {
            let (ns, per_cpu) = item?;
            let mut t = ClosedSums::default();
            for c in per_cpu.iter() {
                for i in 0..3 {
                    t.chrono_jiffies[i] += c.chrono_jiffies[i];
                }
                t.closed += c.closed;
            }
            v.push((ns, t));
        }
        Ok(v)
    }

    /// With `Counting::packets`: per interface of the namespaces `netns`, (ratio, packets).
    pub fn packet_counts(&self, netns: &[u32]) -> Result<Vec<(String, Counts)>> {
        super::maps::read_packet_counts(self.bpf()?, Some(netns))
    }
}

impl Drop for SocketIter {
    /// With `--ebpf-log`: the last lines, and how many were written, shown and lost.
    fn drop(&mut self) {
        let Some(bpf) = &self.bpf else {
            return;
        };
        let due = super::maps::read_counters(bpf)
            .ok()
            .and_then(|c| c.get(counter::LOG_DUE as usize).copied())
            .unwrap_or(0);
        if let Some(c) = self.log.finish(due) {
            eprintln!("tcpwin-trace: {}", c.text());
        }
    }
}

/// The exporter's kernel counters to attach beside the iterator.
#[derive(Clone, Debug, Default)]
pub struct Counting {
    /// handshakes and closes (one hit per state change)
    pub states: bool,
    /// every data packet's ratio, per interface (one hit per packet)
    pub packets: bool,
    /// what they count: `port` and the address filter (`Config::with_addr`) are taken from it
    pub filter: Config,
}

fn attach_counter(bpf: &mut Ebpf, btf: &aya::Btf, prog: &str, tp: &str, what: &str) -> Result<()> {
    let p: &mut BtfTracePoint = bpf
        .program_mut(prog)
        .with_context(|| format!("{what} is missing from the eBPF object"))?
        .try_into()?;
    p.load(tp, btf)
        .and_then(|()| p.attach().map(|_| ()))
        .map_err(|e| anyhow::anyhow!("the kernel refused {what}: {}", reason(&e)))
}

/// Loads the iterator program of an object already loaded (the tracer's, for its verdicts).
pub fn prepare(bpf: &mut Ebpf, btf: &aya::Btf) -> Result<()> {
    let prog: &mut Iter = bpf
        .program_mut(names::ITER_TCP)
        .context("the iter/tcp program is missing from the eBPF object")?
        .try_into()?;
    prog.load("tcp", btf).map_err(|e| {
        anyhow::anyhow!(
            "the kernel refused the socket iterator (iter/tcp needs Linux 5.9+ with BPF iterators): {}",
            reason(&e)
        )
    })
}

/// Runs the prepared iterator once in the calling thread's network namespace.
pub fn read(bpf: &mut Ebpf) -> Result<Vec<SockRecord>> {
    parse_records(&read_bytes(bpf)?)
}

/// [`read`]'s bytes, whole records not yet copied out.
fn read_bytes(bpf: &mut Ebpf) -> Result<Vec<u8>> {
    let prog: &mut Iter = bpf
        .program_mut(names::ITER_TCP)
        .context("iter/tcp program")?
        .try_into()?;
    let link = prog.attach().context("attaching the socket iterator")?;
    let link = prog.take_link(link)?;
    let mut file = link
        .into_file()
        .context("creating the socket iterator's file")?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .context("reading the socket iterator")?;
    Ok(bytes)
}

/// The iterator's output: whole records, nothing left over.
pub fn parse_records(bytes: &[u8]) -> Result<Vec<SockRecord>> {
    Ok(records(bytes)?.collect())
}

/// The iterator's output read from `from` 64 KiB at a time, each record handed to `each` (a
/// record may straddle two reads); an error where it does not end on a whole record.
pub fn each_record(mut from: impl Read, each: &mut dyn FnMut(SockRecord)) -> Result<()> {
    let size = std::mem::size_of::<SockRecord>();
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0;
    loop {
        let n = from
            .read(&mut buf[have..])
            .context("reading the socket iterator")?;
        if n == 0 {
            break;
        }
        have += n;
        let whole = have - have % size;
        records(&buf[..whole])?.for_each(&mut *each);
        buf.copy_within(whole..have, 0);
        have -= whole;
    }
    if have > 0 {
        anyhow::bail!("the socket iterator ended inside a record ({have} of {size} bytes)");
    }
    Ok(())
}

/// The iterator's output record by record, each copied out as it is asked for; an error where
/// the bytes are not whole records.
pub fn records(bytes: &[u8]) -> Result<impl Iterator<Item = SockRecord> + '_> {
    let size = std::mem::size_of::<SockRecord>();
    if !bytes.len().is_multiple_of(size) {
        anyhow::bail!(
            "the socket iterator returned {} bytes, not a whole number of {size}-byte records",
            bytes.len()
        );
    }
    Ok(bytes
        .chunks_exact(size)
        // SAFETY: SockRecord is repr(C) plain data and each chunk is exactly its size.
        .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr() as *const SockRecord) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records straddling reads of any length come out whole and in order; a torn last one
    /// is an error.
    #[test]
    fn records_read_in_pieces_are_whole() {
        struct Dribble(Vec<u8>, usize);
        impl Read for Dribble {
            fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                let n = self.1.min(b.len()).min(self.0.len());
                b[..n].copy_from_slice(&self.0[..n]);
                self.0.drain(..n);
                Ok(n)
            }
        }
        let size = std::mem::size_of::<SockRecord>();
        let bytes: Vec<u8> = (0..size * 300).map(|i| (i / size) as u8).collect();
        for step in [1, 7, size - 1, size, size + 3, 70_000] {
            let mut got = Vec::new();
            each_record(Dribble(bytes.clone(), step), &mut |r| got.push(r)).unwrap();
            assert_eq!(got.len(), 300);
            assert_eq!(got, parse_records(&bytes).unwrap());
        }
        let torn = Dribble(bytes[..size * 2 + 5].to_vec(), 100);
        assert!(each_record(torn, &mut |_| {}).is_err());
    }

    #[test]
    fn records_must_be_whole() {
        let size = std::mem::size_of::<SockRecord>();
        assert_eq!(parse_records(&vec![0u8; 2 * size]).unwrap().len(), 2);
        assert!(parse_records(&vec![0u8; size + 3]).is_err());
        assert!(parse_records(&[]).unwrap().is_empty());
    }
}
