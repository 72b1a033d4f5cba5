//! What a run cost: the machine's and a process's CPU time from /proc (procfs), peak RSS, and each BPF
//! program's run time and count from bpftool (with `kernel.bpf_stats_enabled` on).
use std::collections::HashSet;

use anyhow::{Context, Result};
use tcpwin_lab::harness::bpf_programs;

/// Total CPU time of the machine (user+nice+system+irq+softirq+steal), seconds.
pub fn cpu_seconds() -> f64 {
    use procfs::CurrentSI;
    let Ok(k) = procfs::KernelStats::current() else {
        return 0.0;
    };
    let t = k.total;
    let busy = t.user
        + t.nice
        + t.system
        + t.irq.unwrap_or(0)
        + t.softirq.unwrap_or(0)
        + t.steal.unwrap_or(0);
    busy as f64 / procfs::ticks_per_second().max(1) as f64
}

/// A process's CPU time (user+system), seconds; 0 when it cannot be read.
pub fn proc_cpu_seconds(pid: u32) -> f64 {
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .map(|s| (s.utime + s.stime) as f64 / procfs::ticks_per_second().max(1) as f64)
        .unwrap_or(0.0)
}

/// A process's peak resident memory (VmHWM), bytes.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.status())
        .ok()?;
    status.vmhwm.map(|k| k * 1024)
}

/// IDs of every loaded BPF program (bpftool's listing).
pub fn program_ids() -> HashSet<u64> {
    let progs = bpf_programs().unwrap_or_default();
    progs.iter().filter_map(|p| p["id"].as_u64()).collect()
}

/// Per program name: (run_time_ns, run_cnt) of the given programs.
pub type ProgStats = std::collections::BTreeMap<String, (u64, u64)>;

pub fn bpf_stats(ids: &HashSet<u64>) -> ProgStats {
    let mut m = ProgStats::new();
    let progs = bpf_programs().unwrap_or_default();
    for p in progs
        .iter()
        .filter(|p| p["id"].as_u64().is_some_and(|id| ids.contains(&id)))
    {
        let e = m
            .entry(p["name"].as_str().unwrap_or("?").to_string())
            .or_default();
        e.0 += p["run_time_ns"].as_u64().unwrap_or(0);
        e.1 += p["run_cnt"].as_u64().unwrap_or(0);
    }
    m
}

/// `after - before`, per program.
pub fn stats_delta(before: &ProgStats, after: &ProgStats) -> ProgStats {
    after
        .iter()
        .map(|(k, (ns, n))| {
            let (ns0, n0) = before.get(k).copied().unwrap_or_default();
            (k.clone(), (ns.saturating_sub(ns0), n.saturating_sub(n0)))
        })
        .collect()
}

/// Turns `kernel.bpf_stats_enabled` on and restores it when dropped.
pub struct BpfStats(String);

impl BpfStats {
    pub fn enable() -> Result<BpfStats> {
        let path = "/proc/sys/kernel/bpf_stats_enabled";
        let old = std::fs::read_to_string(path).context("kernel.bpf_stats_enabled")?;
        std::fs::write(path, "1")?;
        Ok(BpfStats(old.trim().to_string()))
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", &self.0);
    }
}

/// The median (the upper one for an even count); NaN for no values.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Reads a child's stdout, then reaps it with wait4: (stdout, CPU seconds, peak RSS in KiB).
pub fn wait_with_output_rusage(mut child: std::process::Child, pid: i32) -> (String, f64, u64) {
    let mut s = String::new();
    if let Some(mut so) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
    }
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 on our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing into ru.
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        s,
        secs(ru.ru_utime) + secs(ru.ru_stime),
        ru.ru_maxrss.max(0) as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's figures against what the kernel says otherwise: CPU time spent here is
    /// part of the machine's, and grows while this test spins; the peak resident memory holds a
    /// buffer just touched.
    #[test]
    fn a_busy_process_is_measured() {
        let me = std::process::id();
        let (m0, p0) = (cpu_seconds(), proc_cpu_seconds(me));
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let (m1, p1) = (cpu_seconds(), proc_cpu_seconds(me));
        assert!(p1 - p0 >= 0.1, "{p0} -> {p1}");
        assert!(
            m1 - m0 >= p1 - p0 - 0.05,
            "machine {m0} -> {m1}, process {p0} -> {p1}"
        );
        let buf = vec![1u8; 64 << 20];
        std::hint::black_box(&buf);
        assert!(peak_rss_bytes(me).unwrap() >= 64 << 20);
    }
}
