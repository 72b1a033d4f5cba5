//! The delay line: a forwarder between the two interfaces of the path namespace that holds every
//! frame for a fixed time in each direction (this machine kind has no netem). Two threads, one
//! per direction, each inside the path namespace: an AF_PACKET socket receives the frames
//! arriving on one interface (outgoing ones ignored), queues them with their due time, and a
//! second socket sends them unchanged out of the other interface when due, through a TX ring
//! (TPACKET_V2; the bottleneck is not on this interface: the ring retries what a qdisc refuses).
//! The ring matters for what the receiver measures: a frame sent from the ring
//! reaches it with its payload in page fragments and a truesize of about header + payload, as a
//! NIC driver's frames do, so receiver GRO merges them and the scaling ratio follows (162 without
//! GRO, 229 with it at MTU 1500); a frame sent with sendto() would arrive as one kmalloc'ed
//! buffer that GRO can only chain, and the ratio would not move. Frames pass through
//! Everything it could not carry is counted: frames the receive socket dropped (the kernel's
//! PACKET_STATISTICS), frames over the queue limit, sends the kernel refused (retried), and how
//! late frames left.
//!
//! It can also be the path's bottleneck, away from the sender (a sender's own qdisc never holds
//! a queue: TCP small queues make the sender wait instead): towards the receiver, frames leave a
//! link of `rate` one after the other, waiting in a FIFO of `queue` bytes; a frame that finds
//! it full is dropped (tail drop, counted apart: that is congestion, not the line failing). A
//! deep queue there is the bufferbloat of a home router or a cable modem.
use std::{
    collections::VecDeque,
    ffi::CString,
    fs::File,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

/// `PACKET_IGNORE_OUTGOING` (Linux 4.20): the receive socket does not see what is sent.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// linux/if_packet.h
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
/// Where a TX frame's data starts in its slot: TPACKET2_HDRLEN - sizeof(sockaddr_ll).
const TX_DATA_OFFSET: usize = 32;
/// Bytes of ring per direction: a slot stays taken until the receiver frees the frame (after its
/// application read it), so the ring holds a receive buffer's worth and the bottleneck's queue.
const RING_BYTES: usize = 32 << 20;

/// `struct tpacket2_hdr`
#[repr(C)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}

/// `struct tpacket_req`
#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

/// The send side: a TPACKET_V2 TX ring bound to the outgoing interface.
struct TxRing {
    fd: OwnedFd,
    map: *mut u8,
    len: usize,
    frame_size: usize,
    frames: usize,
    next: usize,
    /// the last send was refused: frames wait in their slots
    unsent: bool,
}

// SAFETY: the mapping is owned by this struct and used by one thread at a time.
unsafe impl Send for TxRing {}

impl TxRing {
    fn new(ifindex: u32, frame_size: usize) -> Result<TxRing> {
        let fd = packet_socket(0)?;
        setopt(&fd, libc::SOL_PACKET, PACKET_VERSION, TPACKET_V2).context("TPACKET_V2")?;
        let block = (64 << 10).max(frame_size);
        let req = TpacketReq {
            tp_block_size: block as u32,
            tp_block_nr: (RING_BYTES / block) as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: (RING_BYTES / frame_size) as u32,
        };
        // SAFETY: a tpacket_req of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_TX_RING,
                &req as *const TpacketReq as *const _,
                std::mem::size_of::<TpacketReq>() as u32,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("PACKET_TX_RING");
        }
        // SAFETY: mapping the ring the kernel just allocated for this socket, whole.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                RING_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mmap of the TX ring");
        }
        let ring = TxRing {
            fd,
            map: map as *mut u8,
            len: RING_BYTES,
            frame_size,
            frames: RING_BYTES / frame_size,
            next: 0,
            unsent: false,
        };
        let sll = sockaddr(ifindex, 0);
        // SAFETY: binding to a valid sockaddr_ll of the right size.
        let rc = unsafe {
            libc::bind(
                ring.fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("binding the TX ring");
        }
        Ok(ring)
    }

    fn slot(&self, i: usize) -> *mut Tpacket2Hdr {
        // SAFETY: i < frames, so the slot lies inside the mapping.
        unsafe { self.map.add(i * self.frame_size) as *mut Tpacket2Hdr }
    }
}

/// What a send did with the frames waiting in the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    /// the kernel took them all
    All,
    /// ENOBUFS: the receiving veth's queue is full (`veth_xmit` drops when its peer's 256-frame
    /// ring or the backlog overflows; the packet socket then puts the frame back in its slot,
    /// still asking to be sent, and the next send starts with it)
    QueueFull,
    /// any other refusal (EAGAIN: the packet socket's own send buffer), the frames kept alike
    Refused,
}

/// Where the line puts frames and hands them to the kernel (the TX ring; a fake in tests).
trait Ring {
    /// Puts a frame in the next slot; false when that slot is still taken (the ring is full).
    fn put(&mut self, frame: &[u8]) -> bool;
    /// Sends the frames put so far.
    fn flush(&mut self) -> Sent;
    /// Whether frames put are still waiting for a send the kernel takes (the last one refused).
    fn unsent(&self) -> bool;
}

impl Ring for TxRing {
    fn put(&mut self, frame: &[u8]) -> bool {
        let h = self.slot(self.next);
        // SAFETY: h points at a slot header in the mapping; the kernel writes tp_status, so it
        // is read and written volatile, and the data is written before the status hands it over.
        unsafe {
            if std::ptr::read_volatile(&(*h).tp_status) != TP_STATUS_AVAILABLE {
                return false;
            }
            let data = (h as *mut u8).add(TX_DATA_OFFSET);
            let n = frame.len().min(self.frame_size - TX_DATA_OFFSET);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), data, n);
            (*h).tp_len = n as u32;
            std::sync::atomic::fence(Ordering::Release);
            std::ptr::write_volatile(&mut (*h).tp_status, TP_STATUS_SEND_REQUEST);
        }
        self.next = (self.next + 1) % self.frames;
        true
    }

    fn flush(&mut self) -> Sent {
        // SAFETY: send(2) with no data: the kernel takes the ring's pending frames.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        let sent = match rc {
            0.. => Sent::All,
            _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) => {
                Sent::QueueFull
            }
            _ => Sent::Refused,
        };
        self.unsent = sent != Sent::All;
        sent
    }

    fn unsent(&self) -> bool {
        self.unsent
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this struct made, once.
        unsafe { libc::munmap(self.map as *mut _, self.len) };
    }
}
/// Largest frame taken (jumbo MTU 9000 + headers, with room); GRO/GSO are off on the path.
const FRAME_MAX: usize = 16 << 10;

/// A bottleneck link inside the line: its rate and the bytes its queue holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bottleneck {
    pub rate_bps: u64,
    pub queue_bytes: u64,
}

/// What the line does to the frames towards the receiver besides delaying them: a bottleneck,
/// and a share of frames lost at random (a lossy link), per million.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Impair {
    pub bottleneck: Option<Bottleneck>,
    pub loss_ppm: u32,
}

/// What one direction did.
#[derive(Debug, Default)]
pub struct DirStats {
    pub forwarded: AtomicU64,
    /// dropped by the bottleneck's full queue (congestion, as a router drops)
    pub bottleneck_drops: AtomicU64,
    /// dropped on purpose, at random: the lossy link asked for
    pub lost: AtomicU64,
    /// over the queue limit
    pub queue_drops: AtomicU64,
    /// sends refused with ENOBUFS (the receiver's veth queue full); the ring keeps such a frame
    /// and the line sends again within 100 µs, so it is late, not lost
    pub queue_full_retries: AtomicU64,
    /// sends refused otherwise (the packet socket's send buffer), retried alike
    pub send_retries: AtomicU64,
    /// frames that left more than 1 ms after their due time
    pub late: AtomicU64,
    pub max_late_us: AtomicU64,
    /// frames that waited more than 1 ms in the receive socket before the line read them
    /// (their due time is that much late too)
    pub rx_late: AtomicU64,
    pub max_rx_wait_us: AtomicU64,
    /// what the line added to the asked delay, summed over the frames: waiting to be read plus
    /// leaving after the due time, µs
    pub added_us: AtomicU64,
    /// the receive socket's own drops (PACKET_STATISTICS), read at the end
    pub socket_drops: AtomicU64,
}

/// Totals of both directions, for a report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub forwarded: u64,
    pub bottleneck_drops: u64,
    pub lost: u64,
    pub queue_drops: u64,
    /// sends refused because the receiving veth's queue was full (ENOBUFS), retried
    pub queue_full_retries: u64,
    pub send_retries: u64,
    pub socket_drops: u64,
    pub late: u64,
    pub max_late_us: u64,
    pub rx_late: u64,
    pub max_rx_wait_us: u64,
    /// the mean the line added to a round trip (one frame each way) beyond the asked delay, µs
    pub added_rtt_us: u64,
}

/// A path keeps its delay when the line added, on average, at most this share of the RTT to a
/// round trip (waiting to be read plus leaving late, both ways): the judge calls an RTT queued
/// from an eighth of the base RTT over it, so a late line must stay well under that...
pub const ADDED_RTT_SHARE_MAX: f64 = 1.0 / 20.0;
/// ...or under this, on short paths (µs).
pub const ADDED_RTT_FLOOR_US: u64 = 500;

impl Totals {
    /// Frames the delay line itself lost or could not hand over.
    pub fn own_drops(&self) -> u64 {
        self.queue_drops + self.socket_drops
    }

    /// Whether the line kept the delay of a path of `rtt` within the stated bound
    /// ([`ADDED_RTT_SHARE_MAX`], [`ADDED_RTT_FLOOR_US`]); a row measured on a late path is not
    /// judged. Single late frames (a stall) do not count against it: they move a smoothed RTT
    /// by an eighth of their lateness, once.
    pub fn on_time(&self, rtt: Duration) -> bool {
        let bound = ((rtt.as_micros() as f64 * ADDED_RTT_SHARE_MAX) as u64).max(ADDED_RTT_FLOOR_US);
        self.added_rtt_us <= bound
    }
}

pub struct DelayLine {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Result<()>>>,
    stats: [Arc<DirStats>; 2],
}

fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name)?;
    // SAFETY: a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        bail!("no interface {name} in the path namespace");
    }
    Ok(i)
}

fn packet_socket(proto: u16) -> Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            proto.to_be() as i32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("AF_PACKET socket (needs root)");
    }
    // SAFETY: fd was just returned by socket(2) and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(ifindex: u32, proto: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data, valid all-zero.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = ifindex as i32;
    sll
}

fn setopt(fd: &OwnedFd, level: i32, name: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: an int option on an open socket.
    let rc =
        unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, &v as *const i32 as *const _, 4) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The receive socket on `from` and the TX ring on `to`, for frames of an `mtu`.
fn open(from: &str, to: &str, mtu: u32) -> Result<(OwnedFd, TxRing)> {
    let all = libc::ETH_P_ALL as u16;
    let rx = packet_socket(all)?;
    let sll = sockaddr(ifindex(from)?, all);
    // SAFETY: binding to a valid sockaddr_ll of the right size.
    let rc = unsafe {
        libc::bind(
            rx.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("bind to {from}"));
    }
    setopt(&rx, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        .context("PACKET_IGNORE_OUTGOING (Linux 4.20+)")?;
    // room for bursts while the thread sends; SO_RCVBUFFORCE passes rmem_max
    let _ = setopt(&rx, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 32 << 20);
    // each frame's arrival time, to count how long it waited before the line read it
    let _ = setopt(&rx, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
    let frame_size = (mtu as usize + 14 + 4 + TX_DATA_OFFSET)
        .next_power_of_two()
        .max(2048);
    Ok((rx, TxRing::new(ifindex(to)?, frame_size)?))
}

fn socket_drops(rx: &OwnedFd) -> u64 {
    #[repr(C)]
    #[derive(Default)]
    struct TpacketStats {
        packets: u32,
        drops: u32,
    }
    let mut st = TpacketStats::default();
    let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
    // SAFETY: PACKET_STATISTICS writes a tpacket_stats of at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            rx.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut st as *mut TpacketStats as *mut _,
            &mut len,
        )
    };
    if rc == 0 {
        st.drops as u64
    } else {
        0
    }
}

/// A frame later than this (µs) on either side of the line is counted late.
const LATE_US: u64 = 1000;

fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// µs between the kernel's arrival stamp and now (both CLOCK_REALTIME); None for a stamp that
/// cannot be this frame's arrival (in the future, or older than a second: another clock).
fn waited_us(kernel_ns: u64, now_ns: u64) -> Option<u64> {
    let w = now_ns.checked_sub(kernel_ns)?;
    (w < 1_000_000_000).then_some(w / 1000)
}

/// One frame from the receive socket, without waiting, with the kernel's arrival stamp
/// (SO_TIMESTAMPNS, CLOCK_REALTIME) when it gave one; None when nothing is waiting.
fn recv_stamped(rx: &OwnedFd, buf: &mut [u8]) -> Option<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut _,
        iov_len: buf.len(),
    };
    // room for one SCM_TIMESTAMPNS (a timespec), aligned for cmsghdr
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data, valid all-zero.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut _;
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: msg points at a valid iovec and control buffer for the call's duration.
    let len = unsafe { libc::recvmsg(rx.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if len <= 0 {
        return None;
    }
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `control`, with the libc
    // macros that bound each to msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Some((len as usize, stamp))
}

/// Reads one frame into the buffer: its length and the kernel's arrival stamp (CLOCK_REALTIME
/// ns, when given); None when nothing waits.
type Recv<'a> = dyn FnMut(&mut [u8]) -> Option<(usize, Option<u64>)> + 'a;

/// One direction's frames waiting for their due time.
struct Inbox {
    /// (due, frame), in due order
    queue: VecDeque<(Instant, Vec<u8>)>,
    /// bytes held, and the most allowed
    queued: usize,
    queue_limit: usize,
    delay: Duration,
    bottleneck: Option<Bottleneck>,
    /// frames lost on purpose per million, and the generator that picks them (xorshift64)
    loss_ppm: u32,
    rng: u64,
    /// when the bottleneck link is free again
    link_free: Instant,
    /// buffers to reuse
    free: Vec<Vec<u8>>,
}

impl Inbox {
    /// Takes every frame waiting in `recv` (a frame's length and the kernel's arrival stamp;
    /// None when nothing waits), each stamped by `now()` right after it was read: never before
    /// it was there. (One stamp taken before a whole drain made the frames that arrived during
    /// the drain early by up to its length: a path of 18 ms measured 14 ms by TCP.)
    fn take(&mut self, recv: &mut Recv, now: &mut dyn FnMut() -> Instant, st: &DirStats) {
        loop {
            let mut buf = self.free.pop().unwrap_or_else(|| vec![0u8; FRAME_MAX]);
            buf.resize(FRAME_MAX, 0);
            let Some((len, kernel_ns)) = recv(&mut buf) else {
                self.free.push(buf);
                break;
            };
            let arrived = now();
            buf.truncate(len);
            if self.loss_ppm > 0 {
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                if self.rng % 1_000_000 < self.loss_ppm as u64 {
                    st.lost.fetch_add(1, Ordering::Relaxed);
                    self.free.push(buf);
                    continue;
                }
            }
            // how long the frame waited in the receive socket before the line read it (the
            // kernel's arrival stamp): lateness the line adds on this side
            if let Some(waited) = kernel_ns.and_then(|k| waited_us(k, realtime_ns())) {
                if waited > LATE_US {
                    st.rx_late.fetch_add(1, Ordering::Relaxed);
                }
                st.max_rx_wait_us.fetch_max(waited, Ordering::Relaxed);
                st.added_us.fetch_add(waited, Ordering::Relaxed);
            }
            let due = match self.bottleneck {
                None => arrived + self.delay,
                Some(b) => {
                    // the frame waits for the frames ahead of it on the link
                    let start = self.link_free.max(arrived);
                    let backlog = start.saturating_duration_since(arrived).as_secs_f64()
                        * b.rate_bps as f64
                        / 8.0;
                    if backlog > b.queue_bytes as f64 {
                        st.bottleneck_drops.fetch_add(1, Ordering::Relaxed);
                        self.free.push(buf);
                        continue;
                    }
                    self.link_free =
                        start + Duration::from_secs_f64(buf.len() as f64 * 8.0 / b.rate_bps as f64);
                    self.link_free + self.delay
                }
            };
            if self.queued + buf.len() > self.queue_limit {
                st.queue_drops.fetch_add(1, Ordering::Relaxed);
                self.free.push(buf);
                continue;
            }
            self.queued += buf.len();
            self.queue.push_back((due, buf));
        }
    }
}

/// Puts the frames due by `now` in the ring and hands them to the kernel; returns how many
/// were put. A refused send leaves its frames in the ring for the next one, so the ring is
/// handed over again whenever it holds frames a send left, new frames or not: a ring left
/// without a kick waited for the next frame to fall due (with every slot held, for good: a
/// transfer that never finished; with the sender's window in the ring, for its retransmission
/// timeout). The caller comes back within 100 µs while frames are unsent ([`Ring::unsent`]):
/// the receiving veth's queue drains only when its consumer runs, which a send retried at once
/// from this real-time thread would keep off the CPU.
fn hand_over(inbox: &mut Inbox, tx: &mut dyn Ring, now: Instant, st: &DirStats) -> usize {
    let mut put = 0;
    while let Some((due, frame)) = inbox.queue.front() {
        if *due > now {
            break;
        }
        if !tx.put(frame) {
            // every slot waits for the receiver to free its frame: send what is put, retry
            break;
        }
        put += 1;
        let late = now.saturating_duration_since(*due).as_micros() as u64;
        st.added_us.fetch_add(late, Ordering::Relaxed);
        if late > LATE_US {
            st.late.fetch_add(1, Ordering::Relaxed);
        }
        st.max_late_us.fetch_max(late, Ordering::Relaxed);
        let (_, frame) = inbox.queue.pop_front().expect("front exists");
        inbox.queued -= frame.len();
        inbox.free.push(frame);
    }
    st.forwarded.fetch_add(put as u64, Ordering::Relaxed);
    let due = inbox.queue.front().is_some_and(|(due, _)| *due <= now);
    if put > 0 || tx.unsent() || due {
        // a refused send is counted; the frame stays in its slot and is sent again next time
        match tx.flush() {
            Sent::All => {}
            Sent::QueueFull => {
                st.queue_full_retries.fetch_add(1, Ordering::Relaxed);
            }
            Sent::Refused => {
                st.send_retries.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    put
}

/// How long the line may wait for frames to read: until the next one is due (50 ms at most),
/// 100 µs while the ring holds frames a send left (see [`hand_over`]).
fn read_wait(inbox: &Inbox, unsent: bool, now: Instant) -> Duration {
    let wait = match inbox.queue.front() {
        Some((due, _)) => due.saturating_duration_since(now),
        None => Duration::from_millis(50),
    }
    .min(Duration::from_millis(50));
    if unsent {
        wait.min(RETRY_AFTER)
    } else {
        wait
    }
}

/// A send the kernel refused is tried again after this.
const RETRY_AFTER: Duration = Duration::from_micros(100);

/// One direction: receive on `from`, hold `delay`, send on `to`.
fn forward(
    rx: OwnedFd,
    mut tx: TxRing,
    delay: Duration,
    queue_limit: usize,
    impair: Impair,
    stop: Arc<AtomicBool>,
    st: Arc<DirStats>,
) -> Result<()> {
    let mut inbox = Inbox {
        queue: VecDeque::new(),
        queued: 0,
        queue_limit,
        delay,
        bottleneck: impair.bottleneck,
        loss_ppm: impair.loss_ppm,
        rng: 0x9e37_79b9_7f4a_7c15,
        link_free: Instant::now(),
        free: Vec::new(),
    };
    let mut stats_read = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let put = hand_over(&mut inbox, &mut tx, Instant::now(), &st);
        if put == 0
            && inbox
                .queue
                .front()
                .is_some_and(|(due, _)| *due <= Instant::now())
        {
            // the ring is full: give the receiver a moment
            std::thread::sleep(RETRY_AFTER);
            continue;
        }
        let wait = read_wait(&inbox, tx.unsent(), Instant::now());
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        let mut pfd = libc::pollfd {
            fd: rx.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd and timespec.
        let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if n <= 0 {
            continue;
        }
        inbox.take(&mut |buf| recv_stamped(&rx, buf), &mut Instant::now, &st);
        // reading the kernel's statistics resets them: add them up, ten times a second
        if stats_read.elapsed() > Duration::from_millis(100) {
            st.socket_drops
                .fetch_add(socket_drops(&rx), Ordering::Relaxed);
            stats_read = Instant::now();
        }
    }
    st.socket_drops
        .fetch_add(socket_drops(&rx), Ordering::Relaxed);
    Ok(())
}

impl DelayLine {
    /// Starts both directions inside the namespace at `netns` (a /run/netns path), between
    /// interfaces `a` and `b`, each holding frames `one_way`. `queue_limit`: bytes held per
    /// direction at most (frames beyond are dropped and counted).
    pub fn start(
        netns: &Path,
        a: &str,
        b: &str,
        one_way: Duration,
        queue_limit: usize,
        mtu: u32,
        impair: Impair,
    ) -> Result<DelayLine> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = [Arc::new(DirStats::default()), Arc::new(DirStats::default())];
        let mut threads = Vec::new();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for (i, (from, to)) in [(a, b), (b, a)].into_iter().enumerate() {
            let ns = File::open(netns)
                .with_context(|| format!("the path namespace {}", netns.display()))?;
            let (from, to) = (from.to_string(), to.to_string());
            let (stop, st, ready) = (stop.clone(), stats[i].clone(), ready_tx.clone());
            // the bottleneck and the losses are on the way to `b` (the receiver); the ACKs pass
            let neck = if i == 0 { impair } else { Impair::default() };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("delay-{from}"))
                    .spawn(move || -> Result<()> {
                        if let Err(e) = tcpwin_common::netns::enter_thread(&ns) {
                            let _ = ready.send(Err(format!("entering the path namespace: {e}")));
                            return Ok(());
                        }
                        let (rx, tx) = match open(&from, &to, mtu) {
                            Ok(v) => v,
                            Err(e) => {
                                let _ = ready.send(Err(format!("{e:#}")));
                                return Ok(());
                            }
                        };
                        // a frame must leave when due, not when the sender's or receiver's
                        // time slice ends: real-time priority where allowed (root), the
                        // threads sleep between frames
                        let prio = libc::sched_param { sched_priority: 10 };
                        // SAFETY: a valid sched_param for this thread.
                        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) };
                        // SAFETY: prctl with plain integer arguments, this thread only.
                        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
                        let _ = ready.send(Ok(()));
                        forward(rx, tx, one_way, queue_limit, neck, stop, st)
                    })
                    .context("starting a delay thread")?,
            );
        }
        let line = DelayLine {
            stop,
            threads,
            stats,
        };
        for _ in 0..2 {
            match ready_rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => bail!("the delay line cannot start: {e}"),
                Err(_) => bail!("the delay line did not start within 5 s"),
            }
        }
        Ok(line)
    }

    /// Both directions added up (read while running or after).
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in &self.stats {
            t.forwarded += s.forwarded.load(Ordering::Relaxed);
            t.queue_drops += s.queue_drops.load(Ordering::Relaxed);
            t.bottleneck_drops += s.bottleneck_drops.load(Ordering::Relaxed);
            t.lost += s.lost.load(Ordering::Relaxed);
            t.queue_full_retries += s.queue_full_retries.load(Ordering::Relaxed);
            t.send_retries += s.send_retries.load(Ordering::Relaxed);
            t.socket_drops += s.socket_drops.load(Ordering::Relaxed);
            t.late += s.late.load(Ordering::Relaxed);
            t.max_late_us = t.max_late_us.max(s.max_late_us.load(Ordering::Relaxed));
            t.rx_late += s.rx_late.load(Ordering::Relaxed);
            t.max_rx_wait_us = t
                .max_rx_wait_us
                .max(s.max_rx_wait_us.load(Ordering::Relaxed));
            // a round trip is a frame each way: the directions' means add up
            let n = s.forwarded.load(Ordering::Relaxed);
            t.added_rtt_us += s
                .added_us
                .load(Ordering::Relaxed)
                .checked_div(n)
                .unwrap_or(0);
        }
        t
    }

    /// Resets the counters (between runs on one path).
    pub fn reset(&self) {
        for s in &self.stats {
            for c in [
                &s.forwarded,
                &s.queue_drops,
                &s.bottleneck_drops,
                &s.lost,
                &s.queue_full_retries,
                &s.send_retries,
                &s.late,
                &s.max_late_us,
                &s.rx_late,
                &s.max_rx_wait_us,
                &s.added_us,
                &s.socket_drops,
            ] {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbox(bottleneck: Option<Bottleneck>) -> Inbox {
        Inbox {
            queue: VecDeque::new(),
            queued: 0,
            queue_limit: 1 << 20,
            delay: Duration::from_millis(9),
            bottleneck,
            loss_ppm: 0,
            rng: 1,
            link_free: Instant::now(),
            free: Vec::new(),
        }
    }

    /// A ring whose sends the kernel refuses `refusals` times (ENOBUFS, as a full veth queue
    /// does), holding `slots` frames: the refusals wait in their slots for the next send.
    struct Refusing {
        slots: usize,
        waiting: usize,
        refusals: u32,
        sent: usize,
    }

    impl Ring for Refusing {
        fn put(&mut self, _: &[u8]) -> bool {
            if self.waiting == self.slots {
                return false;
            }
            self.waiting += 1;
            true
        }
        fn flush(&mut self) -> Sent {
            if self.refusals > 0 {
                self.refusals -= 1;
                return Sent::QueueFull;
            }
            self.sent += std::mem::take(&mut self.waiting);
            Sent::All
        }
        fn unsent(&self) -> bool {
            // every accepted send empties the slots
            self.waiting > 0
        }
    }

    fn due_now(b: &mut Inbox, n: usize, now: Instant) {
        for _ in 0..n {
            b.queued += 100;
            b.queue.push_back((now, vec![0u8; 100]));
        }
    }

    /// Sends refused until the ring is full: the full ring is handed over again, so every
    /// due frame leaves (the line used to wait forever for a free slot that only a send
    /// frees). Each refusal is counted as the veth's queue full.
    #[test]
    fn a_ring_full_of_refused_frames_is_sent_again() {
        let mut b = inbox(None);
        let now = Instant::now();
        due_now(&mut b, 3, now);
        let mut ring = Refusing {
            slots: 2,
            waiting: 0,
            refusals: 3,
            sent: 0,
        };
        let st = DirStats::default();
        assert_eq!(hand_over(&mut b, &mut ring, now, &st), 2);
        assert_eq!((ring.waiting, ring.sent), (2, 0), "both refused");
        // the full ring is sent again with no slot free: refused twice more, then taken
        for _ in 0..3 {
            assert_eq!(hand_over(&mut b, &mut ring, now, &st), 0);
        }
        assert_eq!((ring.waiting, ring.sent, b.queue.len()), (0, 2, 1));
        assert_eq!(hand_over(&mut b, &mut ring, now, &st), 1);
        assert!(b.queue.is_empty());
        assert_eq!(ring.sent, 3, "every frame sent");
        assert_eq!(st.queue_full_retries.load(Ordering::Relaxed), 3);
        assert_eq!(st.forwarded.load(Ordering::Relaxed), 3);
    }

    /// Frames a refused send left in the ring, with nothing more to read: the ring is kicked
    /// again on its own (the line used to wait for the next frame to fall due, and a sender whose
    /// window sat in the ring waited for its retransmission timeout), and the line comes back
    /// within 100 µs rather than sleeping until a frame arrives.
    #[test]
    fn frames_a_send_left_are_sent_without_a_new_frame() {
        let mut b = inbox(None);
        let now = Instant::now();
        due_now(&mut b, 2, now);
        let mut ring = Refusing {
            slots: 8,
            waiting: 0,
            refusals: 1,
            sent: 0,
        };
        let st = DirStats::default();
        assert_eq!(hand_over(&mut b, &mut ring, now, &st), 2);
        assert!(b.queue.is_empty() && ring.unsent());
        assert_eq!(read_wait(&b, ring.unsent(), now), RETRY_AFTER);
        assert_eq!(hand_over(&mut b, &mut ring, now, &st), 0);
        assert_eq!((ring.sent, ring.unsent()), (2, false));
        assert_eq!(read_wait(&b, ring.unsent(), now), Duration::from_millis(50));
        assert_eq!(st.queue_full_retries.load(Ordering::Relaxed), 1);
    }

    /// Frames read one after the other while the clock moves (a long drain): each is due
    /// `delay` after its own reading, never after the drain's start.
    #[test]
    fn each_frame_is_due_a_delay_after_it_was_read() {
        for neck in [
            None,
            Some(Bottleneck {
                rate_bps: 1_000_000_000,
                queue_bytes: 1 << 20,
            }),
        ] {
            let mut b = inbox(neck);
            // frames arrive 4 ms apart while the line reads them: the clock moves with each
            // reading, and each frame's reading time is kept
            let clock = std::cell::Cell::new(Instant::now());
            let mut read_at = Vec::new();
            let mut recv = |buf: &mut [u8]| {
                if read_at.len() == 3 {
                    return None;
                }
                clock.set(clock.get() + Duration::from_millis(4));
                read_at.push(clock.get());
                buf[0] = read_at.len() as u8;
                Some((100, None))
            };
            let mut now = || clock.get();
            b.take(&mut recv, &mut now, &DirStats::default());
            assert_eq!((b.queue.len(), read_at.len()), (3, 3));
            for ((due, _), read) in b.queue.iter().zip(&read_at) {
                assert!(
                    *due >= *read + b.delay,
                    "{neck:?}: due {due:?} read {read:?}"
                );
            }
        }
    }
}
