//! The node's OOM-kill count, read from /proc/vmstat: a task killed by SIGKILL failed when the
//! count grew while the step ran (the OOM killer's SIGKILL), and was stopped otherwise (Slurm's).
//! The count is the node's, not the step's: on a node shared with other jobs, an OOM kill
//! elsewhere at the very moment Slurm kills this step's task makes tfcluster blame the OOM
//! killer, which only changes the line srun prints for a step that is ending anyway.

use crate::core::ending;
use std::io::Read;

/// /proc/vmstat is about 8 KB; more than this is not vmstat.
const MAX_VMSTAT_BYTES: u64 = 1 << 16;

/// The node's OOM kills so far; `None` when the kernel does not count them (before 4.13).
pub fn kills() -> Option<u64> {
    let mut text = String::new();
    std::fs::File::open("/proc/vmstat")
        .and_then(|f| f.take(MAX_VMSTAT_BYTES).read_to_string(&mut text))
        .ok()?;
    ending::oom_kills(&text)
}

/// Whether the OOM killer killed something on this node since the count was `before`.
pub fn killed_since(before: Option<u64>) -> bool {
    matches!((before, kills()), (Some(before), Some(now)) if now > before)
}
