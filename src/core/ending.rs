//! What one task's end means for the rest of the step, so that no step waits for its time limit:
//! the policy ([`EndPolicy`], built with the step's plan) and what counts as a failure.
//!
//! Two rules, both applied on the node where the task ran, through Slurm:
//! - **The decider** (`end_with_chief`): the task whose exit decides the job's result (the chief,
//!   the master, else worker 0) ends the step whenever it exits. TensorFlow's servers (ps, and the
//!   workers of ParameterServerStrategy) never exit by themselves.
//! - **A failed task** (`fail_fast`, on by default): any other trainer that fails ends the step.
//!   MultiWorkerMirroredStrategy's coordination service waits up to an hour for a task that died
//!   before registering (its collectives cannot lose a member), and ParameterServerStrategy's
//!   chief never reaches its first step without a worker that died at start: ending the step at
//!   once wins. One failure TensorFlow survives is told apart (`auto`, the default, for specs
//!   with `ps`): a worker that fails once the chief has connected to its server. Its
//!   `ClusterCoordinator` gives that worker's functions to the others and uses it again if it
//!   comes back, so the step goes on, with a line, unless no worker is left by the node's count.
//!   The node tells "connected" by a connection to the worker's server port, seen while the
//!   worker ran ([`WorkerSeen`]; the shell's watcher): in ParameterServerStrategy only the chief
//!   connects to a worker's server. A worker that dies before that still ends the step in
//!   seconds, so no chief waits for it. An evaluator never ends training.
//!
//! What counts as a failure ([`Cause`]) is chosen so that ending a step never spoils what Slurm
//! or TensorFlow does on purpose: a signal Slurm, srun or the user sends (SIGTERM at preemption
//! or the time limit, SIGKILL when the step is ended) is not a failure, nor is TensorFlow's
//! preemption exit (`PreemptionCheckpointHandler` exits 42 after its checkpoint, and the chief
//! may still be writing its own when another task exits).

use super::settings::{Settings, Switch};
use super::spec::{Role, RoleTable};

/// The step's end-of-step policy, built with its plan: which task decides (`end_with_chief`),
/// whose failure ends the step (`fail_fast`), and which exit means "preempted". Asked each time
/// a task ends ([`Self::ending`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndPolicy {
    pub decider: Option<Decider>,
    pub fail_fast: FailFast,
    preemption_exit: u8,
    tasks: u32,
    /// The step's workers.
    workers: u32,
}

/// Whose failure ends the step (`fail_fast`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailFast {
    /// Every trainer's (`yes`; `auto` without `ps`).
    Any,
    /// Every trainer's, a worker's only until the chief has connected to it (`auto` with `ps`):
    /// the node watches its workers' server ports ([`WorkerSeen`]).
    UntilReached,
    /// No task's (`no`): Slurm's own behaviour.
    Never,
}

/// What the node saw of a worker that ended, for [`FailFast::UntilReached`]: whether a
/// connection to its server port was seen while it ran (the chief's), and how many of the
/// step's workers had ended on this node with a failure the step survived before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerSeen {
    pub reached: bool,
    pub lost_before: u32,
}

impl EndPolicy {
    /// The decider is the chief, or the master, else worker 0, as Kubeflow's TFJob decides
    /// success, when `end_with_chief` is on (`auto`: when the spec has `ps`) and the step has
    /// more than one task.
    pub fn new(roles: &RoleTable, settings: &Settings, tasks: u32) -> EndPolicy {
        // `auto`: with ps (the workers never end by themselves), and for Keras Tuner's oracle.
        let on = (settings.end_with_chief).on(roles.has(Role::Ps) || settings.tuner);
        let decider = (on && tasks >= 2)
            .then(|| {
                [Role::Chief, Role::Master, Role::Worker]
                    .into_iter()
                    .find_map(|role| roles.slices.iter().find(|s| s.role == role))
            })
            .flatten()
            .map(|slice| Decider {
                rank: slice.start,
                role: slice.role,
                others: tasks - 1,
            });
        let has_ps = roles.has(Role::Ps);
        let fail_fast = match settings.fail_fast {
            Switch::Yes => FailFast::Any,
            Switch::No => FailFast::Never,
            Switch::Auto if has_ps => FailFast::UntilReached,
            Switch::Auto => FailFast::Any,
        };
        let workers = roles
            .slices
            .iter()
            .filter(|s| s.role == Role::Worker)
            .map(|s| s.count)
            .sum();
        EndPolicy {
            decider,
            fail_fast,
            preemption_exit: settings.preemption_exit,
            tasks,
            workers,
        }
    }

    /// What srun's user must read when global rank `rank` ends with wait status `status`, if
    /// its end ends the step or is a failure the step survives: the decider's end, whatever it
    /// is, or another trainer's failure under `fail_fast`. `task` gives a rank's role, index
    /// and host; `oom_killed` is asked only for a SIGKILL; `seen`, what the node saw of a worker,
    /// only for a worker's failure under [`FailFast::UntilReached`].
    pub fn ending<'a>(
        &self,
        rank: u32,
        status: Option<i32>,
        task: impl FnOnce(u32) -> Option<(Role, u32, &'a str)>,
        oom_killed: impl FnOnce() -> bool,
        seen: impl FnOnce() -> WorkerSeen,
    ) -> Option<StepEnd> {
        if let Some(decider) = self.decider.filter(|d| d.rank == rank) {
            return Some(StepEnd {
                message: decider.exit_message(status),
                failure: false,
                stops: true,
            });
        }
        let (role, index, host) = task(rank)?;
        if self.fail_fast == FailFast::Never || role == Role::Evaluator || self.tasks < 2 {
            return None;
        }
        let end = End::from_wait_status(status?);
        let mut oom = false;
        let cause = end.cause(self.preemption_exit, || {
            oom = oom_killed();
            oom
        });
        if cause != Cause::Failed {
            return None;
        }
        let survived = (self.fail_fast == FailFast::UntilReached && role == Role::Worker)
            .then(seen)
            .filter(|seen| seen.reached)
            .map(|seen| Survived {
                lost: seen.lost_before + 1,
                workers: self.workers,
            });
        let failure = Failure {
            rank,
            role,
            index,
            host,
            end,
            oom_killed: oom,
            others: self.tasks - 1,
            survived,
        };
        Some(StepEnd {
            message: failure.message(),
            failure: true,
            stops: survived.is_none_or(|s| s.lost >= s.workers),
        })
    }

    /// The node must watch its workers' server ports for the chief's connection
    /// ([`WorkerSeen`]).
    pub fn watches_workers(&self) -> bool {
        self.fail_fast == FailFast::UntilReached
    }
}

/// How a task ended: its wait status, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Exited(u8),
    Signaled(i32),
}

/// What a task's end is, as far as the rest of the step is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    Success,
    /// TensorFlow's preemption exit (`preemption_exit`): checkpointed, to be requeued.
    Preempted,
    /// A signal someone sent on purpose (Slurm at preemption, the time limit or the step's end,
    /// srun forwarding Ctrl-C, the user's `scancel --signal`), or a shell reporting one as
    /// 128+N: the step is ending already, or the program chose to stop.
    Sent,
    /// The program failed: a non-zero exit, a crash signal, or the OOM killer.
    Failed,
}

/// Signals a program brings on itself (a crash, a limit): the rest are sent by someone.
const CRASH_SIGNALS: &[i32] = &[
    libc::SIGSEGV,
    libc::SIGABRT,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGSYS,
    libc::SIGTRAP,
    libc::SIGXCPU,
    libc::SIGXFSZ,
];

impl End {
    /// From a wait status: the exit code in bits 8-15, or the terminating signal in bits 0-6.
    pub fn from_wait_status(status: i32) -> End {
        match status & 0x7f {
            0 => End::Exited(((status >> 8) & 0xff) as u8),
            signal => End::Signaled(signal),
        }
    }

    /// The signal that ended the task, itself or (128+N) the program a shell ran.
    fn signal(self) -> Option<i32> {
        match self {
            End::Signaled(signal) => Some(signal),
            // A shell's report of the signal that ended its program: 128 + 1..31.
            End::Exited(code @ 129..=159) => Some(i32::from(code) - 128),
            End::Exited(_) => None,
        }
    }

    /// What the end is; `oom_killed` is asked only for a SIGKILL (the task's own, or a shell's
    /// 137), the only end the OOM killer may have caused, so the node's OOM count is read only
    /// then.
    pub fn cause(self, preemption_exit: u8, oom_killed: impl FnOnce() -> bool) -> Cause {
        match (self, self.signal()) {
            (End::Exited(0), _) => Cause::Success,
            (End::Exited(code), _) if code == preemption_exit => Cause::Preempted,
            (_, Some(signal)) if CRASH_SIGNALS.contains(&signal) => Cause::Failed,
            (_, Some(libc::SIGKILL)) if oom_killed() => Cause::Failed,
            (_, Some(_)) => Cause::Sent,
            (End::Exited(_), None) => Cause::Failed,
            (End::Signaled(_), None) => unreachable!("a signaled end has a signal"),
        }
    }

    /// `exited 3`, `was killed by signal 11 (SIGSEGV)`, `was killed by the OOM killer`.
    pub fn describe(self, oom_killed: bool) -> String {
        match self {
            End::Exited(code) if oom_killed => {
                format!("exited {code} (a program it ran was killed by the OOM killer)")
            }
            End::Exited(code) => format!("exited {code}"),
            End::Signaled(_) if oom_killed => "was killed by the OOM killer (SIGKILL)".into(),
            End::Signaled(signal) => match signal_name(signal) {
                Some(name) => format!("was killed by signal {signal} ({name})"),
                None => format!("was killed by signal {signal}"),
            },
        }
    }
}

fn signal_name(signal: i32) -> Option<&'static str> {
    const NAMES: &[(i32, &str)] = &[
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    NAMES
        .iter()
        .find(|(n, _)| *n == signal)
        .map(|(_, name)| *name)
}

/// A task's end that ends the step, or a failure it survives: the line srun's user reads,
/// whether it is a failure (an error line) or the decider's end (training is over), and whether
/// the rest of the step is stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepEnd {
    pub message: String,
    pub failure: bool,
    pub stops: bool,
}

/// The task that ends the step when it exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decider {
    pub rank: u32,
    /// Its role (index 0 of it).
    pub role: Role,
    /// How many other tasks the step has.
    pub others: u32,
}

impl Decider {
    /// The line srun's user sees when it exits: `chief exited 0; stopping the step's other 5
    /// tasks`. `status` is the task's wait status, when Slurm gave it.
    pub fn exit_message(&self, status: Option<i32>) -> String {
        let who = match self.role {
            Role::Worker => "worker 0".to_string(),
            role => role.to_string(),
        };
        let how = match status.map(End::from_wait_status) {
            Some(End::Exited(code)) => format!("exited {code}"),
            Some(End::Signaled(signal)) => format!("was killed by signal {signal}"),
            None => "ended".to_string(),
        };
        format!("{who} {how}; {}", stopping(self.others))
    }
}

/// A failed task, as srun's user sees it: `rank 2 (worker:1 on n012) exited 3; stopping the
/// step's other 3 tasks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure<'a> {
    pub rank: u32,
    pub role: Role,
    pub index: u32,
    pub host: &'a str,
    pub end: End,
    pub oom_killed: bool,
    pub others: u32,
    /// A worker the chief had connected to ([`FailFast::UntilReached`]).
    pub survived: Option<Survived>,
}

/// A worker lost after the chief had connected to it: how many the node has lost, this one
/// included, of the step's workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Survived {
    pub lost: u32,
    pub workers: u32,
}

impl Failure<'_> {
    pub fn message(&self) -> String {
        let who = format!(
            "rank {} ({}:{} on {}) {}",
            self.rank,
            self.role,
            self.index,
            self.host,
            self.end.describe(self.oom_killed)
        );
        match self.survived {
            None => format!("{who}; {}", stopping(self.others)),
            Some(Survived { lost, workers }) if lost >= workers => format!(
                "{who} after the chief had connected to it, and no worker is left ({} has lost all {workers}); {}",
                self.host,
                stopping(self.others)
            ),
            Some(Survived { lost, workers }) => format!(
                "{who} after the chief had connected to it; the step goes on without it \
                 (ParameterServerStrategy gives its work to the other workers: {} of the \
                 step's {workers} workers left by {}'s count)",
                workers - lost,
                self.host
            ),
        }
    }
}

fn stopping(others: u32) -> String {
    format!(
        "stopping the step's other {others} task{}",
        if others == 1 { "" } else { "s" }
    )
}

/// The OOM killer's count on this node (`oom_kill` in /proc/vmstat, Linux 4.13 and later); `None`
/// when the text has no such line.
pub fn oom_kills(vmstat: &str) -> Option<u64> {
    vmstat
        .lines()
        .find_map(|line| line.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}
