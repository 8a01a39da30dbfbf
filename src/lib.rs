//! tfcluster: a Slurm SPANK plugin that gives every task of `srun --tf-cluster=...` its
//! `TF_CONFIG` and its share of the node's GPUs.
//!
//! - [`core`]: the pure layout engine (no FFI, no environment, no `unsafe`).
//! - [`spank`]: the thin shell Slurm loads.
//! - this file: the symbols Slurm looks up, each hook behind a panic guard.
//!
//! Only the hooks tfcluster uses are exported: each changes what Slurm does. `slurm_spank_job_epilog`
//! makes slurmd run an extra "spank epilog" slurmstepd at the end of every job on every node
//! (pyxis exports it too); `isolate=yes` needs it to remove what a killed slurmstepd left, and
//! without that setting it returns at once (its cost is measured in docs/performance.md).

#![allow(non_upper_case_globals)]
// Every `unsafe` block says why it is sound, in a `// SAFETY:` line just above it.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod core;
pub mod spank;

use spank::ffi;
use spank::handle::{self, Spank};
use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

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

/// Runs a hook; a panic becomes a logged error and -1, never an unwind into C.
fn guard(hook: &str, f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            // Logging itself must not unwind out either.
            let _ = catch_unwind(|| {
                spank::log::error(&format!("internal error in {hook}: {what} (please report)"))
            });
            -1
        }
    }
}

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

/// The `--tf-cluster` callback Slurm calls with the option's argument.
///
/// # Safety
/// `optarg` is NULL or a valid C string.
pub unsafe extern "C" fn option_callback(
    _val: c_int,
    optarg: *const c_char,
    remote: c_int,
) -> c_int {
    guard("the --tf-cluster callback", || {
        // SAFETY: `optarg` is NULL or a valid C string (the function's contract).
        let arg = unsafe { handle::c_string(optarg) };
        spank::hooks::option(arg, remote != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::guard;
    use std::ffi::{c_char, CStr};
    use std::sync::Mutex;

    static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

    /// Stands in for Slurm's `slurm_error(fmt, ...)` in this test binary; the plugin always
    /// calls it as `("%s", message)`, so two pointer arguments are the whole call.
    #[no_mangle]
    extern "C" fn slurm_error(_fmt: *const c_char, msg: *const c_char) {
        // SAFETY: the plugin's own NUL-terminated message.
        let msg = unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned();
        LOGGED.lock().unwrap().push(msg);
    }

    #[test]
    fn a_panicking_hook_returns_minus_one_and_says_so() {
        let rc = guard("slurm_spank_task_init", || panic!("index out of bounds"));
        assert_eq!(rc, -1);
        assert_eq!(
            LOGGED.lock().unwrap().last().unwrap(),
            "tfcluster: internal error in slurm_spank_task_init: index out of bounds (please report)"
        );
        assert_eq!(guard("slurm_spank_init", || 0), 0);
    }
}
