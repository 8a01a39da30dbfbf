//! Processes as `/proc` shows them: what a claim or a holder file records to tell a running
//! process from a later one given the same pid ([`crate::core::claims::Owner`]), and the
//! node's name.

use crate::core::claims::Owner;
use std::fs;

/// `/proc/PID/stat` of `pid`, or `None` when no such process runs.
pub fn stat(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

/// This process, as a claim or a holder file names it.
pub fn me() -> Option<Owner> {
    let pid = std::process::id();
    stat(pid).and_then(|text| Owner::from_stat(pid, &text))
}

/// This node's name as its processes see it (the same for slurmd and every slurmstepd of it:
/// the host name of its UTS namespace).
pub fn host_name() -> Option<String> {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string())
}
