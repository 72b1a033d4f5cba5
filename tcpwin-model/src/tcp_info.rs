//! `struct tcp_info` (uapi `linux/tcp.h`, append-only) parsed from the bytes `getsockopt(TCP_INFO)`
//! or sock_diag's `INET_DIAG_INFO` return. A field the kernel's struct is too short to hold is
//! `None`: absent, never 0.

/// The fields tcpwin-trace uses, at their uapi offsets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub state: u8,
    /// `tcpi_snd_wscale`: the peer's shift (low nibble of byte 6)
    pub snd_wscale: u8,
    /// `tcpi_rcv_wscale`: our shift (high nibble)
    pub rcv_wscale: u8,
    /// `TCPI_OPT_WSCALE` in `tcpi_options`: window scaling negotiated
    pub wscale_ok: bool,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// `tcpi_unacked`: segments in flight (`packets_out`)
    pub unacked: u32,
    pub rcv_ssthresh: u32,
    /// smoothed RTT, µs (`srtt_us >> 3`)
    pub rtt_us: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    /// the receiver's RTT estimate, µs (0 until the first sample)
    pub rcv_rtt_us: u32,
    pub rcv_space: u32,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub min_rtt_us: Option<u32>,
    pub delivery_rate_bps: Option<u64>,
    /// chrono stats, µs: busy is the sum of the three states
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// `tcpi_snd_wnd` (5.4+): the peer's advertised window, bytes
    pub snd_wnd: Option<u32>,
    /// `tcpi_rcv_wnd` (6.2+): our advertised window, bytes
    pub rcv_wnd: Option<u32>,
    /// `tcpi_lost`, `tcpi_last_data_sent`, `tcpi_last_data_recv` (ms), `tcpi_rttvar` (µs),
    /// `tcpi_snd_ssthresh`, `tcpi_total_retrans`
    pub lost: u32,
    pub last_data_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub rttvar_us: u32,
    pub snd_ssthresh: u32,
    pub total_retrans: u32,
    /// `tcpi_pacing_rate`, bytes/s; `tcpi_notsent_bytes`; `tcpi_rcv_ooopack` (5.4+);
    /// `tcpi_delivery_rate_app_limited`
    pub pacing_rate: Option<u64>,
    /// `tcpi_max_pacing_rate`, bytes/s (SO_MAX_PACING_RATE; all ones: none set)
    pub max_pacing_rate: Option<u64>,
    pub notsent_bytes: Option<u32>,
    pub rcv_ooopack: Option<u32>,
    pub delivery_rate_app_limited: bool,
}

/// `TCPI_OPT_WSCALE`
const OPT_WSCALE: u8 = 4;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

impl TcpInfo {
    /// The size of the oldest `tcp_info` this reads (up to `tcpi_rcv_space`, Linux 2.6).
    pub const MIN_LEN: usize = 100;

    /// Parses the kernel's bytes; `None` when they are shorter than [`TcpInfo::MIN_LEN`].
    pub fn parse(b: &[u8]) -> Option<TcpInfo> {
        if b.len() < Self::MIN_LEN {
            return None;
        }
        let u = |off| u32_at(b, off).unwrap_or(0);
        Some(TcpInfo {
            state: b[0],
            snd_wscale: b[6] & 0x0f,
            rcv_wscale: b[6] >> 4,
            wscale_ok: b[5] & OPT_WSCALE != 0,
            snd_mss: u(16),
            rcv_mss: u(20),
            unacked: u(24),
            rcv_ssthresh: u(64),
            rtt_us: u(68),
            snd_cwnd: u(80),
            advmss: u(84),
            rcv_rtt_us: u(92),
            rcv_space: u(96),
            bytes_acked: u64_at(b, 120),
            bytes_received: u64_at(b, 128),
            min_rtt_us: u32_at(b, 148),
            delivery_rate_bps: u64_at(b, 160).map(|r| r.saturating_mul(8)),
            busy_us: u64_at(b, 168),
            rwnd_limited_us: u64_at(b, 176),
            sndbuf_limited_us: u64_at(b, 184),
            snd_wnd: u32_at(b, 228),
            rcv_wnd: u32_at(b, 232),
            lost: u(32),
            last_data_sent_ms: u(44),
            last_data_recv_ms: u(52),
            rttvar_us: u(72),
            snd_ssthresh: u(76),
            total_retrans: u(100),
            pacing_rate: u64_at(b, 104),
            max_pacing_rate: u64_at(b, 112),
            notsent_bytes: u32_at(b, 144),
            rcv_ooopack: u32_at(b, 224),
            delivery_rate_app_limited: b[7] & 1 != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_at_their_uapi_offsets() {
        let mut b = vec![0u8; 240];
        b[0] = 1;
        b[5] = OPT_WSCALE;
        b[6] = 0x79; // rcv 7, snd 9
        b[64..68].copy_from_slice(&64000u32.to_ne_bytes());
        b[148..152].copy_from_slice(&18000u32.to_ne_bytes());
        b[176..184].copy_from_slice(&5u64.to_ne_bytes());
        b[228..232].copy_from_slice(&524280u32.to_ne_bytes());
        let t = TcpInfo::parse(&b).unwrap();
        assert_eq!((t.rcv_wscale, t.snd_wscale, t.wscale_ok), (7, 9, true));
        assert_eq!(t.rcv_ssthresh, 64000);
        assert_eq!(t.min_rtt_us, Some(18000));
        assert_eq!(t.rwnd_limited_us, Some(5));
        assert_eq!(t.snd_wnd, Some(524280));
        assert_eq!(t.rcv_wnd, Some(0));
    }

    #[test]
    fn a_short_struct_leaves_newer_fields_absent() {
        let t = TcpInfo::parse(&[0u8; 232]).unwrap();
        assert_eq!(t.snd_wnd, Some(0));
        assert_eq!(t.rcv_wnd, None);
        let t = TcpInfo::parse(&[0u8; 104]).unwrap();
        assert_eq!(t.min_rtt_us, None);
        assert!(TcpInfo::parse(&[0u8; 50]).is_none());
    }
}
