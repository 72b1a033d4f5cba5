//! This process's own figures, as Prometheus clients publish them (`process_*`): CPU time,
//! memory, file descriptors, start time; read from /proc/self.
use tcpwin_model::metrics::ProcessStats;

/// The figures now; None when /proc cannot be read.
pub fn stats() -> Option<ProcessStats> {
    // SAFETY: sysconf with a valid name has no preconditions.
    let (tck, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK).max(1) as f64,
            libc::sysconf(libc::_SC_PAGESIZE).max(1) as u64,
        )
    };
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // fields after the command (which may hold spaces) in parentheses
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // state is field 3 of stat, so index = field - 3
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let (utime, stime, starttime, vsize, rss) =
        (field(14)?, field(15)?, field(22)?, field(23)?, field(24)?);
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to write into.
    let max_fds = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        0
    };
    Some(ProcessStats {
        cpu_seconds: (utime + stime) as f64 / tck,
        resident_bytes: rss * page,
        virtual_bytes: vsize,
        open_fds,
        max_fds,
        start_time_seconds: boot as f64 + starttime as f64 / tck,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read() {
        let s = stats().expect("/proc/self");
        assert!(
            s.resident_bytes > 0 && s.virtual_bytes >= s.resident_bytes,
            "{s:?}"
        );
        assert!(s.open_fds >= 3 && s.max_fds >= s.open_fds, "{s:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(s.start_time_seconds <= now + 1.0 && s.start_time_seconds > now - 86400.0 * 365.0);
    }
}
