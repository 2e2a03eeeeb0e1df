// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Pure helpers of the CLI: checksums, test patterns, latency statistics.

/// FNV-1a, 64 bits: the checksum `verify` and `serve`'s control channel
/// compare (not cryptographic; it detects corruption, not tampering).
pub fn checksum(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Fills `buf` with a reproducible pseudo-random pattern from `seed`.
pub fn fill_pattern(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// Latency figures in microseconds, perftest's columns plus percentiles.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Samples.
    pub iterations: usize,
    /// Minimum.
    pub t_min: f64,
    /// Maximum.
    pub t_max: f64,
    /// Median (perftest's "typical").
    pub p50: f64,
    /// Mean.
    pub t_avg: f64,
    /// Standard deviation.
    pub t_stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
}

/// The nearest-rank percentile `p` (0..=100) of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // The epsilon absorbs rounding (99.9% of 1000 is 999, not 999.0000001).
    let rank = ((p / 100.0) * sorted.len() as f64 - 1e-9).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Statistics of `samples` (microseconds); `None` if there are none.
pub fn latency(samples: &mut [f64]) -> Option<Latency> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len() as f64;
    let avg = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|s| (s - avg) * (s - avg)).sum::<f64>() / n;
    Some(Latency {
        iterations: samples.len(),
        t_min: samples[0],
        t_max: samples[samples.len() - 1],
        p50: percentile(samples, 50.0),
        t_avg: avg,
        t_stdev: var.sqrt(),
        p99: percentile(samples, 99.0),
        p99_9: percentile(samples, 99.9),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_and_patterns() {
        assert_eq!(checksum(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(checksum(b"a"), 0xaf63_dc4c_8601_ec8c);
        let mut a = vec![0u8; 100];
        let mut b = vec![0u8; 100];
        fill_pattern(&mut a, 7);
        fill_pattern(&mut b, 7);
        assert_eq!(a, b);
        fill_pattern(&mut b, 8);
        assert_ne!(a, b);
        assert_ne!(checksum(&a), checksum(&b));
    }

    #[test]
    fn percentiles() {
        let mut s: Vec<f64> = (1..=1000).map(f64::from).collect();
        let l = latency(&mut s).unwrap();
        assert_eq!(l.t_min, 1.0);
        assert_eq!(l.t_max, 1000.0);
        assert_eq!(l.p50, 500.0);
        assert_eq!(l.p99, 990.0);
        assert_eq!(l.p99_9, 999.0);
        assert!((l.t_avg - 500.5).abs() < 1e-9);
        assert!(latency(&mut []).is_none());
        assert_eq!(percentile(&[3.0], 99.9), 3.0);
    }
}
