//! This process's own figures, as Prometheus clients publish them (`process_*`): CPU time,
//! memory, file descriptors, start time; read from /proc/self through `procfs`.
use tcpwin_model::metrics::ProcessStats;

/// The figures now; None when /proc cannot be read.
pub fn stats() -> Option<ProcessStats> {
    let me = procfs::process::Process::myself().ok()?;
    let stat = me.stat().ok()?;
    let (tck, page) = (
        procfs::ticks_per_second().max(1) as f64,
        procfs::page_size().max(1),
    );
    let boot = procfs::boot_time_secs().ok()?;
    let open_fds = me.fd_count().ok()? as u64;
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
        cpu_seconds: (stat.utime + stat.stime) as f64 / tck,
        resident_bytes: stat.rss * page,
        virtual_bytes: stat.vsize,
        open_fds,
        max_fds,
        start_time_seconds: boot as f64 + stat.starttime as f64 / tck,
    })
}

/// This process's effective capabilities (`CapEff`), None where /proc cannot be read.
pub fn cap_eff() -> Option<u64> {
    procfs::process::Process::myself()
        .and_then(|me| me.status())
        .ok()
        .map(|s| s.capeff)
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
