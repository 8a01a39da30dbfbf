//! `SLURM_DISTRIBUTION` and `SLURM_DIST_PLANESIZE` (first line, the rest).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::layout::Distribution;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (dist, plane) = text.split_once('\n').unwrap_or((text, ""));
    let plane = (!plane.is_empty()).then_some(plane);
    if let Ok(Distribution::Plane(p)) = Distribution::parse(Some(dist), plane) {
        assert!(p > 0, "a plane of 0 tasks");
    }
});
