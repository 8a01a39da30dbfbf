//! `SLURM_STEP_TASKS_PER_NODE` / `SLURM_TASKS_PER_NODE` count lists such as `2(x3),1`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::layout::TaskCounts;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(counts) = TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", text) else {
        return;
    };
    // Written back in Slurm's compressed form, the list parses to the same counts.
    let back: Vec<String> = counts.iter().map(u32::to_string).collect();
    assert_eq!(TaskCounts::parse("x", &back.join(",")).unwrap(), counts);
});
