//! Ending a step on every node, through Slurm: the one way tfcluster stops a step. Each cause
//! calls it where it is found (`crate::spank::hooks::stepd`):
//! - a wrong plan, in `init_post_opt`, synchronously: before this node's tasks fork, since other
//!   nodes' tasks may already run with it;
//! - a task that cannot get its GPUs (in that task), or a node that cannot isolate the step (in
//!   its first task), in `task_init`, synchronously: that process ends without its program;
//! - the decider's end or a failed trainer, in `task_exit`, from a thread
//!   ([`Stop::after_return`]): slurmstepd must send that task's own status first (from the
//!   hook itself where it runs in a child process: `SlurmdParameters=contain_spank`).
//!
//! The first two kill twice ([`Stop::now`]); a task's end, once.

use super::process::Maker;
use super::timing;
use crate::spank::error::ShellError;
use crate::spank::handle::{Spank, U32Item};
use crate::spank::het;
use crate::spank::log;
use crate::spank::slurm;
use crate::spank::step::Shape;
use std::sync::Mutex;
use std::thread::JoinHandle;

/// What to stop: step `step_id` of the node's job, or of every component's job of a
/// heterogeneous job, whose first component's job is `het_leader`.
#[derive(Debug, Clone)]
pub struct Stop {
    pub jobs: Vec<u32>,
    pub het_leader: Option<u32>,
    pub step_id: u32,
    /// The process that built it: slurmstepd itself ([`Self::after_return`]).
    pub made_in: Maker,
}

/// How long a node waits after its line before ending the step. srun stops reading the nodes'
/// output once every task has ended after a stop, so a line still on its way is lost: without
/// a wait one line in four was, on the test cluster; with 250 ms none in 60 runs, loaded or
/// not. The ended task's own status reaches srun in this time too ([`Stop::after_return`]).
/// Paid only when a step is ended.
const FORWARD_TIME: std::time::Duration = std::time::Duration::from_millis(250);

/// How long after a stop's first kill the second goes out. Slurm's proctrack/linuxproc signals
/// only the step's processes that no longer carry slurmstepd's name: a task between its fork
/// and its exec (still in `task_init`) is passed over, and runs its program with the TF_CONFIG
/// the stop was meant to keep from it. Seen on 26.05's test cluster under CI's load: a node's
/// task reported its TF_CONFIG 1 s into a step that another node had stopped for a wrong plan.
/// By the second kill those tasks have exec'd. Paid only when a step is ended early.
const AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The stop a task's end started, running beside slurmstepd's main thread until the hooks'
/// `exit` waits for it ([`wait_for_the_stopper`]).
static STOPPER: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

impl Stop {
    /// The step's one stop, built before the step is planned: every component's job of a
    /// heterogeneous job (those slurmctld vouched for: [`Shape::het_jobs`]), else this job
    /// (also when the step's shape is unknown, or its components were refused). None when
    /// Slurm gives no job or step id.
    pub fn of_step(sp: &Spank, shape: Option<&Shape>) -> Option<Stop> {
        let (job_id, step_id) = (
            sp.item_u32(U32Item::JobId).ok()?,
            sp.item_u32(U32Item::StepId).ok()?,
        );
        Some(Stop {
            jobs: het::jobs_to_stop(shape, job_id),
            het_leader: het::leader(shape),
            step_id,
            made_in: Maker::here(),
        })
    }

    /// Ends every task of the step on every node, through Slurm, once the line that says why
    /// has had time to reach srun; says so when Slurm refuses. For the stops made while other
    /// nodes' tasks may still be starting (in `init_post_opt` and `task_init`), the kill goes
    /// out again [`AGAIN_AFTER`] later.
    pub fn now(&self) {
        if self.after_the_line(true) {
            std::thread::sleep(AGAIN_AFTER);
            self.kill_once(true);
        }
    }

    /// One kill, once the line that says why has had time to reach srun.
    fn after_the_line(&self, signals_succeed: bool) -> bool {
        log::wait_until_forwarded(FORWARD_TIME);
        self.kill_once(signals_succeed)
    }

    /// One kill of every job's step; false when Slurm refused one. `signals_succeed`:
    /// [`slurm::kill_step`]'s.
    fn kill_once(&self, signals_succeed: bool) -> bool {
        let mut all = true;
        for &job_id in &self.jobs {
            let (step, signal) = (self.step_id, libc::SIGKILL);
            let stopped = match self.het_leader == Some(job_id) {
                true => slurm::kill_het_leader_step(job_id, step, signal, signals_succeed),
                false => slurm::kill_step(job_id, step, signal, signals_succeed),
            };
            if let Err(reason) = stopped {
                let reason = format!("{reason}, step {job_id}.{}", self.step_id);
                log::error(&ShellError::Kill { reason }.to_string());
                all = false;
            }
        }
        all
    }

    /// One kill ([`Self::now`]'s first) from a thread of its own, so that `task_exit` returns
    /// first: slurmstepd sends the ended task's status to srun after the hook returns (within
    /// 100 ms), and from 23.11 Slurm's stop makes every status it sends afterwards a success
    /// (`KILL_NO_SIG_FAIL`): a stop from inside the hook turned a crashed task's signal into
    /// srun's exit 0. When no thread can be started, the step is ended from the hook. One kill
    /// only: by a task's end the other nodes' tasks have all but always exec'd, and a second
    /// would hold this node's end of the step a second longer at every training's end (the
    /// hooks' `exit`, which waits for this thread, comes before slurmstepd reports the step
    /// complete).
    ///
    /// Where the hook runs in a process of its own (`SlurmdParameters=contain_spank`, 24.05
    /// and later: slurmstepd runs `task_exit` in a child that shares its memory and exits as
    /// the hook returns, ending every thread it started), the stop goes out from the hook:
    /// the stopped tasks' signals still count as successes, unless the ended task's own
    /// status (`signaled`) is a signal, which would count as one too.
    pub fn after_return(&self, signaled: bool) {
        if !self.made_in.is_here() {
            self.after_the_line(!signaled);
            return;
        }
        let stop = self.clone();
        let spawned = std::thread::Builder::new()
            .name("tfcluster-stop".into())
            .spawn(move || {
                let _ = std::panic::catch_unwind(|| stop.after_the_line(true));
                timing::thread_end("stop");
            });
        match spawned {
            Ok(stopper) => *STOPPER.lock().unwrap_or_else(|p| p.into_inner()) = Some(stopper),
            Err(_) => {
                self.after_the_line(true);
            }
        }
    }
}

/// Waits for the stop [`Stop::after_return`] started, if any.
pub fn wait_for_the_stopper() {
    let stopper = STOPPER.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(stopper) = stopper {
        let _ = stopper.join();
    }
}
