//! A small safe wrapper over the SPANK calls tfcluster makes. Every `unsafe` block that talks
//! to Slurm is here (and in `slurm.rs`, `log.rs` and the exported symbols in `lib.rs`).

use super::ffi;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;

/// A SPANK error code, shown by its name (the numbers are fixed since 21.08, see our header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpankError(pub c_int);

impl fmt::Display for SpankError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 11] = [
            "ESPANK_ERROR",
            "ESPANK_BAD_ARG",
            "ESPANK_NOT_TASK",
            "ESPANK_ENV_EXISTS",
            "ESPANK_ENV_NOEXIST",
            "ESPANK_NOSPACE",
            "ESPANK_NOT_REMOTE",
            "ESPANK_NOEXIST",
            "ESPANK_NOT_EXECD",
            "ESPANK_NOT_AVAIL",
            "ESPANK_NOT_LOCAL",
        ];
        let name = self
            .0
            .checked_sub(ffi::TFC_ESPANK_ERROR as c_int)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| NAMES.get(i));
        match name {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "SPANK error {}", self.0),
        }
    }
}

pub type SpankResult<T> = Result<T, SpankError>;

fn check(rc: c_int) -> SpankResult<()> {
    if rc == ffi::TFC_ESPANK_SUCCESS as c_int {
        Ok(())
    } else {
        Err(SpankError(rc))
    }
}

/// The SPANK items that are one `uint32_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum U32Item {
    JobId,
    StepId,
    /// This node's index in the step.
    NodeId,
    /// The step's node count (`S_JOB_NNODES`).
    Nodes,
    /// Tasks on this node.
    LocalTasks,
    /// Tasks in the step (`S_JOB_TOTAL_TASK_COUNT`).
    TotalTasks,
    /// The task's global id (task hooks only).
    TaskGlobalId,
    /// The job's owner (`S_JOB_UID`; a `uid_t`, 32 bits on Linux).
    JobUid,
}

impl U32Item {
    fn raw(self) -> ffi::spank_item_t {
        use ffi::tfc_spank_item as it;
        match self {
            U32Item::JobId => it::TFC_S_JOB_ID,
            U32Item::StepId => it::TFC_S_JOB_STEPID,
            U32Item::NodeId => it::TFC_S_JOB_NODEID,
            U32Item::Nodes => it::TFC_S_JOB_NNODES,
            U32Item::LocalTasks => it::TFC_S_JOB_LOCAL_TASK_COUNT,
            U32Item::TotalTasks => it::TFC_S_JOB_TOTAL_TASK_COUNT,
            U32Item::TaskGlobalId => it::TFC_S_TASK_GLOBAL_ID,
            U32Item::JobUid => it::TFC_S_JOB_UID,
        }
    }
}

/// Where this copy of the plugin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// srun
    Local,
    /// slurmstepd
    Remote,
    /// sbatch, salloc
    Allocator,
    Slurmd,
    /// prolog/epilog, or anything unknown
    Other,
}

pub fn context() -> Context {
    // SAFETY: takes no arguments and may be called from any hook.
    match unsafe { ffi::spank_context() } {
        ffi::tfc_spank_context::TFC_S_CTX_LOCAL => Context::Local,
        ffi::tfc_spank_context::TFC_S_CTX_REMOTE => Context::Remote,
        ffi::tfc_spank_context::TFC_S_CTX_ALLOCATOR => Context::Allocator,
        ffi::tfc_spank_context::TFC_S_CTX_SLURMD => Context::Slurmd,
        _ => Context::Other,
    }
}

/// The words after the plugin path in plugstack.conf.
///
/// # Safety
/// `argv` must point to `ac` valid C strings (or `ac` must be 0), as Slurm guarantees for hooks.
pub unsafe fn args(ac: c_int, argv: *mut *mut c_char) -> Vec<String> {
    if argv.is_null() || ac <= 0 {
        return Vec::new();
    }
    (0..ac as usize)
        // SAFETY: `ac` entries at `argv` (the function's contract).
        .map(|i| unsafe { *argv.add(i) })
        // SAFETY: each entry is NULL or a valid C string (the function's contract).
        .filter_map(|p| unsafe { c_string(p) })
        .collect()
}

/// srun only: sets a variable in srun's own environment, which srun copies into the step's
/// environment, so slurmstepd can read it with [`Spank::getenv`]. This is how the srun side hands
/// facts only it can see to the nodes. Never used in slurmstepd or a task, whose environment is
/// Slurm's array, not the process environment.
pub fn set_srun_env(name: &str, value: &str) -> Result<(), std::io::Error> {
    let (name, value) = (cstring(name), cstring(value));
    // SAFETY: valid C strings; setenv copies them. It changes srun's environment the way Slurm
    // itself does in this phase (spank_init_post_opt setenv()s each option's value for the
    // step), and tests/placement.rs shows the value reaching slurmstepd.
    if unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// srun only: removes a variable from srun's own environment, so the step's does not inherit
/// it ([`set_srun_env`]).
pub fn unset_srun_env(name: &str) -> Result<(), std::io::Error> {
    let name = cstring(name);
    // SAFETY: a valid C string; as set_srun_env, in srun's own environment.
    if unsafe { libc::unsetenv(name.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A C string from C (an option's argument, a library's message), copied, bytes that are not
/// UTF-8 replaced; `None` for NULL. The shell's one way to read a C string.
///
/// # Safety
/// `ptr` must be NULL or point to a NUL-terminated string valid for the call.
pub unsafe fn c_string(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: non-NULL and NUL-terminated per the caller's contract.
        Some(
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// The handle Slurm passes to a hook, valid for the duration of that call.
pub struct Spank(ffi::spank_t);

impl Spank {
    /// # Safety
    /// `sp` must be the handle Slurm passed to the running hook.
    pub unsafe fn from_raw(sp: ffi::spank_t) -> Spank {
        Spank(sp)
    }

    /// One of the items Slurm writes as a single `uint32_t` (the only ones this takes, so a
    /// wrong out-argument type cannot be asked for).
    pub fn item_u32(&self, item: U32Item) -> SpankResult<u32> {
        let mut value: u32 = 0;
        // SAFETY: every U32Item takes exactly one `uint32_t *` out-argument.
        check(unsafe { ffi::spank_get_item(self.0, item.raw(), &mut value as *mut u32) })?;
        Ok(value)
    }

    /// The step's program, argv\[0\] of `S_JOB_ARGV` (srun's `local_user_init` and slurmstepd);
    /// `None` for an empty command line. Only the program is read, not its arguments.
    pub fn program(&self) -> SpankResult<Option<String>> {
        let mut argc: c_int = 0;
        let mut argv: *mut *mut c_char = std::ptr::null_mut();
        // SAFETY: S_JOB_ARGV takes an `int *` and a `char ***`; Slurm points the latter at its
        // own array, which stays valid for the hook's duration.
        check(unsafe {
            ffi::spank_get_item(
                self.0,
                ffi::tfc_spank_item::TFC_S_JOB_ARGV,
                &mut argc as *mut c_int,
                &mut argv as *mut *mut *mut c_char,
            )
        })?;
        if argv.is_null() || argc <= 0 {
            return Ok(None);
        }
        // SAFETY: `argc` > 0 entries at `argv`, each a valid C string or null.
        let first = unsafe { *argv };
        // SAFETY: NULL or a valid C string, as above.
        Ok(unsafe { c_string(first) })
    }

    /// The environment Slurm will hand the program (`S_JOB_ENV`): its own array of
    /// `NAME=value` strings, ended by a null pointer, which `execve` gets. In a task's process
    /// it is the task's copy, made after the fork ([`crate::spank::task_env`] writes into it).
    pub fn env_array(&self) -> SpankResult<*mut *mut c_char> {
        let mut env: *mut *mut c_char = std::ptr::null_mut();
        // SAFETY: S_JOB_ENV takes one `char ***`; Slurm points it at its own array.
        check(unsafe {
            ffi::spank_get_item(
                self.0,
                ffi::tfc_spank_item::TFC_S_JOB_ENV,
                &mut env as *mut *mut *mut c_char,
            )
        })?;
        Ok(env)
    }

    /// This task's local index (`S_TASK_ID`, an `int`).
    pub fn task_id(&self) -> SpankResult<u32> {
        let mut value: c_int = -1;
        // SAFETY: S_TASK_ID takes one `int *`.
        check(unsafe {
            ffi::spank_get_item(
                self.0,
                ffi::tfc_spank_item::TFC_S_TASK_ID,
                &mut value as *mut c_int,
            )
        })?;
        u32::try_from(value).map_err(|_| SpankError(ffi::TFC_ESPANK_ERROR as c_int))
    }

    /// How the task ended (`S_TASK_EXIT_STATUS`, a wait status; `slurm_spank_task_exit` only).
    pub fn task_exit_status(&self) -> SpankResult<c_int> {
        let mut status: c_int = 0;
        // SAFETY: S_TASK_EXIT_STATUS takes one `int *`.
        check(unsafe {
            ffi::spank_get_item(
                self.0,
                ffi::tfc_spank_item::TFC_S_TASK_EXIT_STATUS,
                &mut status as *mut c_int,
            )
        })?;
        Ok(status)
    }

    /// The global id of this node's local task `local` (`S_JOB_LOCAL_TO_GLOBAL_ID`).
    pub fn local_to_global(&self, local: u32) -> SpankResult<u32> {
        let mut global: u32 = 0;
        // SAFETY: the item takes a `uint32_t` by value and a `uint32_t *`.
        check(unsafe {
            ffi::spank_get_item(
                self.0,
                ffi::tfc_spank_item::TFC_S_JOB_LOCAL_TO_GLOBAL_ID,
                local,
                &mut global as *mut u32,
            )
        })?;
        Ok(global)
    }

    /// A variable of the job (remote context only, where the plugin runs as root); `Ok(None)`
    /// when unset. The job's environment is the user's, so only the names of the threat
    /// model's inventory are read ([`crate::core::root_inputs::JOB_ENV`]): any other is
    /// refused (`ESPANK_BAD_ARG`), and the step that asked for it fails, as its tests would.
    pub fn getenv(&self, name: &str) -> SpankResult<Option<String>> {
        if !crate::core::root_inputs::job_env_listed(name) {
            return Err(SpankError(ffi::TFC_ESPANK_BAD_ARG));
        }
        let name = cstring(name);
        let mut len: usize = 4096;
        loop {
            let mut buf = vec![0u8; len];
            // SAFETY: buf has `len` writable bytes; Slurm NUL-terminates within them.
            let rc = unsafe {
                ffi::spank_getenv(self.0, name.as_ptr(), buf.as_mut_ptr().cast(), len as c_int)
            };
            match rc {
                0 => {
                    let end = buf.iter().position(|&b| b == 0).unwrap_or(len);
                    buf.truncate(end);
                    return Ok(Some(String::from_utf8_lossy(&buf).into_owned()));
                }
                ffi::TFC_ESPANK_ENV_NOEXIST => return Ok(None),
                ffi::TFC_ESPANK_NOSPACE if len < (1 << 24) => len *= 4,
                rc => return Err(SpankError(rc)),
            }
        }
    }

    /// Sets a variable in the task's (or step's) environment, replacing any value.
    pub fn setenv(&self, name: &str, value: &str) -> SpankResult<()> {
        let (name, value) = (cstring(name), cstring(value));
        // SAFETY: two valid C strings; Slurm copies them.
        check(unsafe { ffi::spank_setenv(self.0, name.as_ptr(), value.as_ptr(), 1) })
    }

    /// [`setenv`](Self::setenv) for a value that ends in a NUL already: passed to Slurm as it
    /// is, neither copied nor scanned (a task's TF_CONFIG can be 128 KB, and checking it for
    /// NULs with `CStr` cost each of 4096 tasks 17 µs, more than the rest of tfcluster's work
    /// per task). Only the last byte is checked: C reads up to the first NUL, which is at the end
    /// at the latest; the JSON renderer never writes one before it.
    pub fn setenv_nul(&self, name: &str, value_with_nul: &str) -> SpankResult<()> {
        if value_with_nul.as_bytes().last() != Some(&0) {
            return Err(SpankError(ffi::TFC_ESPANK_BAD_ARG));
        }
        let name = cstring(name);
        // SAFETY: a valid C string, and a buffer that holds a NUL within its bounds (checked
        // above); Slurm copies both.
        check(unsafe {
            ffi::spank_setenv(
                self.0,
                name.as_ptr(),
                value_with_nul.as_ptr().cast::<c_char>(),
                1,
            )
        })
    }

    pub fn unsetenv(&self, name: &str) -> SpankResult<()> {
        let name = cstring(name);
        // SAFETY: a valid C string.
        match unsafe { ffi::spank_unsetenv(self.0, name.as_ptr()) } {
            ffi::TFC_ESPANK_ENV_NOEXIST => Ok(()),
            rc => check(rc),
        }
    }

    /// Registers a command-line option (valid in `slurm_spank_init` only). Slurm copies the
    /// strings, so temporaries are fine.
    pub fn register_option(
        &self,
        name: &str,
        arginfo: &str,
        usage: &str,
        has_arg: c_int,
        cb: ffi::spank_opt_cb_f,
    ) -> SpankResult<()> {
        let (name, arginfo, usage) = (cstring(name), cstring(arginfo), cstring(usage));
        let mut opt = ffi::spank_option {
            name: name.as_ptr().cast_mut(),
            arginfo: arginfo.as_ptr().cast_mut(),
            usage: usage.as_ptr().cast_mut(),
            has_arg,
            val: 0,
            cb,
        };
        // SAFETY: `opt` and its strings outlive the call; Slurm copies them.
        check(unsafe { ffi::spank_option_register(self.0, &mut opt) })
    }
}

/// One copy; a NUL (which Slurm's variables and the core's JSON never hold) becomes a space
/// rather than a panic.
fn cstring(s: &str) -> CString {
    CString::new(s).unwrap_or_else(|_| CString::new(s.replace('\0', " ")).expect("no NUL left"))
}

/// In a task's own process (`task_init`), before `execve`: ends it with `code`, so that its
/// program never starts, whether plugstack.conf says `required` (where Slurm would not start it
/// either) or `optional` (where it would).
pub fn end_task(code: c_int) -> ! {
    // SAFETY: the task's process is a child slurmstepd forked to exec the program; ending it
    // here is what slurmstepd itself does when a required plugin's task_init fails.
    unsafe { libc::_exit(code) }
}
