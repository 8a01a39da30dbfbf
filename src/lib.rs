//! tfcluster: a Slurm SPANK plugin that gives every task of `srun --tf-cluster=...` its
//! `TF_CONFIG` and its share of the node's GPUs.
//!
//! - [`core`]: the pure layout engine (no FFI, no environment, no `unsafe`).
//! - [`spank`]: the thin shell Slurm loads.
//! - this file: the symbols Slurm looks up, each hook behind a panic guard
//!   ([`spank::guard`]).
//!
//! Only the hooks tfcluster uses are exported: each changes what Slurm does. `slurm_spank_job_epilog`
//! makes slurmd run an extra "spank epilog" slurmstepd at the end of every job on every node
//! (pyxis exports it too); `isolate=yes` needs it to remove what a killed slurmstepd left. It
//! asks the kernel for the node's table names and returns unless its job left one, with or
//! without that setting (its cost is measured in docs/performance.md).
//! `slurm_spank_task_post_fork` starts the workers' watcher's thread once the tasks have
//! forked; under `SlurmdParameters=contain_spank` slurmstepd runs it, as `task_exit`, in a short
//! child process per task.
//! slurmd itself runs nothing of tfcluster's but `init` (a line in its log): no thread, no
//! `slurmd_exit` (0.7.0's holder thread in slurmd lost its tables when a reconfigure started
//! slurmd anew, and lived as long as slurmd; the job's extern step holds them instead).

#![allow(non_upper_case_globals)]
// Every `unsafe` block says why it is sound, in a `// SAFETY:` line just above it.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod core;
pub mod spank;

use spank::ffi;
use spank::guard::guard;
use spank::handle::{self, Spank};
use std::ffi::{c_char, c_int};

/// The plugin's name: Slurm uses it in option variables (`..._OPTION_tfcluster_tf_cluster`).
#[no_mangle]
#[used]
pub static plugin_name: [u8; 10] = *b"tfcluster\0";

#[no_mangle]
#[used]
pub static plugin_type: [u8; 6] = *b"spank\0";

/// Must carry the running Slurm's major.minor (checked by the loader since 22.05).
#[no_mangle]
#[used]
pub static plugin_version: u32 = ffi::SLURM_VERSION_NUMBER;

/// # Safety
/// Called by Slurm with a valid handle and plugstack.conf words.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(
    sp: ffi::spank_t,
    ac: c_int,
    av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_init", || {
        // SAFETY: Slurm passes its handle and `ac` words at `av` (the function's contract).
        let (sp, args) = unsafe { (Spank::from_raw(sp), handle::args(ac, av)) };
        spank::hooks::init(&sp, &args)
    })
}

/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init_post_opt(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_init_post_opt", || {
        // SAFETY: Slurm's own handle for this hook (the function's contract).
        let sp = unsafe { Spank::from_raw(sp) };
        spank::hooks::init_post_opt(&sp)
    })
}

/// # Safety
/// Called by Slurm (srun) with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_local_user_init(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_local_user_init", || {
        // SAFETY: Slurm's own handle for this hook (the function's contract).
        let sp = unsafe { Spank::from_raw(sp) };
        spank::hooks::local_user_init(&sp)
    })
}

/// # Safety
/// Called by slurmstepd, with the job's user's privileges, with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_user_init(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_user_init", || {
        // SAFETY: Slurm's own handle for this hook (the function's contract).
        let sp = unsafe { Spank::from_raw(sp) };
        spank::hooks::user_init(&sp)
    })
}

/// # Safety
/// Called by slurmstepd in the task's process with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_init(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_task_init", || {
        // SAFETY: Slurm's own handle for this hook (the function's contract).
        let sp = unsafe { Spank::from_raw(sp) };
        spank::hooks::task_init(&sp)
    })
}

/// # Safety
/// Called by slurmstepd once per task, after every task of the node has forked.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_post_fork(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_task_post_fork", || {
        // SAFETY: Slurm's own handle for this hook (the function's contract).
        let sp = unsafe { Spank::from_raw(sp) };
        spank::hooks::task_post_fork(&sp)
    })
}

/// # Safety
/// Called by slurmstepd (its main process) with a valid handle, each time a task ends.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_exit(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_task_exit", || {
        // SAFETY: Slurm's own handle for this hook (the function's contract).
        let sp = unsafe { Spank::from_raw(sp) };
        spank::hooks::task_exit(&sp)
    })
}

/// # Safety
/// Called by Slurm at the end of every process that loaded the plugin.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_exit(
    _sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_exit", spank::hooks::exit)
}

/// # Safety
/// Called by slurmd's epilog process (as root) with a valid handle and plugstack.conf words.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_epilog(
    sp: ffi::spank_t,
    ac: c_int,
    av: *mut *mut c_char,
) -> c_int {
    guard("slurm_spank_job_epilog", || {
        // SAFETY: as in `slurm_spank_init`.
        let (sp, args) = unsafe { (Spank::from_raw(sp), handle::args(ac, av)) };
        spank::hooks::job_epilog(&sp, &args)
    })
}
