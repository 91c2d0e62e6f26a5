//! Latencies as the benchmark keeps them: histograms of microseconds, read back as
//! percentiles in milliseconds.
use std::time::Duration;

use anyhow::Result;
use hdrhistogram::Histogram;

/// An empty histogram of latencies in microseconds, from 1 µs to a minute, to three significant
/// digits.
pub(crate) fn histogram() -> Result<Histogram<u64>> {
    Ok(Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?)
}

/// A duration in whole microseconds, at least one (the histograms' lowest value).
pub(crate) fn micros(duration: Duration) -> u64 {
    (duration.as_micros() as u64).max(1)
}

/// The latency at quantile `q` (0.5 for the median), in milliseconds.
pub(crate) fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}
