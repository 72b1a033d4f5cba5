//! Global sysctls (`net.core.*` is shared by every namespace and read-only inside one): set for
//! an experiment, restored when the guard drops (also when the lab stops on Ctrl-C / SIGTERM or
//! an error unwinds it).
use anyhow::{Context, Result};

pub struct GlobalSysctl {
    path: String,
    saved: String,
}

/// A sysctl's file: `net.ipv4.tcp_rmem` is `/proc/sys/net/ipv4/tcp_rmem`.
pub fn path_of(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

impl GlobalSysctl {
    /// Sets `key` in the initial namespace (the caller's) and remembers its value.
    pub fn set(key: &str, value: &str) -> Result<GlobalSysctl> {
        let g = GlobalSysctl::keep(key)?;
        std::fs::write(&g.path, value).with_context(|| format!("setting {key}={value} (root)"))?;
        Ok(g)
    }

    /// Remembers `key`'s value now, to restore it when the guard drops: for a setting something
    /// else (a command run as printed) is about to change.
    pub fn keep(key: &str) -> Result<GlobalSysctl> {
        let path = path_of(key);
        let saved = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {key}"))?
            .trim()
            .to_string();
        Ok(GlobalSysctl { path, saved })
    }
}

impl Drop for GlobalSysctl {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.saved) {
            eprintln!(
                "tcpwin-trace: could not restore {} to {}: {e}",
                self.path, self.saved
            );
        }
    }
}
