//! What each kernel version gets wrong or changed about the receive window, keyed by the running
//! version (`uname -r`): `check` prints the lines that apply, the verdicts cite them. Pure: a
//! version string in, notes out. Sources: the kernel commits named in each note.

/// A kernel version as `uname -r` starts: major.minor.patch, and the rc number of a release
/// candidate (`6.18.0-rc3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// `Some(n)` for `-rcN`: before the release
    pub rc: Option<u32>,
}

impl Version {
    /// `6.18.44-fc-v657`, `7.2.13+deb14-cloud-amd64`, `6.18.0-rc4`, `5.10.0-30-cloud-amd64`.
    pub fn parse(release: &str) -> Option<Version> {
        let head: String = release
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut it = head.split('.').filter(|s| !s.is_empty());
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        let patch = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let rc = release
            .split(['-', '+', '~'])
            .find_map(|part| part.strip_prefix("rc")?.parse().ok());
        Some(Version {
            major,
            minor,
            patch,
            rc,
        })
    }

    fn mm(self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// At least major.minor (a release candidate of it counts as it).
    fn at_least(self, major: u32, minor: u32) -> bool {
        self.mm() >= (major, minor)
    }

    /// At least major.minor's release, or its rc `rc` or later.
    fn at_least_rc(self, major: u32, minor: u32, rc: u32) -> bool {
        match self.mm().cmp(&(major, minor)) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => self.rc.is_none_or(|r| r >= rc),
        }
    }
}

/// One known behaviour that applies to the running kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// a short id (tests and JSON)
    pub id: &'static str,
    pub text: String,
}

/// The known behaviours of kernel `v` that bear on receive windows.
pub fn notes(v: Version) -> Vec<Note> {
    let mut out = Vec::new();
    let mut add = |id: &'static str, text: &str| {
        out.push(Note {
            id,
            text: text.to_string(),
        })
    };
    if !v.at_least(6, 6) {
        add(
            "adv-win-scale-era",
            "before 6.6 the window is the buffer's share set by net.ipv4.tcp_adv_win_scale, not a measured scaling_ratio (dfa2f0483360 in 6.6)",
        );
    }
    if v.at_least(6, 6) && !v.at_least(6, 10) {
        add(
            "initial-ratio-25",
            "6.6-6.9: a socket's initial scaling_ratio, before any packet is measured, is about 25 % (6.10 made it 50 %, 697a6c8cec03; some 6.9.y and distribution kernels carry it): the first window is half of what 6.10+ gives",
        );
    }
    if !v.at_least(6, 11) {
        add(
            "so-rcvbuf-freezes-clamp",
            "before 6.11 a socket that sets SO_RCVBUF keeps the window_clamp it had: a later scaling_ratio change does not move it (05f76b2d634e, a2cbb1603943 in 6.11; backported to 6.6.y stable: check your kernel's changelog)",
        );
    }
    if v.at_least(6, 16) {
        add(
            "tcp-rmem-ram-default",
            "since 6.16 the default net.ipv4.tcp_rmem[2] depends on the machine's memory (131072 up to 32 MB; it was 6 MB): hosts of one fleet with different RAM autotune to different windows",
        );
    }
    if v.at_least(6, 16) && !v.at_least_rc(6, 18, 4) {
        add(
            "autotune-regression-6.16",
            "6.16-6.17 (and 6.18 before rc4): autotuning could not double the window each RTT on long paths, so long-RTT flows stay receive-window limited even with a large tcp_rmem[2] (65c5287892e9; fixed by aa251c84636c): upgrade, or pin the buffer for such flows",
        );
    }
    if v.at_least(6, 17) && !v.at_least(7, 0) {
        add(
            "ofo-ratio-6.17",
            "6.17: scaling_ratio is also measured on out-of-order packets, and stricter sk_rcvbuf checks can drop packets (TCPRcvQDrop) that were accepted before; reverted in 7.0 and stable (026dfef287c0)",
        );
    }
    if v.at_least(6, 18) {
        add(
            "rmem-max-4mb",
            "since 6.18 net.core.rmem_max and wmem_max default to 4 MB (a6d4f25888b8): an SO_RCVBUF request is capped at 4 MB (a buffer of 8 MB) unless raised",
        );
    }
    if v.at_least(6, 19) {
        add(
            "rcvbuf-low-rtt",
            "since 6.19 net.ipv4.tcp_rcvbuf_low_rtt (default 1000 us): below that RTT the receive buffer grows more slowly on purpose; a small window on a LAN path may be this, not a cap",
        );
    }
    if !v.at_least(6, 2) {
        add(
            "no-tcpi-rcv-wnd",
            "before 6.2 tcp_info has no rcv_wnd (ss shows no rcv_wnd:); tcpwin-trace reads it through the socket iterator",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(release: &str) -> Vec<&'static str> {
        notes(Version::parse(release).unwrap())
            .into_iter()
            .map(|n| n.id)
            .collect()
    }

    #[test]
    fn versions_parse_as_uname_writes_them() {
        let v = Version::parse("6.18.44-fc-v657").unwrap();
        assert_eq!((v.major, v.minor, v.patch, v.rc), (6, 18, 44, None));
        assert_eq!(Version::parse("7.2.13+deb14-cloud-amd64").unwrap().minor, 2);
        assert_eq!(Version::parse("6.18.0-rc3").unwrap().rc, Some(3));
        assert_eq!(Version::parse("5.10.0-30-cloud-amd64").unwrap().major, 5);
        assert!(Version::parse("linux").is_none());
    }

    #[test]
    fn each_kernel_gets_its_notes() {
        let five_ten = ids("5.10.0-30-cloud-amd64");
        assert!(five_ten.contains(&"adv-win-scale-era") && five_ten.contains(&"no-tcpi-rcv-wnd"));
        assert!(five_ten.contains(&"so-rcvbuf-freezes-clamp"));
        assert!(ids("6.8.0-45-generic").contains(&"initial-ratio-25"));
        assert!(!ids("6.10.3").contains(&"initial-ratio-25"));
        let r617 = ids("6.17.2");
        assert!(r617.contains(&"autotune-regression-6.16") && r617.contains(&"ofo-ratio-6.17"));
        assert!(ids("6.18.0-rc3").contains(&"autotune-regression-6.16"));
        assert!(!ids("6.18.0-rc4").contains(&"autotune-regression-6.16"));
        let r618 = ids("6.18.44-fc-v657");
        assert!(r618.contains(&"rmem-max-4mb") && r618.contains(&"tcp-rmem-ram-default"));
        assert!(!r618.contains(&"autotune-regression-6.16") && !r618.contains(&"rcvbuf-low-rtt"));
        assert!(ids("6.19.1").contains(&"rcvbuf-low-rtt"));
        let r72 = ids("7.2.13+deb14-cloud-amd64");
        assert!(!r72.contains(&"ofo-ratio-6.17") && r72.contains(&"rcvbuf-low-rtt"));
        assert!(ids("6.12.117+deb13-cloud-amd64").is_empty());
    }
}
