//! A POSIX extended regular expression, compiled and run by libc as Slurm runs oci.conf's
//! `EnvExclude` (`regcomp(REG_EXTENDED)`, then `regexec` on each `NAME=value`), so tfcluster
//! matches exactly what slurmstepd will remove ([`crate::core::oci`]).

use std::ffi::{c_int, CString};

pub struct Regex {
    /// Boxed: libc keeps it by address between calls.
    compiled: Box<libc::regex_t>,
}

impl Regex {
    /// Compiles `pattern`; `Err` with libc's reason when it is not a valid expression (Slurm
    /// then fails the container step itself).
    pub fn new(pattern: &str) -> Result<Regex, String> {
        let text = CString::new(pattern).map_err(|_| "a NUL inside".to_string())?;
        // SAFETY: regex_t is plain data that regcomp fills in; zeroed is a valid start.
        let mut compiled: Box<libc::regex_t> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: a valid regex_t to fill and a NUL-terminated pattern.
        let rc = unsafe {
            libc::regcomp(
                &mut *compiled,
                text.as_ptr(),
                libc::REG_EXTENDED | libc::REG_NOSUB,
            )
        };
        if rc != 0 {
            // regcomp frees what it allocated when it fails.
            return Err(format!("regcomp error {rc}"));
        }
        Ok(Regex { compiled })
    }

    /// Whether the expression matches anywhere in `text` (a text with a NUL never does:
    /// environment strings have none).
    pub fn is_match(&self, text: &str) -> bool {
        let Ok(text) = CString::new(text) else {
            return false;
        };
        // SAFETY: a compiled regex_t, a NUL-terminated string, no match array (REG_NOSUB).
        let rc: c_int =
            unsafe { libc::regexec(&*self.compiled, text.as_ptr(), 0, std::ptr::null_mut(), 0) };
        rc == 0
    }
}

impl Drop for Regex {
    fn drop(&mut self) {
        // SAFETY: compiled by regcomp in `new`, freed once.
        unsafe { libc::regfree(&mut *self.compiled) }
    }
}

// SAFETY: regexec only reads the compiled expression; the plan that holds it is behind a
// Mutex, and each task process has its own copy after fork.
unsafe impl Send for Regex {}
