//! Kernel struct layouts from BTF (`/sys/kernel/btf/vmlinux`), resolved at every start.
//!
//! Nothing is baked in at build time: each member the programs read is looked up by name (through
//! anonymous structs/unions, the way the C compiler sees it) and its size is checked. A member the
//! running kernel does not have, or whose size is not what the programs read, is marked absent
//! (`ABSENT`) and never read; [`Layout::absent`] lists them for the user.
use std::path::Path;

use anyhow::{bail, Context, Result};
use std::sync::Arc;

use btf_rs::{Btf, Struct, Type};
use tcpwin_common::{Offsets, ABSENT};

pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// The kernel's BTF as a process uses it, parsed once per process and file: the layout the
/// programs read with (btf-rs), and aya's parse of the same file (program loading and the BTF
/// attach points need it). The tracer, the socket iterator and `check` share it.
pub struct KernelBtf {
    pub layout: Layout,
    pub aya: aya::Btf,
}

type Parsed = std::sync::Mutex<Vec<(std::path::PathBuf, Arc<KernelBtf>)>>;
static PARSED: Parsed = std::sync::Mutex::new(Vec::new());

/// The kernel BTF at `path`, parsed on first use and kept until [`release`]; with `known`, the
/// layout is not resolved again (`cache::kernel_btf` gives the one this build resolved before).
/// The second value says whether the layout was resolved here.
pub fn kernel_btf_with(
    path: &Path,
    known: impl FnOnce() -> Option<Layout>,
) -> Result<(Arc<KernelBtf>, bool)> {
    let mut parsed = PARSED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, k)) = parsed.iter().find(|(p, _)| p == path) {
        return Ok((k.clone(), false));
    }
    // the walk over the BTF's types is most of the cost
    let (layout, resolved) = match known() {
        Some(l) => (l, false),
        None => (Resolver::from_file(path)?.layout()?, true),
    };
    let aya = aya::Btf::parse_file(path, aya::Endianness::default())
        .with_context(|| format!("aya cannot parse BTF from {}", path.display()))?;
    // one per file a process names (in practice one)
    let k = Arc::new(KernelBtf { layout, aya });
    parsed.push((path.to_path_buf(), k.clone()));
    Ok((k, resolved))
}

/// Forgets the parsed BTF: once a long-lived process (the exporter) loaded what it needs, the
/// tens of MiB go back (those still holding it keep it until they drop it).
pub fn release() {
    PARSED.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// A resolved member: offset in bits from the start of the outer struct, width for bitfields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub bit_offset: u32,
    pub bitfield: Option<u32>,
    pub size: usize,
}

pub struct Layout {
    pub offsets: Offsets,
    /// `struct.path` of every member the kernel lacks (or that changed size), with the reason
    pub absent: Vec<(String, String)>,
}

impl Layout {
    pub fn has_scaling_ratio(&self) -> bool {
        self.offsets.tp_scaling_ratio != ABSENT
    }
}

pub struct Resolver {
    btf: Btf,
}

impl Resolver {
    pub fn from_file(path: &Path) -> Result<Self> {
        if !path.exists() {
            if path == Path::new(VMLINUX) {
                bail!(
                    "{VMLINUX} does not exist: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y is needed, Linux 5.5+); \
                     tcpwin-trace resolves kernel struct layouts from it"
                );
            }
            bail!("--btf {}: no such file", path.display());
        }
        if let Err(e) = std::fs::File::open(path) {
            bail!("cannot read BTF from {}: {e}", path.display());
        }
        let btf = Btf::from_file(path)
            .with_context(|| format!("cannot parse BTF from {}", path.display()))?;
        Ok(Resolver { btf })
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Ok(Resolver {
            btf: Btf::from_bytes(bytes).context("cannot parse BTF")?,
        })
    }

    fn find_struct(&self, name: &str) -> Option<Struct> {
        self.btf
            .resolve_types_by_name(name)
            .ok()?
            .into_iter()
            .find_map(|t| match t {
                Type::Struct(s) if !s.members.is_empty() => Some(s),
                _ => None,
            })
    }

    /// Follows typedefs and qualifiers to the type that has a layout.
    fn strip(&self, mut t: Type) -> Option<Type> {
        for _ in 0..32 {
            match t {
                Type::Typedef(_)
                | Type::Volatile(_)
                | Type::Const(_)
                | Type::Restrict(_)
                | Type::TypeTag(_) => {
                    t = self.btf.resolve_chained_type(t.as_btf_type()?).ok()?;
                }
                other => return Some(other),
            }
        }
        None
    }

    fn size_of(&self, t: &Type) -> Option<usize> {
        Some(match t {
            Type::Int(i) => i.size(),
            Type::Ptr(_) => 8,
            Type::Enum(e) => e.size(),
            Type::Enum64(e) => e.size(),
            Type::Struct(s) | Type::Union(s) => s.size(),
            Type::Array(a) => {
                let elem = self.strip(self.btf.resolve_chained_type(a).ok()?)?;
                self.size_of(&elem)? * a.len()
            }
            Type::Float(f) => f.size(),
            _ => return None,
        })
    }

    /// Looks `name` up in `s`, descending into anonymous members.
    fn member_in(&self, s: &Struct, name: &str) -> Option<(Member, Type)> {
        for m in &s.members {
            let mname = self.btf.resolve_name(m).unwrap_or_default();
            let ty = self.strip(self.btf.resolve_chained_type(m).ok()?)?;
            if mname == name {
                let size = self.size_of(&ty)?;
                return Some((
                    Member {
                        bit_offset: m.bit_offset(),
                        bitfield: m.bitfield_size().filter(|b| *b != 0),
                        size,
                    },
                    ty,
                ));
            }
            if mname.is_empty() {
                if let Type::Struct(inner) | Type::Union(inner) = &ty {
                    if let Some((mut found, t)) = self.member_in(inner, name) {
                        found.bit_offset += m.bit_offset();
                        return Some((found, t));
                    }
                }
            }
        }
        None
    }

    /// Resolves `path` ("icsk_ack.rcv_mss") inside struct `root`.
    pub fn member(&self, root: &str, path: &str) -> Option<Member> {
        let mut s = self.find_struct(root)?;
        let mut base = 0;
        let parts: Vec<&str> = path.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let (m, ty) = self.member_in(&s, part)?;
            if i + 1 == parts.len() {
                return Some(Member {
                    bit_offset: base + m.bit_offset,
                    ..m
                });
            }
            base += m.bit_offset;
            match ty {
                Type::Struct(inner) | Type::Union(inner) => s = inner,
                _ => return None,
            }
        }
        None
    }

    /// Resolves every member the programs read.
    pub fn layout(&self) -> Result<Layout> {
        let mut absent = Vec::new();
        let mut o = Offsets::absent();
        for structure in ["sock_common", "sock", "tcp_sock", "sk_buff"] {
            if self.find_struct(structure).is_none() {
                bail!("the kernel's BTF has no `struct {structure}`: is this a kernel image with networking and BTF?");
            }
        }
        self.plain_members(&mut o, &mut absent);
        self.derived_members(&mut o, &mut absent);
        // Layout facts the programs rely on: the socket is the first member of tcp_sock, and
        // sock_common the first member of sock.
        if self.member("tcp_sock", "inet_conn").map(|m| m.bit_offset) != Some(0)
            || self.member("sock", "__sk_common").map(|m| m.bit_offset) != Some(0)
        {
            bail!("unexpected layout: struct sock is not at the start of struct tcp_sock");
        }
        let essential = [
            ("sock_common.skc_num", o.skc_num),
            ("tcp_sock.window_clamp", o.tp_window_clamp),
            ("sk_buff.len", o.skb_len),
            ("sk_buff.truesize", o.skb_truesize),
        ];
        if let Some((name, _)) = essential.iter().find(|(_, v)| *v == ABSENT) {
            bail!("the kernel's BTF lacks `{name}` (or it changed type): tcpwin-trace cannot trace this kernel");
        }
        Ok(Layout { offsets: o, absent })
    }

    /// The members read as they are: each at its offset, of the size the programs read.
    fn plain_members(&self, o: &mut Offsets, absent: &mut Vec<(String, String)>) {
        // (field, struct, path, expected size in bytes)
        let plain: [(&mut u32, &str, &str, usize); 63] = [
            (&mut o.skc_family, "sock_common", "skc_family", 2),
            (&mut o.skc_state, "sock_common", "skc_state", 1),
            (&mut o.skc_num, "sock_common", "skc_num", 2),
            (&mut o.skc_dport, "sock_common", "skc_dport", 2),
            (&mut o.skc_rcv_saddr, "sock_common", "skc_rcv_saddr", 4),
            (&mut o.skc_daddr, "sock_common", "skc_daddr", 4),
            (
                &mut o.skc_v6_rcv_saddr,
                "sock_common",
                "skc_v6_rcv_saddr",
                16,
            ),
            (&mut o.skc_v6_daddr, "sock_common", "skc_v6_daddr", 16),
            (&mut o.skc_net, "sock_common", "skc_net", 8),
            (&mut o.skc_cookie, "sock_common", "skc_cookie", 8),
            (
                &mut o.inet_sport,
                "tcp_sock",
                "inet_conn.icsk_inet.inet_sport",
                2,
            ),
            (&mut o.net_ns_inum, "net", "ns.inum", 4),
            (&mut o.sk_rcvbuf, "sock", "sk_rcvbuf", 4),
            (&mut o.sk_userlocks, "sock", "sk_userlocks", 1),
            (&mut o.sk_socket, "sock", "sk_socket", 8),
            (&mut o.inode_i_ino, "inode", "i_ino", 8),
            (
                &mut o.icsk_rcv_mss,
                "tcp_sock",
                "inet_conn.icsk_ack.rcv_mss",
                2,
            ),
            (&mut o.tp_scaling_ratio, "tcp_sock", "scaling_ratio", 1),
            (&mut o.tp_window_clamp, "tcp_sock", "window_clamp", 4),
            (&mut o.tp_rcv_ssthresh, "tcp_sock", "rcv_ssthresh", 4),
            (&mut o.tp_rcv_wnd, "tcp_sock", "rcv_wnd", 4),
            (&mut o.tp_advmss, "tcp_sock", "advmss", 2),
            (&mut o.tp_rcvq_space, "tcp_sock", "rcvq_space.space", 4),
            (&mut o.skb_len, "sk_buff", "len", 4),
            (&mut o.skb_truesize, "sk_buff", "truesize", 4),
            (&mut o.skb_data, "sk_buff", "data", 8),
            (&mut o.skb_head, "sk_buff", "head", 8),
            (&mut o.skb_end, "sk_buff", "end", 4),
            (&mut o.skb_iif, "sk_buff", "skb_iif", 4),
            (&mut o.shinfo_gso_size, "skb_shared_info", "gso_size", 2),
            (&mut o.shinfo_gso_segs, "skb_shared_info", "gso_segs", 2),
            // the socket iterator's (`ss`)
            (&mut o.tp_rcv_nxt, "tcp_sock", "rcv_nxt", 4),
            (&mut o.tp_copied_seq, "tcp_sock", "copied_seq", 4),
            (&mut o.sk_rmem_alloc, "sock", "sk_backlog.rmem_alloc", 4),
            (&mut o.tp_rcv_rtt_us, "tcp_sock", "rcv_rtt_est.rtt_us", 4),
            (&mut o.tp_srtt_us, "tcp_sock", "srtt_us", 4),
            (&mut o.tp_bytes_received, "tcp_sock", "bytes_received", 8),
            (&mut o.tp_bytes_acked, "tcp_sock", "bytes_acked", 8),
            (&mut o.tp_snd_wnd, "tcp_sock", "snd_wnd", 4),
            (&mut o.sk_sndbuf, "sock", "sk_sndbuf", 4),
            (&mut o.sk_wmem_queued, "sock", "sk_wmem_queued", 4),
            (&mut o.tp_chrono_start, "tcp_sock", "chrono_start", 4),
            (&mut o.tp_chrono_stat, "tcp_sock", "chrono_stat", 12),
            (&mut o.tp_snd_cwnd, "tcp_sock", "snd_cwnd", 4),
            (&mut o.tp_packets_out, "tcp_sock", "packets_out", 4),
            (&mut o.tp_mss_cache, "tcp_sock", "mss_cache", 4),
            (&mut o.tp_mdev_us, "tcp_sock", "mdev_us", 4),
            (&mut o.tp_total_retrans, "tcp_sock", "total_retrans", 4),
            (&mut o.tp_lost_out, "tcp_sock", "lost_out", 4),
            (&mut o.tp_snd_ssthresh, "tcp_sock", "snd_ssthresh", 4),
            (&mut o.tp_lsndtime, "tcp_sock", "lsndtime", 4),
            (
                &mut o.icsk_lrcvtime,
                "tcp_sock",
                "inet_conn.icsk_ack.lrcvtime",
                4,
            ),
            (&mut o.tp_rcv_ooopack, "tcp_sock", "rcv_ooopack", 4),
            (&mut o.tp_write_seq, "tcp_sock", "write_seq", 4),
            (&mut o.tp_snd_nxt, "tcp_sock", "snd_nxt", 4),
            (&mut o.tp_app_limited, "tcp_sock", "app_limited", 4),
            (&mut o.sk_pacing_rate, "sock", "sk_pacing_rate", 8),
            (&mut o.sk_max_pacing_rate, "sock", "sk_max_pacing_rate", 8),
            (&mut o.socket_flags, "socket", "flags", 8),
            (&mut o.sk_rcvlowat, "sock", "sk_rcvlowat", 4),
            (&mut o.tp_notsent_lowat, "tcp_sock", "notsent_lowat", 4),
            (&mut o.tp_rcvq_time, "tcp_sock", "rcvq_space.time", 8),
            (&mut o.task_tgid, "task_struct", "tgid", 4),
        ];
        for (slot, st, path, size) in plain {
            match self.member(st, path) {
                Some(m) if m.bitfield.is_some() => {
                    absent.push((format!("{st}.{path}"), "is a bitfield here".into()))
                }
                Some(m) if m.size != size => absent.push((
                    format!("{st}.{path}"),
                    format!("is {} bytes here, expected {size}", m.size),
                )),
                Some(m) => *slot = m.bit_offset / 8,
                None => absent.push((format!("{st}.{path}"), "not in this kernel".into())),
            }
        }
    }

    /// The members found through another (a minmax's first sample, the inode beside a socket,
    /// bitfields, the control block inside `sk_buff.cb`).
    fn derived_members(&self, o: &mut Offsets, absent: &mut Vec<(String, String)>) {
        // `tcp_min_rtt()` is the value of the first sample of the `rtt_min` minmax
        // (`struct minmax { struct minmax_sample { u32 t; u32 v; } s[3]; }`)
        match self.member("tcp_sock", "rtt_min") {
            Some(m) if m.bitfield.is_none() && m.size == 24 => o.tp_rtt_min = m.bit_offset / 8 + 4,
            Some(m) => absent.push((
                "tcp_sock.rtt_min".into(),
                format!("is {} bytes here, expected 24", m.size),
            )),
            None => absent.push(("tcp_sock.rtt_min".into(), "not in this kernel".into())),
        }
        // The socket's inode sits beside it in `struct socket_alloc`.
        match (
            self.member("socket_alloc", "socket"),
            self.member("socket_alloc", "vfs_inode"),
        ) {
            (Some(s), Some(i)) if i.bit_offset >= s.bit_offset => {
                o.socket_to_inode = (i.bit_offset - s.bit_offset) / 8
            }
            _ => absent.push(("socket_alloc.vfs_inode".into(), "not in this kernel".into())),
        }
        for (bit, width, path) in [
            (
                &mut o.tp_rcv_wscale_bit,
                Some(&mut o.tp_rcv_wscale_bits),
                "rx_opt.rcv_wscale",
            ),
            (&mut o.tp_wscale_ok_bit, None, "rx_opt.wscale_ok"),
            (
                &mut o.tp_snd_wscale_bit,
                Some(&mut o.tp_snd_wscale_bits),
                "rx_opt.snd_wscale",
            ),
            (&mut o.tp_chrono_type_bit, None, "chrono_type"),
        ] {
            match self.member("tcp_sock", path) {
                Some(m) => {
                    *bit = m.bit_offset;
                    if let Some(w) = width {
                        *w = m.bitfield.unwrap_or((m.size * 8) as u32);
                    }
                }
                None => absent.push((format!("tcp_sock.{path}"), "not in this kernel".into())),
            }
        }
        // TCP_SKB_CB(skb): tcp_skb_cb lives in sk_buff.cb; tcp_flags is u8 or u16 by kernel, its
        // low byte (little-endian) holds FIN and SYN.
        if let (Some(cb), Some(seq), Some(end), Some(flags)) = (
            self.member("sk_buff", "cb"),
            self.member("tcp_skb_cb", "seq"),
            self.member("tcp_skb_cb", "end_seq"),
            self.member("tcp_skb_cb", "tcp_flags"),
        ) {
            if seq.size == 4 && end.size == 4 && (flags.size == 1 || flags.size == 2) {
                let base = cb.bit_offset / 8;
                o.skb_tcb_seq = base + seq.bit_offset / 8;
                o.skb_tcb_end_seq = base + end.bit_offset / 8;
                o.skb_tcb_flags = base + flags.bit_offset / 8;
            }
        } else {
            absent.push((
                "tcp_skb_cb".into(),
                "not in this kernel's BTF: payload length read from the TCP header".into(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny BTF writer for synthetic kernels.
    #[derive(Default)]
    struct BtfBuilder {
        types: Vec<u8>,
        strings: Vec<u8>,
        next_id: u32,
    }

    const KIND_INT: u32 = 1;
    const KIND_PTR: u32 = 2;
    const KIND_STRUCT: u32 = 4;

    impl BtfBuilder {
        fn new() -> Self {
            BtfBuilder {
                strings: vec![0],
                next_id: 1,
                ..Default::default()
            }
        }
        fn str(&mut self, s: &str) -> u32 {
            if s.is_empty() {
                return 0;
            }
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(s.as_bytes());
            self.strings.push(0);
            off
        }
        fn header(&mut self, name: &str, kind: u32, vlen: u32, kflag: bool, size: u32) -> u32 {
            let n = self.str(name);
            let info = (kind << 24) | vlen | if kflag { 1 << 31 } else { 0 };
            for v in [n, info, size] {
                self.types.extend_from_slice(&v.to_le_bytes());
            }
            let id = self.next_id;
            self.next_id += 1;
            id
        }
        fn int(&mut self, name: &str, bytes: u32) -> u32 {
            let id = self.header(name, KIND_INT, 0, false, bytes);
            self.types.extend_from_slice(&(bytes * 8).to_le_bytes());
            id
        }
        fn ptr(&mut self, to: u32) -> u32 {
            self.header("", KIND_PTR, 0, false, to)
        }
        /// members: (name, type, bit offset, bitfield width)
        fn structure(&mut self, name: &str, size: u32, members: &[(&str, u32, u32, u32)]) -> u32 {
            let kflag = members.iter().any(|m| m.3 != 0);
            let id = self.header(name, KIND_STRUCT, members.len() as u32, kflag, size);
            for (mname, ty, bit, width) in members {
                let n = self.str(mname);
                let off = if kflag { (width << 24) | bit } else { *bit };
                for v in [n, *ty, off] {
                    self.types.extend_from_slice(&v.to_le_bytes());
                }
            }
            id
        }
        fn finish(self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&0xeb9fu16.to_le_bytes());
            out.push(1); // version
            out.push(0); // flags
            out.extend_from_slice(&24u32.to_le_bytes()); // hdr_len
            out.extend_from_slice(&0u32.to_le_bytes()); // type_off
            out.extend_from_slice(&(self.types.len() as u32).to_le_bytes());
            out.extend_from_slice(&(self.types.len() as u32).to_le_bytes()); // str_off
            out.extend_from_slice(&(self.strings.len() as u32).to_le_bytes());
            out.extend(self.types);
            out.extend(self.strings);
            out
        }
    }

    /// A 6.1-like kernel: everything tcpwin-trace needs except `tcp_sock.scaling_ratio`.
    fn synthetic(with_ratio: bool) -> Vec<u8> {
        let mut b = BtfBuilder::new();
        let u8_ = b.int("u8", 1);
        let u16_ = b.int("u16", 2);
        let u32_ = b.int("u32", 4);
        let u64_ = b.int("u64", 8);
        let v6 = b.structure("in6_addr", 16, &[("a", u64_, 0, 0), ("b", u64_, 64, 0)]);
        let ns = b.structure("ns_common", 16, &[("inum", u32_, 64, 0)]);
        // struct net { ...; struct ns_common ns at byte 120 }: rebuilt with the ns member
        let _net_full = b.structure("net", 136, &[("ns", ns, 120 * 8, 0)]);
        let voidp = b.ptr(0);
        let skc = b.structure(
            "sock_common",
            136,
            &[
                ("skc_daddr", u32_, 0, 0),
                ("skc_rcv_saddr", u32_, 32, 0),
                ("skc_dport", u16_, 96, 0),
                ("skc_num", u16_, 112, 0),
                ("skc_family", u16_, 128, 0),
                ("skc_state", u8_, 144, 0),
                ("skc_net", voidp, 192, 0),
                ("skc_v6_daddr", v6, 256, 0),
                ("skc_v6_rcv_saddr", v6, 384, 0),
                ("skc_cookie", u64_, 512, 0),
            ],
        );
        let sock = b.structure(
            "sock",
            800,
            &[
                ("__sk_common", skc, 0, 0),
                ("sk_rcvbuf", u32_, 244 * 8, 0),
                ("sk_userlocks", u8_, 300 * 8, 0),
                ("sk_socket", voidp, 400 * 8, 0),
            ],
        );
        let ack = b.structure("icsk_ack_t", 16, &[("rcv_mss", u16_, 64, 0)]);
        let icsk = b.structure(
            "inet_connection_sock",
            1200,
            &[("icsk_inet", sock, 0, 0), ("icsk_ack", ack, 1100 * 8, 0)],
        );
        let rx_opt = b.structure(
            "tcp_options_received",
            24,
            &[("wscale_ok", u16_, 131, 1), ("rcv_wscale", u16_, 140, 4)],
        );
        let space = b.structure("rcvq", 16, &[("space", u32_, 0, 0)]);
        let mut tp: Vec<(&str, u32, u32, u32)> = vec![
            ("inet_conn", icsk, 0, 0),
            ("rcv_ssthresh", u32_, 1404 * 8, 0),
            ("rcv_wnd", u32_, 1408 * 8, 0),
            ("advmss", u16_, 1412 * 8, 0),
            ("rx_opt", rx_opt, 1420 * 8, 0),
            ("rcvq_space", space, 1500 * 8, 0),
            ("window_clamp", u32_, 1676 * 8, 0),
        ];
        if with_ratio {
            tp.push(("scaling_ratio", u8_, 1462 * 8, 0));
        }
        b.structure("tcp_sock", 2300, &tp);
        let _ = b.structure(
            "sk_buff",
            232,
            &[
                ("len", u32_, 112 * 8, 0),
                ("skb_iif", u32_, 144 * 8, 0),
                ("end", u32_, 192 * 8, 0),
                ("head", voidp, 200 * 8, 0),
                ("data", voidp, 208 * 8, 0),
                ("truesize", u32_, 216 * 8, 0),
            ],
        );
        b.finish()
    }

    #[test]
    fn synthetic_kernel_without_scaling_ratio_reports_it_absent() {
        let r = Resolver::from_bytes(&synthetic(false)).unwrap();
        let l = r.layout().unwrap();
        assert!(!l.has_scaling_ratio());
        assert_eq!(l.offsets.tp_scaling_ratio, ABSENT);
        assert!(l
            .absent
            .iter()
            .any(|(n, why)| n == "tcp_sock.scaling_ratio" && why.contains("not in")));
        // what exists is still resolved, through nested structs and bitfields
        assert_eq!(l.offsets.tp_window_clamp, 1676);
        assert_eq!(l.offsets.icsk_rcv_mss, 1108);
        assert_eq!(l.offsets.tp_rcvq_space, 1500);
        assert_eq!(l.offsets.tp_rcv_wscale_bit, 1420 * 8 + 140);
        assert_eq!(l.offsets.tp_rcv_wscale_bits, 4);
        assert_eq!(l.offsets.sk_rcvbuf, 244);
        assert_eq!(l.offsets.skb_truesize, 216);
        // skb_shared_info is missing from the synthetic kernel: absent, not zero
        assert_eq!(l.offsets.shinfo_gso_size, ABSENT);
    }

    #[test]
    fn synthetic_kernel_with_scaling_ratio() {
        let l = Resolver::from_bytes(&synthetic(true))
            .unwrap()
            .layout()
            .unwrap();
        assert_eq!(l.offsets.tp_scaling_ratio, 1462);
    }

    #[test]
    fn wrong_size_is_absent_not_misread() {
        let mut b = BtfBuilder::new();
        let u64_ = b.int("u64", 8);
        b.structure("tcp_sock", 64, &[("window_clamp", u64_, 0, 0)]);
        let r = Resolver::from_bytes(&b.finish()).unwrap();
        let m = r.member("tcp_sock", "window_clamp").unwrap();
        assert_eq!(m.size, 8);
        // the full layout refuses: sock etc. are missing
        assert!(r.layout().is_err());
    }

    /// Against the running kernel: the offsets must agree with an independent reader (bpftool's
    /// C dump), when bpftool is installed; the members tcpwin-trace needs must all be present.
    #[test]
    fn running_kernel_layout() {
        let path = Path::new(VMLINUX);
        if !path.exists() {
            panic!("{VMLINUX} is missing: this test needs a kernel with BTF");
        }
        let l = Resolver::from_file(path).unwrap().layout().unwrap();
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release.trim().split(|c: char| !c.is_ascii_digit());
        let (maj, min): (u32, u32) = (
            v.next().unwrap().parse().unwrap(),
            v.next().unwrap().parse().unwrap(),
        );
        assert_eq!(
            l.has_scaling_ratio(),
            (maj, min) >= (6, 6),
            "{:?}",
            l.absent
        );
        for (name, off) in [
            ("window_clamp", l.offsets.tp_window_clamp),
            ("rcv_ssthresh", l.offsets.tp_rcv_ssthresh),
            ("skb truesize", l.offsets.skb_truesize),
            ("gso_size", l.offsets.shinfo_gso_size),
            ("socket_to_inode", l.offsets.socket_to_inode),
            ("rcv_wscale", l.offsets.tp_rcv_wscale_bit),
        ] {
            assert_ne!(off, ABSENT, "{name} unresolved: {:?}", l.absent);
        }
        // Independent check with pahole-style offsets from bpftool, when present.
        if let Ok(out) = std::process::Command::new("bpftool")
            .args(["btf", "dump", "file", VMLINUX, "format", "raw"])
            .output()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            let struct_at = text
                .find("STRUCT 'sk_buff' size=")
                .expect("sk_buff in bpftool dump");
            let body = &text[struct_at..];
            let line = body
                .lines()
                .find(|l| l.trim_start().starts_with("'truesize'"))
                .expect("truesize member");
            let bits: u32 = line
                .split("bits_offset=")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(l.offsets.skb_truesize, bits / 8);
        }
    }
}
