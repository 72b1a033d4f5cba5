//! Histograms drawn like bpftrace's `hist()` (power-of-two buckets) and `lhist()` (linear).
use tcpwin_model::{hist::Scale, schema::HistSummary};

/// A row per bucket between the first and last non-empty one, then count and percentiles.
pub fn render(title: &str, h: &HistSummary, scale: Scale) -> String {
    let mut s = format!("@{title}:\n");
    let buckets = &h.buckets;
    if buckets.is_empty() {
        s.push_str("  (no samples)\n");
        return s;
    }
    let max = buckets.iter().map(|b| b.2).max().unwrap_or(1);
    // fill the gaps so the shape is visible
    let mut rows = Vec::new();
    let (mut lo, last) = (buckets[0].0, buckets[buckets.len() - 1].0);
    let mut it = buckets.iter().peekable();
    while lo <= last {
        let (_, hi) = scale.bucket_of(lo);
        let n = match it.peek() {
            Some(b) if b.0 == lo => it.next().map(|b| b.2).unwrap_or(0),
            _ => 0,
        };
        rows.push((lo, hi, n));
        if rows.len() > 64 {
            break;
        }
        lo = hi;
    }
    for (lo, hi, n) in rows {
        let bar = "@".repeat(((n as f64 / max as f64) * 52.0).round() as usize);
        let range = format!("[{}, {})", human(lo, scale), human(hi, scale));
        s.push_str(&format!("{range:<20} {n:>8} |{bar:<52}|\n"));
    }
    s.push_str(&format!(
        "  count {}  min {}  p50 ~{}  p90 ~{}  p99 ~{}  max {}\n",
        h.count, h.min, h.p50, h.p90, h.p99, h.max
    ));
    s
}

/// 65536 -> 64K, like bpftrace; linear scales stay plain.
fn human(v: u64, scale: Scale) -> String {
    if scale != Scale::Log2 {
        return v.to_string();
    }
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if v >= 1 << shift && v.is_multiple_of(1 << shift) {
            return format!("{}{unit}", v >> shift);
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_model::hist::Hist;

    #[test]
    fn log2_render_fills_gaps() {
        let mut h = Hist::new(Scale::Log2);
        for v in [1000, 1500, 70000, 65536, 1 << 20] {
            h.record(v);
        }
        let text = render("window_clamp", &h.summary(), Scale::Log2);
        assert!(text.starts_with("@window_clamp:\n"));
        assert!(text.contains("[64K, 128K)"), "{text}");
        // gaps between non-empty buckets are shown as empty rows
        assert!(text.contains("[2K, 4K)"), "{text}");
        assert!(text.contains("count 5"));
        let max_bar = text.lines().find(|l| l.contains("[64K, 128K)")).unwrap();
        assert_eq!(max_bar.matches('@').count(), 52);
    }

    #[test]
    fn linear_render() {
        let mut h = Hist::new(Scale::Linear(8));
        h.record_n(162, 10);
        h.record_n(229, 30);
        let text = render("scaling_ratio", &h.summary(), Scale::Linear(8));
        assert!(text.contains("[160, 168)"), "{text}");
    }

    #[test]
    fn empty_histogram_says_so() {
        let h = Hist::new(Scale::Log2);
        assert!(render("x", &h.summary(), Scale::Log2).contains("no samples"));
    }
}
