//! Sysctls that decide the receive window.
use tcpwin_common::formula::adv_win_scale_ratio;

/// `net.ipv4.tcp_adv_win_scale` of the caller's namespace, if readable.
pub fn tcp_adv_win_scale() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_adv_win_scale")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
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
    fn legacy_note_names_the_equivalent_ratio() {
        assert!(legacy_note(Some(1)).contains("fixed ratio of 128/256"));
        assert!(legacy_note(None).contains("reported as null"));
    }
}
