//! Slurm host lists (`SLURM_STEP_NODELIST`, `-w`, host files): expansion is bounded, and a list
//! of plain names expands back to itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::hostlist::{expand, MAX_HOSTS};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(hosts) = expand(text) else { return };
    assert!(hosts.len() <= MAX_HOSTS, "{} hosts", hosts.len());
    let plain = |h: &String| !h.is_empty() && !h.contains(|c: char| "[], \t\n\r".contains(c));
    if hosts.iter().all(plain) {
        assert_eq!(
            expand(&hosts.join(",")).unwrap(),
            hosts,
            "round trip of {text:?}"
        );
    }
});
