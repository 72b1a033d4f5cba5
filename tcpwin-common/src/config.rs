//! The run-time settings userspace writes into the programs' `.rodata` beside the offsets:
//! the filters (PID, ports, address) and switches.

/// Run-time settings written into `.rodata` next to [`Offsets`](crate::Offsets).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// tgid whose sockets are traced (with `filter_pid` = 1)
    pub target_tgid: u32,
    /// 1: only sockets owned by `target_tgid` (see the owner maps)
    pub filter_pid: u8,
    /// 1: read a socket's cookie from the socket (`skc_cookie`: 0 until something asked for it)
    /// instead of calling `bpf_get_socket_cookie`, which kernels before 5.12 refuse in tracing
    /// programs (the loader sets it when the verifier says so)
    pub cookie_by_read: u8,
    /// 0 = any; else either end's port must match
    pub port: u16,
    /// 0 = any; else the inode of the one network namespace traced (`--netns NAME`, the
    /// caller's by default, a `--pid`'s own)
    pub netns: u32,
    /// `--addr`: 0 = any; 4 = either end's IPv4 address (a dual-stack socket's IPv4-mapped one
    /// included) masked by `addr_mask[0]` is `addr[0]`; 6 = either end's IPv6 address masked
    /// word by word is `addr`. Words as the kernel keeps addresses (network byte order in memory).
    pub addr_family: u8,
    pub _pad: [u8; 3],
    pub addr: [u32; 4],
    pub addr_mask: [u32; 4],
}

impl Config {
    /// Whether the trace follows one process (and so its forks): `--pid`, not a workload's
    /// processes (`u32::MAX`: a container or cgroup, followed by cgroup id).
    pub const fn follows_a_process(&self) -> bool {
        self.filter_pid != 0 && self.target_tgid != u32::MAX
    }

    /// The filters a session asks: sockets of a process (`--pid`), of a port (`--port`), of a
    /// network namespace (its inode; None: every namespace).
    pub const fn filter(pid: Option<u32>, port: Option<u16>, netns: Option<u32>) -> Config {
        Config {
            target_tgid: match pid {
                Some(p) => p,
                None => 0,
            },
            filter_pid: pid.is_some() as u8,
            cookie_by_read: 0,
            port: match port {
                Some(p) => p,
                None => 0,
            },
            netns: match netns {
                Some(n) => n,
                None => 0,
            },
            addr_family: 0,
            _pad: [0; 3],
            addr: [0; 4],
            addr_mask: [0; 4],
        }
    }

    /// With the address filter (`--addr`): `octets` of an IPv4 (the first 4) or IPv6 network,
    /// its first `len` bits compared.
    pub fn with_addr(self, ipv4: bool, octets: [u8; 16], len: u8) -> Config {
        // the network's first `len` bits set, from the first byte on (an IPv4 one in the first 4)
        let bits: u32 = if ipv4 { 32 } else { 128 };
        let mask =
            (u128::MAX.checked_shl(bits - len as u32).unwrap_or(0) << (128 - bits)).to_be_bytes();
        let word = |b: [u8; 16], w: usize| {
            u32::from_ne_bytes([b[w * 4], b[w * 4 + 1], b[w * 4 + 2], b[w * 4 + 3]])
        };
        let addr_mask: [u32; 4] = core::array::from_fn(|w| word(mask, w));
        let addr: [u32; 4] = core::array::from_fn(|w| word(octets, w) & addr_mask[w]);
        Config {
            addr_family: if ipv4 { 4 } else { 6 },
            addr,
            addr_mask,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_filter_is_kept_as_the_kernel_keeps_addresses() {
        let v4 = |a: [u8; 4], len| {
            let mut o = [0u8; 16];
            o[..4].copy_from_slice(&a);
            Config::default().with_addr(true, o, len)
        };
        let c = v4([10, 1, 2, 3], 8);
        assert_eq!(c.addr_family, 4);
        assert_eq!(c.addr[0], u32::from_ne_bytes([10, 0, 0, 0]));
        assert_eq!(c.addr_mask[0], u32::from_ne_bytes([255, 0, 0, 0]));
        assert_eq!(c.addr_mask[1..], [0; 3]);
        let c = v4([192, 168, 7, 255], 21);
        assert_eq!(c.addr_mask[0], u32::from_ne_bytes([255, 255, 248, 0]));
        assert_eq!(c.addr[0], u32::from_ne_bytes([192, 168, 0, 0]));
        assert_eq!(v4([1, 2, 3, 4], 32).addr_mask[0], u32::MAX);
        assert_eq!(v4([1, 2, 3, 4], 0).addr_mask[0], 0);
        // 2001:db8::/33: two words whole, the third's first bit
        let mut o = [0u8; 16];
        o[..5].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0xff]);
        o[15] = 1;
        let c = Config::default().with_addr(false, o, 33);
        assert_eq!(c.addr_family, 6);
        assert_eq!(
            c.addr_mask,
            [u32::MAX, u32::from_ne_bytes([0x80, 0, 0, 0]), 0, 0]
        );
        assert_eq!(
            c.addr,
            [
                u32::from_ne_bytes([0x20, 0x01, 0x0d, 0xb8]),
                u32::from_ne_bytes([0x80, 0, 0, 0]),
                0,
                0
            ]
        );
        assert_eq!(Config::default().addr_family, 0);
    }
}
