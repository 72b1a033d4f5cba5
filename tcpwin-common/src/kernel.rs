//! The kernel's own constants the programs compare against: TCP states, address families, the
//! `sk_userlocks` bits.

/// TCP states (include/net/tcp_states.h).
pub mod tcp_state {
    pub const ESTABLISHED: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECV: u8 = 3;
    pub const CLOSE: u8 = 7;
    pub const LISTEN: u8 = 10;

    /// ESTABLISHED and the closing states that still receive or hold data; not LISTEN, SYN_*,
    /// TIME_WAIT or CLOSE, where the window fields are not (or no longer) meaningful.
    pub const fn carries_data(state: u8) -> bool {
        matches!(state, 1 | 4 | 5 | 8 | 9 | 11)
    }
}

/// Address families as `Event::family` carries them.
pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

/// `SOCK_RCVBUF_LOCK` in `sk_userlocks` (`SO_RCVBUF`: receive autotuning off).
pub const SOCK_RCVBUF_LOCK: u8 = 2;
/// `SOCK_SNDBUF_LOCK` in `sk_userlocks` (`SO_SNDBUF`: send buffer autotuning off).
pub const SOCK_SNDBUF_LOCK: u8 = 1;
/// `SOCK_NOSPACE` in `socket.flags` (include/linux/net.h): set when a writer found the send buffer
/// full (`tcp_sendmsg`'s wait for space, `tcp_poll` finding it unwritable), cleared when the
/// kernel wakes it (`sk_stream_write_space`). The kernel's own sndbuf-limited chrono starts only
/// on it, and only while the congestion window has room and nothing waits unsent
/// (`tcp_cwnd_validate`), so a reno sender its buffer holds can count 0 %.
pub const SOCK_NOSPACE: u32 = 1 << 2;
