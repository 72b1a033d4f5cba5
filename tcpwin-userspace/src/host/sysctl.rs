//! Sysctls that decide the receive window. `net.ipv4.*` are read in the calling thread's network
//! namespace (enter one first, see `netns`); `net.core.rmem_max` is global.
use tcpwin_common::formula::adv_win_scale_ratio;
use tcpwin_model::facts::HostLimits;

/// A sysctl's value (`net.ipv4.tcp_rmem`: `/proc/sys/net/ipv4/tcp_rmem`), trimmed; `net.*` in
/// the calling thread's namespace. None where it cannot be read.
pub fn read(key: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/")))
        .ok()
        .map(|s| s.trim().to_string())
}

fn num<T: std::str::FromStr>(key: &str) -> Option<T> {
    read(key)?.parse().ok()
}

/// TCP memory pressure: the protocol's pages in use (`/proc/net/sockstat`, `TCP: ... mem N`)
/// above `net.ipv4.tcp_mem`'s pressure threshold.
pub fn memory_pressure(sockstat: &str, tcp_mem: [u64; 3]) -> Option<bool> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let mut it = line.split_whitespace();
    while let Some(w) = it.next() {
        if w == "mem" {
            let pages: u64 = it.next()?.parse().ok()?;
            return Some(pages > tcp_mem[1]);
        }
    }
    None
}

/// The limits of the namespace the calling thread is in.
pub fn host_limits() -> HostLimits {
    let tcp_mem = read("net.ipv4.tcp_mem").and_then(|s| HostLimits::triple(&s));
    let sockstat = std::fs::read_to_string("/proc/thread-self/net/sockstat").ok();
    HostLimits {
        rmem_max: num("net.core.rmem_max"),
        wmem_max: num("net.core.wmem_max"),
        tcp_rmem: read("net.ipv4.tcp_rmem").and_then(|s| HostLimits::triple(&s)),
        tcp_wmem: read("net.ipv4.tcp_wmem").and_then(|s| HostLimits::triple(&s)),
        tcp_window_scaling: num::<u8>("net.ipv4.tcp_window_scaling").map(|v| v != 0),
        tcp_moderate_rcvbuf: num::<u8>("net.ipv4.tcp_moderate_rcvbuf").map(|v| v != 0),
        tcp_adv_win_scale: num("net.ipv4.tcp_adv_win_scale"),
        memory_pressure: sockstat
            .zip(tcp_mem)
            .and_then(|(s, m)| memory_pressure(&s, m)),
        run_in: None,
        remote: None,
        routes: Vec::new(),
        ifaces: Vec::new(),
        kernel: read("kernel.osrelease").filter(|k| !k.is_empty()),
    }
}

/// `net.ipv4.tcp_adv_win_scale` of the caller's namespace, if readable.
pub fn tcp_adv_win_scale() -> Option<i32> {
    num("net.ipv4.tcp_adv_win_scale")
}

/// What to tell a user on a kernel without `scaling_ratio` (before 6.6).
pub fn legacy_note(adv_win_scale: Option<i32>) -> String {
    match adv_win_scale {
        Some(n) => format!(
            "tcp_sock.scaling_ratio is absent (kernel before 6.6): the window comes from tcp_adv_win_scale={n}, \
             equivalent to a fixed ratio of {}/256; scaling_ratio is reported as null",
            adv_win_scale_ratio(n)
        ),
        None => "tcp_sock.scaling_ratio is absent (kernel before 6.6): scaling_ratio is reported as null".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_from_sockstat() {
        let s =
            "sockets: used 5\nTCP: inuse 3 orphan 0 tw 0 alloc 4 mem 9000\nUDP: inuse 0 mem 0\n";
        assert_eq!(memory_pressure(s, [100, 8000, 12000]), Some(true));
        assert_eq!(memory_pressure(s, [100, 9000, 12000]), Some(false));
        assert_eq!(memory_pressure("", [1, 2, 3]), None);
        // ground truth: this host's own values parse
        let h = host_limits();
        assert!(h.rmem_max.is_some() && h.tcp_rmem.is_some(), "{h:?}");
    }

    #[test]
    fn legacy_note_names_the_equivalent_ratio() {
        assert!(legacy_note(Some(1)).contains("fixed ratio of 128/256"));
        assert!(legacy_note(None).contains("reported as null"));
    }
}
