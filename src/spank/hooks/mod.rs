//! What each hook does, per context. The plugin's whole life in one job:
//!
//! | process (context)   | hook                         | work                                          |
//! |---------------------|------------------------------|-----------------------------------------------|
//! | srun, sbatch, salloc, slurmstepd | `init`          | read plugstack.conf settings, register `--tf-cluster` (slurmd: log the version loaded, nothing more); with `isolate=yes`, the job's extern slurmstepd (`PrologFlags=Contain`): start holding the tables of steps whose tasks ended first on the node ([`extern_step`]) |
//! | same                | option callback              | parse the spec: a syntax error fails srun/sbatch before submission; `check` (srun: with its own copy and `isolate` for the nodes to compare) |
//! | srun (1/component)  | `init_post_opt`              | count the step's components |
//! | srun                | `local_user_init`            | say the version loaded (`-v`); fit the spec to the step: a mismatch fails srun before launch ([`srun`]); a heterogeneous step's counts are checked on the nodes |
//! | slurmstepd (1/node) | `init_post_opt`              | with `check`, look at the node as a step would and nothing else ([`crate::spank::check`]); otherwise plan the whole step once, check it against Slurm's own ids for this node, record the node's GPUs ([`stepd`]); claim the node's step ports ([`crate::spank::claims`]); with `isolate=yes`, install the step's firewall ([`crate::spank::isolation::firewall`]); a node that cannot keeps every task from starting (`task_init` ends each, the first says why); with `fail_fast=auto` and ps, make the watcher of its workers' server ports, which needs no look yet: the claim has just seen them held by no socket ([`crate::spank::workers`]), and where Slurm may run `task_post_fork` in a child process (`contain_spank`), start watching them ([`crate::spank::slurm_conf`]) |
//! | slurmstepd (1/node) | `user_init`                  | with the job's user's privileges (Slurm drops them for this hook): which container runtimes the job's `PATH` names, looked at as the user ([`stepd`]); then each name the node's tasks will be given that the step's environment lacks, made there empty, for each task to write its value into its own copy ([`crate::spank::task_env`]) |
//! | slurmstepd (1/task) | `task_post_fork`             | once every task of the node has forked: the step's environment loses the empty names `user_init` made (each task has its copy); start watching the workers' server ports for the chief's connection (a thread of slurmstepd's, started after the forks, which it would make costlier) |
//! | task (1/task)       | `task_init`                  | set every variable the plan gives this task (TF_CONFIG, its GPUs, ...): into the task's own entry of its name where `user_init` made one, through `spank_setenv` otherwise, and unset the empty names it is not given ([`task`]); with `check`, the node's first task prints the node's line instead and fails when it says NOT OK |
//! | slurmstepd          | `task_exit`                  | when the chief (or worker 0) ends (`end_with_chief`), or another trainer fails (`fail_fast`), say which and end the step (from a thread, once the task's own status is on its way to srun); a worker the chief had reached: say so, and the step goes on |
//! | slurmstepd          | `exit`                       | stop the workers' watcher; wait for the stop's thread: the stop must go out even when the node's last task has ended; remove the step's firewall, leaving the table for the step's other nodes (handed to the extern step's holder: [`crate::spank::isolation::handover`]); the extern step: stop holding ([`extern_step`], which also stops it should Slurm unload the plugin without this hook) |
//! | slurmd's epilog (1/node/job) | `job_epilog`        | with `isolate=yes`: remove every firewall table the job's steps left on the node (a slurmstepd killed with SIGKILL runs no `exit`: [`epilog`]) |
//!
//! Each hook file keeps its own process's state: srun's components ([`srun`]), a step's plan,
//! stop and watcher ([`stepd`], which each task's process reads from its copy: [`task`]), the
//! extern step's holder ([`extern_step`]); this file keeps only
//! what every process is given alike, plugstack.conf's line and the option.
//!
//! Without `--tf-cluster` every hook returns at once and nothing changes (with `isolate=yes`, the
//! extern step's holder, a thread asleep until a step hands it a table, starts all the same:
//! the extern step cannot know whether a later step uses the option). Errors found in
//! slurmstepd are kept until `task_init` and reported there: a failing remote `init_post_opt`
//! makes srun report a cryptic launch failure (and may drain nodes), a failing `task_init`
//! names the task and keeps it from running with a wrong or missing TF_CONFIG. When a node finds
//! that the plan itself is wrong (Slurm placed the tasks otherwise), it stops the whole step.

mod epilog;
mod extern_step;
mod srun;
mod stepd;
mod task;

pub use epilog::job_epilog;
pub use srun::local_user_init;
pub use stepd::{exit, task_exit, task_post_fork};
pub use task::task_init;

use super::ffi;
use super::handle::{self, Context, Spank};
use super::log;
use crate::core::{check, Error, Settings, Spec};
use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard};

pub const OPTION_NAME: &str = "tf-cluster";
/// `srun --help`'s line. The argument is optional, so getopt takes it only after `=`: the line
/// says so, since `--tf-cluster SPEC` would make SPEC the program.
pub const OPTION_USAGE: &str = "[tfcluster] TF_CONFIG and a GPU share per task for TensorFlow \
     (PyTorch: --tf-cluster=worker:*,torch=yes). Write the =: --tf-cluster=chief:1,ps:2,worker:* \
     (SPEC is ROLE:COUNT,...); no SPEC: every task a worker; --tf-cluster=off: not this step";

/// What this process was given, in every context alike: plugstack.conf's line and the
/// `--tf-cluster` option. What each process then does with them is its hook file's own state
/// ([`srun`]'s components, [`stepd`]'s plan, [`extern_step`]'s holder).
#[derive(Clone)]
struct Given {
    /// The plugstack.conf settings, or why they are invalid.
    settings: Option<Result<Settings, Error>>,
    /// The plugstack.conf line's words, as written: what `--tf-cluster=check` compares between
    /// srun's host and each node.
    words: Vec<String>,
    /// The `--tf-cluster` value, parsed, when the option was given (or why it does not parse).
    option: Option<Result<Spec, Error>>,
    /// srun: the option was given without an argument (`--tf-cluster`, or `--tf-cluster SPEC`
    /// by mistake, which makes SPEC the program).
    bare: bool,
    /// `--tf-cluster=check` was given: the check runs instead of a step's variables
    /// ([`crate::core::check`]).
    check: bool,
    /// How many times the option callback ran: in srun, once for a value from the job's
    /// environment alone (`#SBATCH --tf-cluster`), again for one on srun's own line.
    option_calls: u32,
}

static GIVEN: Mutex<Given> = Mutex::new(Given {
    settings: None,
    words: Vec::new(),
    option: None,
    bare: false,
    check: false,
    option_calls: 0,
});

/// srun calls it once per component, after its options; slurmstepd once, before the tasks fork.
pub fn init_post_opt(sp: &Spank) -> c_int {
    match handle::context() {
        Context::Local => srun::init_post_opt(),
        Context::Remote => stepd::init_post_opt(sp),
        _ => 0,
    }
}

/// slurmstepd only, once per node after `init_post_opt`, with the job's user's privileges.
pub fn user_init(sp: &Spank) -> c_int {
    match handle::context() {
        Context::Remote => stepd::user_init(sp),
        _ => 0,
    }
}

/// Locks `mutex`, recovering from a poisoned lock (a panic in an earlier hook is already
/// reported; it must not make every later hook fail).
fn locked<T>(mutex: &'static Mutex<T>) -> MutexGuard<'static, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What this process was given, a copy: no hook holds its lock while it works.
fn given() -> Given {
    locked(&GIVEN).clone()
}

impl Given {
    /// The plugstack.conf settings (the defaults where `init` has not run).
    fn settings(&self) -> Result<Settings, Error> {
        self.settings
            .clone()
            .unwrap_or_else(|| Ok(Settings::default()))
    }
}

/// The line that says which tfcluster is loaded, and for which Slurm release: in slurmd's log
/// when slurmd starts, and with `srun -v` (an error may tell users to match versions).
pub fn loaded_line() -> String {
    format!(
        "version {} loaded, built for Slurm {}",
        env!("CARGO_PKG_VERSION"),
        ffi::SLURM_RELEASE
    )
}

pub fn init(sp: &Spank, args: &[String]) -> c_int {
    let ctx = handle::context();
    // slurmd's; srun's comes in its local_user_init, once `-v` applies.
    if ctx == Context::Slurmd {
        log::info(&loaded_line());
    }
    let parsed = Settings::from_plugstack(args);
    if let Err(e) = &parsed {
        // slurmd logs it at start-up for the admin; users see it when they use the option.
        if ctx == Context::Slurmd {
            log::error(&e.to_string());
        }
    }
    let isolate = parsed.as_ref().is_ok_and(|s| s.isolate);
    super::timing::enable(parsed.as_ref().is_ok_and(|s| s.timing));
    {
        let mut given = locked(&GIVEN);
        given.settings = Some(parsed);
        given.words = args.to_vec();
    }
    if ctx == Context::Remote && isolate {
        extern_step::start(sp);
    }
    if matches!(ctx, Context::Local | Context::Remote | Context::Allocator) {
        let cb: ffi::spank_opt_cb_f = Some(option_callback);
        if let Err(e) = sp.register_option(OPTION_NAME, "SPEC", OPTION_USAGE, 2, cb) {
            // Not fatal: jobs without the option must keep running even if, say, another
            // plugin already owns --tf-cluster.
            log::error(&format!("cannot register --{OPTION_NAME}: {e}"));
        }
    }
    0
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
    super::guard::guard("the --tf-cluster callback", || {
        // SAFETY: `optarg` is NULL or a valid C string (the function's contract).
        let arg = unsafe { handle::c_string(optarg) };
        option(arg, remote != 0)
    })
}

/// The option callback: in srun/sbatch/salloc a bad spec, or an empty one (`--tf-cluster=`),
/// fails the command ("Invalid --tf-cluster argument") before anything is submitted. In
/// slurmstepd (where it runs twice before 24.05, once after) it only records the latest value;
/// there an empty value means a bare `--tf-cluster`: all workers.
pub fn option(optarg: Option<String>, remote: bool) -> c_int {
    let mut given = locked(&GIVEN);
    let optarg = Spec::slurm_arg(optarg.as_deref());
    given.option_calls += 1;
    given.check = check::asked(optarg);
    if given.check {
        // The check instead of a step: no spec, and srun's copy for the nodes to compare.
        given.option = None;
        given.bare = false;
        if !remote {
            let copy = check::copy(env!("CARGO_PKG_VERSION"), ffi::SLURM_RELEASE);
            let isolates = match given.settings().is_ok_and(|s| s.isolate) {
                true => "yes",
                false => "no",
            };
            let line = given.words.join(" ");
            for (name, value) in [
                (check::SRUN_VAR, copy.as_str()),
                (check::SRUN_ISOLATE_VAR, isolates),
                (check::SRUN_LINE_VAR, line.as_str()),
            ] {
                if let Err(e) = handle::set_srun_env(name, value) {
                    log::debug(&format!("cannot set {name} in srun's environment: {e}"));
                }
            }
            if let Err(e) = handle::unset_srun_env(check::ANSWERED_VAR) {
                log::debug(&format!(
                    "cannot remove {} from srun's environment: {e}",
                    check::ANSWERED_VAR
                ));
            }
        }
        return 0;
    }
    if Spec::is_off(optarg) {
        // The step opts out: as if the option had never been given.
        given.option = None;
        given.bare = false;
        return 0;
    }
    let spec = Spec::parse(optarg);
    if !remote {
        let checked = Spec::check_typed(optarg)
            .and(spec.clone())
            .and_then(|spec| {
                given
                    .settings()?
                    .with_overrides(&spec.overrides)
                    .map(|_| ())
            });
        if let Err(e) = checked {
            log::error(&e.to_string());
            return -1;
        }
        given.bare = optarg.is_none();
    }
    // In slurmstepd an error is kept and reported by each task (a failing remote callback is
    // only logged by slurmd, and the job would run as if the option were absent).
    given.option = Some(spec);
    0
}
