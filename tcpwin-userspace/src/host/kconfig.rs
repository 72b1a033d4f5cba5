//! The running kernel: its release, and its build configuration (procfs's `kernel_config`:
//! `/proc/config.gz`, else `/boot/config-RELEASE`).

/// The running kernel's release (`uname -r`), empty where it cannot be read.
pub fn release() -> String {
    super::sysctl::read("kernel.osrelease").unwrap_or_default()
}

/// The kernel's tick rate (`CONFIG_HZ`): jiffies to time. None when the config is not readable.
pub fn hz() -> Option<u32> {
    match procfs::kernel_config().ok()?.get("CONFIG_HZ")? {
        procfs::ConfigSetting::Value(v) => v.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// Ground truth: the tick rate the kernel's own config says, wherever it keeps it.
    #[test]
    fn hz_is_the_configs() {
        let text = std::process::Command::new("sh")
            .args([
                "-c",
                "zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r)",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let want = text
            .lines()
            .find_map(|l| l.strip_prefix("CONFIG_HZ="))
            .and_then(|v| v.parse().ok());
        assert_eq!(super::hz(), want);
    }
}
