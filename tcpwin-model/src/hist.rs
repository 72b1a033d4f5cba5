//! hdrhistogram aggregation in power-of-two buckets (bytes) or linear buckets (ratios), with
//! percentiles; `view::hist` draws them like bpftrace's `hist()` / `lhist()`.
use hdrhistogram::Histogram;

use crate::schema::HistSummary;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// power-of-two buckets (bytes)
    Log2,
    /// linear buckets of this width (ratios)
    Linear(u64),
}

/// Ratios (256ths) in buckets of 8.
pub const RATIO_SCALE: Scale = Scale::Linear(8);
/// Bytes in power-of-two buckets.
pub const BYTES_SCALE: Scale = Scale::Log2;

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
        self.scale.bucket_of(v)
    }
}

impl Scale {
    /// The bucket `[low, high)` that holds `v`.
    pub fn bucket_of(self, v: u64) -> (u64, u64) {
        match self {
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
}

impl Hist {
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

    /// Counts, percentiles and buckets as the summary line carries them.
    pub fn summary(&self) -> HistSummary {
        HistSummary {
            count: self.count(),
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            min: if self.count() == 0 { 0 } else { self.min },
            max: self.max,
            buckets: self.buckets(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets() {
        let mut h = Hist::new(Scale::Log2);
        for v in [1000, 1500, 70000, 65536, 1 << 20] {
            h.record(v);
        }
        let b = h.buckets();
        assert_eq!(b[0], (512, 1024, 1));
        assert_eq!(b[1], (1024, 2048, 1));
        assert_eq!(b[2], (65536, 131072, 2));
        assert_eq!(b[3], (1 << 20, 2 << 20, 1));
        assert_eq!(h.summary().count, 5);
        assert_eq!(Scale::Log2.bucket_of(0), (0, 2));
    }

    #[test]
    fn linear_buckets_for_ratios() {
        let mut h = Hist::new(Scale::Linear(8));
        h.record_n(162, 10);
        h.record_n(229, 30);
        assert_eq!(h.buckets(), vec![(160, 168, 10), (224, 232, 30)]);
        assert_eq!(h.quantile(0.5), 229);
        assert_eq!(h.summary().count, 40);
    }

    #[test]
    fn empty_histogram() {
        let h = Hist::new(Scale::Log2);
        assert_eq!(h.quantile(0.5), 0);
        let s = h.summary();
        assert_eq!((s.count, s.min, s.max), (0, 0, 0));
    }
}
