//! Processes as `/proc` shows them: what a claim or a holder file records to tell a running
//! process from a later one given the same pid ([`crate::core::claims::Owner`]), and the
//! node's name; and whether a hook runs in the process that built a thing whose threads must
//! outlive the hook ([`Maker`]).

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

/// This node's name as Slurm names it (its NodeName), from slurmstepd's own view: the
/// `SLURMD_NODENAME` slurmstepd sets in its own process environment, which a task's process
/// inherits before `execve`; else the kernel's host name. Never the job's environment
/// (`spank_getenv`), which is the user's: a batch script carries the batch host's name into
/// every step it starts, and `srun --export` sets any.
pub fn node_name() -> Option<String> {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(host_name)
}

/// Whether process `pid` runs as root (its `/proc` entry is root's): what the check takes for
/// slurmd must be root's, not a user's process that calls itself `slurmd`.
pub fn is_root_process(pid: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("/proc/{pid}")).is_ok_and(|meta| meta.uid() == 0)
}

/// The process that built a thing whose thread must outlive the hook that starts it (the
/// step's stop, the workers' watcher): slurmstepd itself. Under
/// `SlurmdParameters=contain_spank` (24.05 and later) slurmstepd runs `user_init`,
/// `task_post_fork` and `task_exit` in a short-lived child that shares its memory and exits as
/// the hook returns, taking every thread the hook started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maker(u32);

impl Maker {
    /// This process.
    pub fn here() -> Maker {
        Maker(std::process::id())
    }

    /// Whether this code runs in the process that built the thing (not in such a child).
    pub fn is_here(&self) -> bool {
        *self == Maker::here()
    }
}
