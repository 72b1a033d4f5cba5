//! Rates and durations as users write them (iperf3 / tc): `1gbit`, `100mbit`, `1G`, `18ms`.

use std::time::Duration;

/// Bits per second from `1gbit`, `250mbit`, `10kbit`, `1G`, `500M`, `1e9` (decimal prefixes,
/// bits, as iperf3 and tc count them).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    if t.ends_with("bps") || t.ends_with("b/s") {
        return Err(format!(
            "`{s}`: write rates in bits like tc and iperf3 (e.g. 1gbit, 250mbit), not bytes"
        ));
    }
    let t = t.strip_suffix("bit").unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        Some('t') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a rate (e.g. 1gbit, 250mbit, 10kbit)"))?;
    let bps = v * mult;
    if !bps.is_finite() || !(1.0..=1e13).contains(&bps) {
        return Err(format!("`{s}`: a rate between 1 bit/s and 10 Tbit/s"));
    }
    Ok(bps.round() as u64)
}

/// Microseconds from `18ms`, `0.1s`, `250us` (a unit is required).
pub fn parse_duration_us(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        return Err(format!("`{s}`: give a unit (e.g. 18ms, 0.1s, 250us)"));
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 18ms, 0.1s)"))?;
    let us = v * mult;
    if !us.is_finite() || !(1.0..=3.6e9).contains(&us) {
        return Err(format!("`{s}`: a duration between 1 us and an hour"));
    }
    Ok(us.round() as u64)
}

/// `rtt=18ms,rate=1gbit`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathSpec {
    pub rtt: Duration,
    pub rate_bps: Option<u64>,
}

/// Parses `rtt=18ms[,rate=250mbit]`.
pub fn parse_path(s: &str) -> Result<PathSpec, String> {
    let mut rtt = None;
    let mut rate = None;
    for part in s.split(',') {
        match part.split_once('=') {
            Some(("rtt", v)) => rtt = Some(Duration::from_micros(parse_duration_us(v)?)),
            Some(("rate", v)) => rate = Some(parse_rate(v)?),
            _ => return Err(format!("`{part}`: write rtt=18ms[,rate=250mbit]")),
        }
    }
    Ok(PathSpec {
        rtt: rtt.ok_or("the path needs rtt=..., e.g. rtt=18ms,rate=250mbit")?,
        rate_bps: rate,
    })
}

/// A count with its noun, singular for one: `1 ratio change`, `3 ratio changes` (`noun` is the
/// singular; the plural adds an s).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_singular_for_one() {
        assert_eq!(count(1u64, "ratio change"), "1 ratio change");
        assert_eq!(count(0u64, "socket"), "0 sockets");
        assert_eq!(count(2u32, "event"), "2 events");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("250Mbit"), Ok(250_000_000));
        assert_eq!(parse_rate("1G"), Ok(1_000_000_000));
        assert_eq!(parse_rate("10kbit"), Ok(10_000));
        assert_eq!(parse_rate("1.5g"), Ok(1_500_000_000));
        assert!(parse_rate("1gbps").unwrap_err().contains("bits"));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-1g").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_us("18ms"), Ok(18_000));
        assert_eq!(parse_duration_us("0.1s"), Ok(100_000));
        assert_eq!(parse_duration_us("250us"), Ok(250));
        assert!(parse_duration_us("18").unwrap_err().contains("unit"));
        assert!(parse_duration_us("xms").is_err());
    }
    #[test]
    fn path_specs() {
        let p = parse_path("rtt=18ms,rate=250mbit").unwrap();
        assert_eq!(p.rtt, Duration::from_millis(18));
        assert_eq!(p.rate_bps, Some(250_000_000));
        assert_eq!(parse_path("rtt=20ms").unwrap().rate_bps, None);
        assert!(parse_path("rate=1gbit").unwrap_err().contains("rtt"));
        assert!(parse_path("rtt=18").unwrap_err().contains("unit"));
        assert!(parse_path("delay=18ms").unwrap_err().contains("rtt="));
    }
}
