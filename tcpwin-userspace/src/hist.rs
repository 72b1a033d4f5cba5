//! hdrhistogram aggregation, rendered like bpftrace's `hist()` (power-of-two buckets) and
//! `lhist()` (linear buckets), with percentiles.
use hdrhistogram::Histogram;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// power-of-two buckets (bytes)
    Log2,
    /// linear buckets of this width (ratios)
    Linear(u64),
}

pub struct Hist {
    h: Histogram<u64>,
    scale: Scale,
    /// exact extremes (the histogram itself keeps 3 significant digits)
    min: u64,
    max: u64,
}

impl Hist {
    pub fn new(scale: Scale) -> Self {
        Hist {
            // 3 significant digits up to 2^40: exact for ratios and for any window in bytes to 0.1%
            h: Histogram::new_with_bounds(1, 1 << 40, 3).expect("static bounds are valid"),
            scale,
            min: u64::MAX,
            max: 0,
        }
    }

    pub fn record_n(&mut self, v: u64, n: u64) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.h.saturating_record_n(v.max(1), n);
    }

    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    fn bucket_of(&self, v: u64) -> (u64, u64) {
        match self.scale {
            Scale::Log2 => {
                let lo = if v == 0 {
                    0
                } else {
                    1u64 << (63 - v.leading_zeros())
                };
                (lo, lo.max(1) * 2)
            }
            Scale::Linear(w) => {
                let lo = v / w * w;
                (lo, lo + w)
            }
        }
    }

    /// Non-empty buckets, in order: (low, high, count).
    pub fn buckets(&self) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for it in self.h.iter_recorded() {
            let v = self.h.lowest_equivalent(it.value_iterated_to());
            let (lo, hi) = self.bucket_of(v);
            match out.last_mut() {
                Some(last) if last.0 == lo => last.2 += it.count_at_value(),
                _ => out.push((lo, hi, it.count_at_value())),
            }
        }
        out
    }

    /// The quantile to the histogram's precision (3 significant digits), clamped to the exact
    /// extremes.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count() == 0 {
            return 0;
        }
        self.h
            .lowest_equivalent(self.h.value_at_quantile(q))
            .clamp(self.min, self.max)
    }

    /// Text like bpftrace: a row per bucket between the first and last non-empty one.
    pub fn render(&self, title: &str) -> String {
        let mut s = format!("@{title}:\n");
        let buckets = self.buckets();
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
            let (_, hi) = self.bucket_of(lo);
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
            let range = format!("[{}, {})", human(lo, self.scale), human(hi, self.scale));
            s.push_str(&format!("{range:<20} {n:>8} |{bar:<52}|\n"));
        }
        s.push_str(&format!(
            "  count {}  min {}  p50 ~{}  p90 ~{}  p99 ~{}  max {}\n",
            self.count(),
            self.min,
            self.quantile(0.5),
            self.quantile(0.9),
            self.quantile(0.99),
            self.max
        ));
        s
    }

    pub fn to_json(&self) -> Value {
        json!({
            "count": self.count(),
            "p50": self.quantile(0.5),
            "p90": self.quantile(0.9),
            "p99": self.quantile(0.99),
            "min": if self.count() == 0 { 0 } else { self.min },
            "max": self.max,
            "buckets": self.buckets().iter().map(|(lo, hi, n)| json!([lo, hi, n])).collect::<Vec<_>>(),
        })
    }
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

    #[test]
    fn log2_buckets_and_render() {
        let mut h = Hist::new(Scale::Log2);
        for v in [1000, 1500, 70000, 65536, 1 << 20] {
            h.record(v);
        }
        let b = h.buckets();
        assert_eq!(b[0], (512, 1024, 1));
        assert_eq!(b[1], (1024, 2048, 1));
        assert_eq!(b[2], (65536, 131072, 2));
        assert_eq!(b[3], (1 << 20, 2 << 20, 1));
        let text = h.render("window_clamp");
        assert!(text.starts_with("@window_clamp:\n"));
        assert!(text.contains("[64K, 128K)"), "{text}");
        // gaps between non-empty buckets are shown as empty rows
        assert!(text.contains("[2K, 4K)"), "{text}");
        assert!(text.contains("count 5"));
        let max_bar = text.lines().find(|l| l.contains("[64K, 128K)")).unwrap();
        assert_eq!(max_bar.matches('@').count(), 52);
    }

    #[test]
    fn linear_buckets_for_ratios() {
        let mut h = Hist::new(Scale::Linear(8));
        h.record_n(162, 10);
        h.record_n(229, 30);
        assert_eq!(h.buckets(), vec![(160, 168, 10), (224, 232, 30)]);
        assert_eq!(h.quantile(0.5), 229);
        assert_eq!(h.to_json()["count"], 40);
        let text = h.render("scaling_ratio");
        assert!(text.contains("[160, 168)"), "{text}");
    }

    #[test]
    fn empty_histogram_says_so() {
        let h = Hist::new(Scale::Log2);
        assert!(h.render("x").contains("no samples"));
        assert_eq!(h.quantile(0.5), 0);
        assert_eq!(h.to_json()["count"], 0);
    }
}
