//! The running kernel: its release, and its build configuration (`/boot/config-RELEASE` or
//! `/proc/config.gz`).
use std::io::Read;

/// The running kernel's release (`uname -r`), empty where it cannot be read.
pub fn release() -> String {
    super::sysctl::read("kernel.osrelease").unwrap_or_default()
}

fn config_text() -> Option<String> {
    if let Ok(t) = std::fs::read_to_string(format!("/boot/config-{}", release())) {
        return Some(t);
    }
    let gz = std::fs::File::open("/proc/config.gz").ok()?;
    let mut s = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// `CONFIG_X=value` from a config text.
pub fn value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

/// The kernel's tick rate (`CONFIG_HZ`): jiffies to time. None when the config is not readable.
pub fn hz() -> Option<u32> {
    value(&config_text()?, "CONFIG_HZ")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_values() {
        let c = "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n";
        assert_eq!(value(c, "CONFIG_HZ"), Some("250"));
        assert_eq!(value(c, "CONFIG_HZ_250"), Some("y"));
        assert_eq!(value(c, "CONFIG_NOPE"), None);
    }
}
