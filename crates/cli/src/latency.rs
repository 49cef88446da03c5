//! Step latencies in a histogram of fixed size: a run of any length, a stream followed for
//! days included, keeps the same few tens of KiB for them (a list of every step's latency
//! grew by 16 bytes a step without end), and its quantiles are exact to about 1%.

use hdrhistogram::Histogram;
use std::time::Duration;

/// Significant decimal digits the histogram keeps: its buckets are within about 1% of each
/// other, which a latency measured on a busy machine does not beat, and it holds about 4,600
/// counters (at 3 digits, about 34,000: more than the rest of a small graph's run).
const DIGITS: u8 = 2;

/// The longest latency the histogram must tell apart from shorter ones (an hour; its buckets
/// reach a little further, about 73 minutes): longer steps fall in its top bucket, and `max`
/// stays exact.
const LONGEST_NANOS: u64 = 3_600_000_000_000;

/// The latencies of a run's steps: how many, the first, the longest, and quantiles.
#[derive(Clone, Debug)]
pub struct Latencies {
    histogram: Histogram<u64>,
    first: Option<Duration>,
    max: Duration,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    pub fn new() -> Self {
        let histogram = Histogram::new_with_bounds(1, LONGEST_NANOS, DIGITS)
            .expect("constant bounds and digits are valid");
        Self {
            histogram,
            first: None,
            max: Duration::ZERO,
        }
    }

    /// Counts a step that took `elapsed`.
    pub fn record(&mut self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        // The histogram's least value is 1: a step of no measurable time counts as 1 ns.
        self.histogram.saturating_record(nanos.max(1));
        self.first.get_or_insert(elapsed);
        self.max = self.max.max(elapsed);
    }

    /// Forgets every step recorded, keeping the histogram's buckets.
    pub fn clear(&mut self) {
        self.histogram.reset();
        self.first = None;
        self.max = Duration::ZERO;
    }

    /// The number of steps recorded.
    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The first step's latency, if any.
    pub fn first(&self) -> Option<Duration> {
        self.first
    }

    /// The longest step (exact); zero if there are none.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The `q`-quantile (0 to 1) by the nearest-rank method, to within the histogram's
    /// precision (the middle of the bucket the step falls in, never above the longest step);
    /// the longest step itself at 1; zero if there are none.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.is_empty() {
            return Duration::ZERO;
        }
        if q >= 1.0 {
            return self.max;
        }
        let in_bucket = self.histogram.value_at_quantile(q.max(0.0));
        Duration::from_nanos(self.histogram.median_equivalent(in_bucket)).min(self.max)
    }

    /// `points` latencies at evenly spaced quantiles from the least to the longest (fewer if
    /// fewer steps were recorded): what a plot of their distribution needs.
    pub fn curve(&self, points: usize) -> Vec<Duration> {
        let n = usize::try_from(self.len()).unwrap_or(usize::MAX);
        let points = points.min(n);
        (0..points)
            .map(|k| {
                let q = if points == 1 {
                    1.0
                } else {
                    k as f64 / (points - 1) as f64
                };
                self.quantile(q)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_ranks_within_a_percent() {
        let mut latencies = Latencies::new();
        for micros in 1..=1000u64 {
            latencies.record(Duration::from_micros(micros));
        }
        assert_eq!(latencies.len(), 1000);
        assert_eq!(latencies.first(), Some(Duration::from_micros(1)));
        assert_eq!(latencies.max(), Duration::from_micros(1000));
        assert_eq!(latencies.quantile(1.0), Duration::from_micros(1000));
        for (q, exact) in [(0.5, 500.0), (0.99, 990.0), (0.001, 1.0)] {
            let got = latencies.quantile(q).as_secs_f64() * 1e6;
            assert!(
                (got - exact).abs() <= exact * 0.01,
                "quantile {q}: {got} µs against {exact} µs"
            );
        }
    }

    #[test]
    fn a_curve_of_few_steps_holds_each_once_and_clear_forgets_them() {
        let mut latencies = Latencies::new();
        for millis in [3, 1, 2] {
            latencies.record(Duration::from_millis(millis));
        }
        let curve: Vec<f64> = latencies
            .curve(400)
            .iter()
            .map(|latency| latency.as_secs_f64() * 1e3)
            .collect();
        assert_eq!(curve.len(), 3);
        for (got, exact) in curve.iter().zip([1.0, 2.0, 3.0]) {
            assert!(
                (got - exact).abs() <= exact * 0.01,
                "{got} ms against {exact} ms"
            );
        }
        // Longer than u64 nanoseconds: counted, and kept as the longest.
        latencies.record(Duration::MAX);
        assert_eq!((latencies.len(), latencies.max()), (4, Duration::MAX));
        latencies.clear();
        assert!(latencies.is_empty());
        assert_eq!((latencies.first(), latencies.max()), (None, Duration::ZERO));
        latencies.record(Duration::from_millis(5));
        assert_eq!(latencies.first(), Some(Duration::from_millis(5)));
    }

    #[test]
    fn no_steps_give_zeros_and_an_empty_curve() {
        let latencies = Latencies::new();
        assert!(latencies.is_empty());
        assert_eq!(latencies.quantile(0.5), Duration::ZERO);
        assert_eq!(latencies.max(), Duration::ZERO);
        assert_eq!(latencies.first(), None);
        assert!(latencies.curve(100).is_empty());
    }

    #[test]
    fn extremes_are_kept_and_the_memory_is_fixed() {
        let mut latencies = Latencies::new();
        latencies.record(Duration::ZERO);
        latencies.record(Duration::from_secs(2 * 3600));
        assert_eq!(latencies.len(), 2);
        assert_eq!(latencies.max(), Duration::from_secs(2 * 3600));
        assert_eq!(latencies.quantile(0.0), Duration::from_nanos(1));
        // An hour and more falls in the hour's bucket (its middle is within 1% of an hour).
        let top = latencies.quantile(0.9);
        assert!(top >= Duration::from_secs(3564) && top <= Duration::from_secs(3636));
        let before = latencies.histogram.distinct_values();
        for nanos in 0..100_000u64 {
            latencies.record(Duration::from_nanos(nanos * 7919));
        }
        assert_eq!(latencies.histogram.distinct_values(), before);
        let curve = latencies.curve(11);
        assert_eq!(curve.len(), 11);
        assert!(curve.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(curve[10], latencies.max());
    }
}
