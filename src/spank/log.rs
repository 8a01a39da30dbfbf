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

/// In slurmd's log at its default level (info), and in srun's output with `srun -v`.
pub fn info(msg: &str) {
    // SAFETY: as above.
    unsafe { ffi::slurm_info(c"%s".as_ptr(), c(msg).as_ptr()) }
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

/// Gives slurmstepd's I/O thread time to forward a line to srun before the step is ended:
/// `limit`, after the stderr pipe (when it is one) has been read. The pipe alone is not enough
/// (the line can still be lost between slurmstepd and srun), hence the fixed time.
pub fn wait_until_forwarded(limit: std::time::Duration) {
    let start = std::time::Instant::now();
    loop {
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int; fd 2 is only queried.
        let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::FIONREAD, &mut unread) };
        if rc != 0 || unread <= 0 || start.elapsed() >= limit {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    std::thread::sleep(limit.saturating_sub(start.elapsed()));
}
