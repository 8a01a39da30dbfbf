//! The watcher of `fail_fast=auto` in a step with `ps` ([`crate::core::ending`] says why): a
//! thread of the step's slurmstepd that looks, every [`EVERY`], for a connection to each of the
//! node's workers' server ports ([`super::sock_diag::connections`]: one held by the job's
//! processes, asked of the kernel for those ports alone), and marks a worker reached once it
//! sees one. Another user's socket on the port (an outbound connection bound to it) or a
//! TIME_WAIT an earlier step left marks nothing, and no connection older than the step is
//! there to mark: the node's claim on the step's ports, made just before the watch, refuses the
//! step while any socket but a TIME_WAIT holds one of them ([`crate::core::claims::check_free`]),
//! so the watch needs no look of its own at what was there before. In ParameterServerStrategy
//! only the chief connects to a worker's server, so a mark means the chief has reached it, and
//! its failure from then on leaves the step running ([`crate::core::ending::WorkerSeen`]).
//!
//! The watch is made before the tasks start ([`Watcher::new`]), its thread started once they
//! have forked ([`Watcher::run`], from `task_post_fork`): a thread of slurmstepd's while it
//! forks the tasks makes each fork and exec cost more (docs/performance.md, "Outside the hooks,
//! by kind").
//! The thread shares no lock with the tasks' forks (only its own flags and stop), ends by itself
//! once every worker is marked, and otherwise at slurmstepd's exit hook ([`Watcher::stop`]),
//! which waits for it at most one look; it says when it ends, in slurmd's log at debug level.
//! No thread, no mark: each worker's failure then ends the step, as `fail_fast=yes` does.

use super::process::Maker;
use super::timing;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the watcher looks: a worker that fails within this time of the chief's connection
/// may still end the step (the conservative side).
pub const EVERY: Duration = Duration::from_secs(1);

/// What the watcher asks the kernel: the connections on the workers' ports that the job's
/// user owns, each as its port ([`super::sock_diag::connections`]).
pub type Look = dyn Fn() -> Vec<u16> + Send + Sync;

/// Whether one of the workers' ports has a listener of the job's user yet
/// ([`super::sock_diag::listening_on`]). No connection comes before one, and the kernel answers
/// this from its listening sockets alone, where a look at connections walks every connection of
/// the machine: until then, the thread asks only this (what that saves at launch:
/// docs/performance.md, "The packaged line, phase by phase").
pub type Listens = dyn Fn() -> bool + Send + Sync;

/// The node's workers, by global rank and server port, and whether each has been reached.
pub struct Watcher {
    workers: Arc<Vec<(u32, u16, AtomicBool)>>,
    look: Arc<Look>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    /// What the thread needs, until [`Watcher::run`] starts it.
    to_run: Option<ToRun>,
    /// The process that made the watcher: the only one whose thread outlives a hook.
    made_in: Maker,
}

/// The thread's part of a [`Watcher`] not yet running.
struct ToRun {
    listens: Box<Listens>,
    every: Duration,
    say: Box<dyn Fn(&str) + Send + Sync>,
}

impl Watcher {
    /// Watches `workers` (global rank, server port), asking `look` for the job's connections on
    /// their ports every `every` from the thread, once `listens` says a port has a listener
    /// ([`Listens`]); `say` gets the line when the thread ends. The thread starts at
    /// [`Watcher::run`]. Made after the node's claim on the step's ports, which saw none of
    /// them held (the module's doc): every connection seen from then on is the step's.
    /// `None` when there is nothing to watch.
    pub fn new(
        workers: Vec<(u32, u16)>,
        (look, listens): (
            impl Fn() -> Vec<u16> + Send + Sync + 'static,
            impl Fn() -> bool + Send + Sync + 'static,
        ),
        every: Duration,
        say: impl Fn(&str) + Send + Sync + 'static,
    ) -> Option<Watcher> {
        if workers.is_empty() {
            return None;
        }
        let look: Arc<Look> = Arc::new(look);
        let workers: Arc<Vec<_>> = Arc::new(
            workers
                .into_iter()
                .map(|(rank, port)| (rank, port, AtomicBool::new(false)))
                .collect(),
        );
        Some(Watcher {
            workers,
            look,
            stop: Arc::new((Mutex::new(false), Condvar::new())),
            thread: None,
            to_run: Some(ToRun {
                listens: Box::new(listens),
                every,
                say: Box::new(say),
            }),
            made_in: Maker::here(),
        })
    }

    /// Starts the thread, once. Why not, when no thread can be started, or when this is not
    /// the process that made the watcher ([`Maker`]: the child's exit would take the thread);
    /// the caller should then drop the watcher: no thread, no mark.
    pub fn run(&mut self) -> Result<(), String> {
        let Some(ToRun {
            listens,
            every,
            say,
        }) = self.to_run.take()
        else {
            return Ok(());
        };
        let cannot = "fail_fast=auto: cannot watch this node's workers for the chief's connection";
        if !self.made_in.is_here() {
            return Err(format!(
                "{cannot}: slurmstepd ran the hook in a child process, as it does under \
                 SlurmdParameters=contain_spank, which the slurm.conf it runs with does not set; \
                 a worker's failure here ends the step (run `scontrol reconfigure` after \
                 changing SlurmdParameters)"
            ));
        }
        let (marks, stopped, looking) =
            (self.workers.clone(), self.stop.clone(), self.look.clone());
        let spawned = std::thread::Builder::new()
            .name("tfcluster-workers".into())
            .spawn(move || {
                let why = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    watch(&marks, (&*looking, &*listens), every, &stopped)
                }))
                .unwrap_or("it panicked");
                say(&format!(
                    "fail_fast=auto: stopped watching this node's workers for the chief's connection ({why})"
                ));
                timing::thread_end("workers");
            });
        match spawned {
            Ok(thread) => {
                self.thread = Some(thread);
                Ok(())
            }
            Err(e) => Err(format!(
                "{cannot} ({e}); a worker's failure here ends the step"
            )),
        }
    }

    /// Whether [`Watcher::run`] has been called (its thread may have ended since).
    pub fn running(&self) -> bool {
        self.to_run.is_none()
    }

    /// Whether a connection to global rank `rank`'s server port has been seen.
    pub fn reached(&self, rank: u32) -> bool {
        self.workers
            .iter()
            .any(|(r, _, seen)| *r == rank && seen.load(Ordering::Relaxed))
    }

    /// Looks once more, here, for rank `rank`'s port (a worker that just ended: its connection
    /// may be closing); marks it when seen.
    pub fn look_again(&self, rank: u32) -> bool {
        if self.reached(rank) {
            return true;
        }
        mark(&self.workers, &(self.look)(), Some(rank));
        self.reached(rank)
    }

    /// Stops the thread and waits for it: at most one look, as it checks between looks.
    pub fn stop(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Marks each worker (of rank `only`, if given) whose port has a connection in `found`.
fn mark(workers: &[(u32, u16, AtomicBool)], found: &[u16], only: Option<u32>) {
    for (rank, port, seen) in workers {
        if only.is_some_and(|r| r != *rank) {
            continue;
        }
        if found.contains(port) {
            seen.store(true, Ordering::Relaxed);
        }
    }
}

/// The thread: a look every `every` until every worker is marked or `stop` is set; why it ended.
/// It waits first: the node's tasks may not have started (under `contain_spank`, slurmstepd is
/// about to fork them: a thread that looked then ran beside each fork, and cost each of them).
fn watch(
    workers: &[(u32, u16, AtomicBool)],
    (look, listens): (&Look, &Listens),
    every: Duration,
    stop: &(Mutex<bool>, Condvar),
) -> &'static str {
    let (flag, wake) = stop;
    let mut listened = false;
    loop {
        let stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
        let (stopped, _) = wake
            .wait_timeout_while(stopped, every, |stopped| !*stopped)
            .unwrap_or_else(|p| p.into_inner());
        if *stopped {
            return "the step ends here";
        }
        drop(stopped);
        listened = listened || listens();
        if listened {
            mark(workers, &look(), None);
        }
        if workers
            .iter()
            .all(|(_, _, seen)| seen.load(Ordering::Relaxed))
        {
            return "the chief has connected to every one";
        }
    }
}
