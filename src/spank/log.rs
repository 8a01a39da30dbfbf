//! Logging through Slurm, so messages reach the user: in srun they go to its stderr, in
//! slurmstepd's task hooks to the step's stderr, which srun prints ("slurmstepd-node1: ...").
//! Always `"%s"` plus our text: a message is never a format string.

use super::ffi;
use std::ffi::CString;

fn c(msg: &str) -> CString {
    CString::new(format!("tfcluster: {msg}").replace('\0', " ")).expect("no NUL left")
}

/// An error the user must see: `srun: error: tfcluster: ...`.
pub fn error(msg: &str) {
    // SAFETY: "%s" with one NUL-terminated string argument matches the printf contract.
    unsafe { ffi::slurm_error(c"%s".as_ptr(), c(msg).as_ptr()) }
}

/// Printed on the user's terminal without an `error:` prefix, whatever the log level: for
/// slurmstepd lines the user asked for with `srun -v` (slurmstepd forwards only errors).
pub fn user(msg: &str) {
    // SAFETY: as above.
    unsafe { ffi::slurm_spank_log(c"%s".as_ptr(), c(msg).as_ptr()) }
}

/// Shown with `srun -v` in srun itself (and in slurmd's log at verbose level).
pub fn verbose(msg: &str) {
    // SAFETY: as above.
    unsafe { ffi::slurm_verbose(c"%s".as_ptr(), c(msg).as_ptr()) }
}

/// Shown with `srun -vv`.
pub fn debug(msg: &str) {
    // SAFETY: as above.
    unsafe { ffi::slurm_debug(c"%s".as_ptr(), c(msg).as_ptr()) }
}
