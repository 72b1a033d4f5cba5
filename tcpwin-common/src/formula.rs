//! The receive-window formulas of the kernel, once, for both sides (const: usable in BPF code).

/// What `tcp_measure_rcv_mss` (6.6+) measures from a data packet, in 256ths:
/// `(skb->len << 8) / skb->truesize`. `None` for a truesize of 0 (nothing to divide by).
/// The kernel stores the result in a u8 (0 becomes 1); values of 256 and more mean the driver
/// under-reports truesize, and are returned unwrapped so they can be flagged.
pub const fn ratio(len: u32, truesize: u32) -> Option<u64> {
    if truesize == 0 {
        None
    } else {
        Some(((len as u64) << 8) / truesize as u64)
    }
}

/// `tcp_win_from_space` since 6.6: the window a buffer of `space` bytes allows at `ratio`.
pub const fn win_from_space(space: u64, ratio: u8) -> u64 {
    (space * ratio as u64) >> 8
}

/// The inverse: the buffer (`sk_rcvbuf`) needed for a window of `win` bytes at `ratio`,
/// rounded up (`tcp_space_from_win`). `None` for a ratio of 0.
pub const fn space_from_win(win: u64, ratio: u8) -> Option<u64> {
    if ratio == 0 {
        None
    } else {
        Some((win << 8).div_ceil(ratio as u64))
    }
}

/// `tcp_adv_win_scale` as a ratio in 256ths (the pre-6.6 `tcp_win_from_space`): for n > 0 the
/// window is `space - space >> n`, for n <= 0 it is `space >> -n`.
pub const fn adv_win_scale_ratio(n: i32) -> u32 {
    if n > 0 {
        let n = if n > 31 { 31 } else { n };
        256 - (256 >> n)
    } else {
        let m = if n < -31 { 31 } else { -n };
        256 >> m
    }
}

/// The largest window a connection can ever advertise with receive scale `wscale`
/// (`65535 << wscale`; 65535 when scaling was not negotiated).
pub const fn max_scaled_window(wscale: u8) -> u64 {
    65535u64 << if wscale > 14 { 14 } else { wscale }
}

/// The receive window scale the handshake chooses (`tcp_select_initial_window`, scaling on):
/// from the largest of the socket's space and the host's caps (`tcp_rmem[2]`,
/// `net.core.rmem_max`), held to the window clamp the handshake starts with (an SO_RCVBUF
/// socket's buffer at the initial ratio, a route's `window` metric; 0: none), as
/// `ilog2(space) - 15` between 0 and 14. Fixed for the connection's life.
pub const fn handshake_wscale(space: u64, tcp_rmem_max: u64, rmem_max: u64, clamp: u64) -> u8 {
    let mut s = space;
    if tcp_rmem_max > s {
        s = tcp_rmem_max;
    }
    if rmem_max > s {
        s = rmem_max;
    }
    // u32 arithmetic in the kernel: at most U32_MAX
    if s > u32::MAX as u64 {
        s = u32::MAX as u64;
    }
    if clamp > 0 && clamp < s {
        s = clamp;
    }
    if s == 0 {
        return 0;
    }
    let log = 63 - s.leading_zeros() as i64;
    let w = log - 15;
    if w < 0 {
        0
    } else if w > 14 {
        14
    } else {
        w as u8
    }
}

/// The smallest receive scale that can express a window of `w` bytes.
pub const fn wscale_for(w: u64) -> u8 {
    let mut s = 0u8;
    while s < 14 && max_scaled_window(s) < w {
        s += 1;
    }
    s
}

/// `sk_rcvbuf` after `setsockopt(SO_RCVBUF, val)` (`__sock_set_rcvbuf`): the request capped
/// by `net.core.rmem_max`, doubled for overhead, at least `SOCK_MIN_RCVBUF` (2048 + 2 x the
/// skb overhead; the kernel's value is passed in).
pub const fn so_rcvbuf(val: u64, rmem_max: u64, min_rcvbuf: u64) -> u64 {
    let capped = if val < rmem_max { val } else { rmem_max };
    let doubled = capped * 2;
    if doubled > min_rcvbuf {
        doubled
    } else {
        min_rcvbuf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_cells() {
        // KERNEL-NOTES: 1448/2280 -> 162, 7240/8072 -> 229, 8948/9780 -> 234
        assert_eq!(ratio(1448, 2280), Some(162));
        assert_eq!(ratio(7240, 8072), Some(229));
        assert_eq!(ratio(8948, 9780), Some(234));
        assert_eq!(ratio(1, 0), None);
        assert_eq!(win_from_space(1 << 20, 162), 663_552);
        assert_eq!(space_from_win(663_552, 162), Some(1 << 20));
        assert_eq!(space_from_win(2_250_000, 162), Some(3_555_556));
        assert_eq!(max_scaled_window(0), 65535);
        assert_eq!(max_scaled_window(7), 65535 << 7);
        assert_eq!(so_rcvbuf(4 << 20, 425_984, 4608), 851_968);
        assert_eq!(so_rcvbuf(1, 425_984, 4608), 4608);
        // measured here (KERNEL-NOTES): iperf3 -w 1004300 locks a buffer of 2008600 whose
        // initial window (ratio 128) is 1004300: scale 4, a window of at most 1048560;
        // -w 1100K: scale 5
        assert_eq!(handshake_wscale(1_004_300, 33554432, 4194304, 1_004_300), 4);
        assert_eq!(handshake_wscale(1_126_400, 33554432, 4194304, 1_126_400), 5);
        // autotuned: the host's largest cap decides (tcp_rmem[2] 32 MiB: 10)
        assert_eq!(handshake_wscale(65536, 33554432, 4194304, 0), 10);
        // a route's window 65536: scale 1, at most 131070
        assert_eq!(handshake_wscale(65536, 33554432, 4194304, 65536), 1);
        assert_eq!(wscale_for(65535), 0);
        assert_eq!(wscale_for(1_048_561), 5);
        assert_eq!(wscale_for(u64::MAX), 14);
    }

    #[test]
    fn estab_keys_round_trip() {
        for (ns, ok, passive) in [(4026531840u32, true, false), (7, false, true)] {
            assert_eq!(
                super::super::estab_parts(super::super::estab_key(ns, ok, passive)),
                (ns, ok, passive)
            );
        }
    }

    #[test]
    fn adv_win_scale_equivalents() {
        // n=1 gives half the buffer, n=2 three quarters
        assert_eq!(adv_win_scale_ratio(1), 128);
        assert_eq!(adv_win_scale_ratio(2), 192);
        assert_eq!(adv_win_scale_ratio(0), 256);
        assert_eq!(adv_win_scale_ratio(-1), 128);
        assert_eq!(adv_win_scale_ratio(-2), 64);
        assert_eq!(adv_win_scale_ratio(31), 256);
        assert_eq!(adv_win_scale_ratio(-31), 0);
    }
}
