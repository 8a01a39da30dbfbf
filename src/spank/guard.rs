//! Every entry from C runs behind [`guard`]: a panic becomes a logged error and -1, never an
//! unwind into Slurm.

use super::log;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs a hook (timed with `timing=yes`: [`super::timing`]); a panic becomes a logged error and
/// -1, never an unwind into C.
pub fn guard(hook: &str, f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(|| super::timing::hook(hook, f))) {
        Ok(rc) => rc,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            // Logging itself must not unwind out either.
            let _ = catch_unwind(|| {
                log::error(&format!("internal error in {hook}: {what} (please report)"))
            });
            -1
        }
    }
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

    /// Stand in for Slurm's `slurm_info` and `spank_context`, which `timing=yes` (off here)
    /// calls after a hook.
    #[no_mangle]
    extern "C" fn slurm_info(_fmt: *const c_char, _msg: *const c_char) {}
    #[no_mangle]
    extern "C" fn spank_context() -> crate::spank::ffi::spank_context_t {
        crate::spank::ffi::tfc_spank_context::TFC_S_CTX_ERROR
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
