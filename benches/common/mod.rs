//! Shared by the Rust benches (`mod common;`).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Median time of one call of `f`, from batches sized to take about 20 ms each.
pub fn measure<T>(mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < Duration::from_millis(20) {
        black_box(f());
        calls += 1;
    }
    let per_batch = calls.max(1);
    let mut samples: Vec<Duration> = (0..31)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_batch {
                black_box(f());
            }
            t.elapsed() / per_batch
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}
