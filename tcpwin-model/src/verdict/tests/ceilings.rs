//! The ranked ceilings: each computed from the reading with the kernel's arithmetic at the base
//! RTT, lowest first, and the fix saying what binds next.
use super::*;

/// The 003 story with both ends read: the receiver's locked SO_RCVBUF (851 968 at ratio 162:
/// 539 136 B) binds at 240 Mbit/s over 18 ms; then the sender's congestion window (2000 x 1448),
/// its send buffer (autotuned up to tcp_wmem[2] 4 MiB) and the handshake's scale 7.
#[test]
fn every_ceiling_ranked_lowest_first() {
    let h = host();
    let (vs, vr) = both(
        (
            &snd(1.0, 0, 0, 0),
            &snd(2.0, 230_000_000 / 8, 1_000_000, 900_000),
        ),
        (&rcv(1.0, 0), &rcv(2.0, 230_000_000 / 8)),
        &h,
        None,
    );
    assert_eq!(vr.limit, Limit::RcvbufLocked, "{vr:?}");
    let got: Vec<(Kind, u64)> = vr.ceilings.iter().map(|c| (c.kind, c.bytes)).collect();
    assert_eq!(
        got,
        [
            (Kind::ReceiveBuffer, win_from_space(851_968, 162)),
            (Kind::CongestionWindow, 2000 * 1448),
            (Kind::SendBuffer, 4_194_304),
            (Kind::WindowScale, 65535 << 7),
        ]
    );
    for c in &vr.ceilings {
        assert_eq!(
            c.rate_bps,
            c.bytes * 8 * 1_000_000 / (18 * MS) as u64,
            "{c:?}"
        );
    }
    assert_eq!(vr.ceilings[1].end, "sender");
    // both ends say the same
    assert_eq!(vs.ceilings, vr.ceilings);
    // the fix (per 1 Gbit/s at 18 ms) lifts the buffer to 1.25 Gbit/s, still under the cwnd's
    // 1.29: nothing else binds before it, so nothing is named next
    let lifted = vr.fix.as_ref().unwrap().ceiling_bps.unwrap();
    assert!(lifted < vr.ceilings[1].rate_bps);
    assert_eq!(vr.next, None);
}

/// Two ceilings within a tenth of each other: the receiver's locked buffer (539 136 B) and the
/// sender's congestion window at 380 segments (550 240 B, 2 % above it) bind together: both are
/// named, and lifting either alone gives the other's rate at most.
#[test]
fn two_ceilings_within_a_tenth_are_said_as_two() {
    let h = host();
    let s = |ts: f64, acked: u64, busy: u64, rwnd: u64| {
        let mut f = snd(ts, acked, busy, rwnd);
        f.snd_cwnd = Some(380);
        f.packets_out = Some(360);
        f
    };
    let (_, vr) = both(
        (
            &s(1.0, 0, 0, 0),
            &s(2.0, 230_000_000 / 8, 1_000_000, 900_000),
        ),
        (&rcv(1.0, 0), &rcv(2.0, 230_000_000 / 8)),
        &h,
        None,
    );
    assert_eq!(vr.limit, Limit::RcvbufLocked, "{vr:?}");
    let next = vr.next.unwrap();
    assert!(
        next.starts_with("two limits at once: the sender's congestion window too, at 244.6 Mbit/s"),
        "{next}"
    );
    assert!(
        next.contains("lifting either alone gives 244.6 Mbit/s at most"),
        "{next}"
    );
}

/// With `--target` 2 Gbit/s: the receiver's buffer binds; the sender's cwnd (1.29 Gbit/s) and
/// send buffer (1.86 Gbit/s) are below the target too, and only the other end can lift them.
#[test]
fn below_the_target_names_which_end_can_lift_each() {
    let h = host();
    let (_, vr) = both(
        (
            &snd(1.0, 0, 0, 0),
            &snd(2.0, 230_000_000 / 8, 1_000_000, 900_000),
        ),
        (&rcv(1.0, 0), &rcv(2.0, 230_000_000 / 8)),
        &h,
        Some(2_000_000_000),
    );
    assert_eq!(vr.limit, Limit::RcvbufLocked, "{vr:?}");
    let next = vr.next.unwrap();
    assert!(
        next.starts_with("then: the sender's congestion window, 1.29 Gbit/s"),
        "{next}"
    );
    assert!(
        next.contains("only the other end (or the path) can lift: congestion-window 1.29 Gbit/s, send-buffer 1.86 Gbit/s"),
        "{next}"
    );
}

/// A sender alone sees the peer's window, not the receiver's settings; nothing moving, no
/// ceilings at all.
#[test]
fn a_sender_alone_ranks_the_peers_window_and_an_idle_one_nothing() {
    let h = host();
    let v = judge(
        &snd(1.0, 0, 0, 0),
        &snd(2.0, 230_000_000 / 8, 1_000_000, 900_000),
        &h,
        None,
    );
    let kinds: Vec<Kind> = v.ceilings.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [Kind::PeerWindow, Kind::CongestionWindow, Kind::SendBuffer]
    );
    let v = judge(&snd(1.0, 0, 0, 0), &snd(2.0, 0, 0, 0), &h, None);
    assert!(v.ceilings.is_empty(), "{v:?}");
}
