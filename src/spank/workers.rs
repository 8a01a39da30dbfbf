//! The watcher of `fail_fast=auto` in a step with `ps` ([`crate::core::ending`] says why): a
//! thread of the step's slurmstepd that looks, every [`EVERY`], for a connection to each of the
//! node's workers' server ports ([`super::sock_diag::connected_ports`]), and marks a worker
//! reached once it sees one. In ParameterServerStrategy only the chief connects to a worker's
//! server, so a mark means the chief has reached it, and its failure from then on leaves the
//! step running ([`crate::core::ending::WorkerSeen`]).
//!
//! The thread shares no lock with the tasks' forks (only its own flags and stop), ends by itself
//! once every worker is marked, and otherwise at slurmstepd's exit hook ([`Watcher::stop`]),
//! which waits for it at most one look; it says when it ends, in slurmd's log at debug level.
//! No thread, no mark: each worker's failure then ends the step, as `fail_fast=yes` does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the watcher looks: a worker that fails within this time of the chief's connection
/// may still end the step (the conservative side).
pub const EVERY: Duration = Duration::from_secs(1);

/// The node's workers, by global rank and server port, and whether each has been reached.
pub struct Watcher {
    workers: Arc<Vec<(u32, u16, AtomicBool)>>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching `workers` (global rank, server port), asking `look` for the ports that
    /// have a connection every `every`; `say` gets the line when the thread ends. `None` when
    /// there is nothing to watch or no thread can be started (then no worker is ever marked).
    pub fn start(
        workers: Vec<(u32, u16)>,
        look: impl Fn() -> Vec<u16> + Send + 'static,
        every: Duration,
        say: impl Fn(&str) + Send + Sync + 'static,
    ) -> Option<Watcher> {
        if workers.is_empty() {
            return None;
        }
        let workers: Arc<Vec<_>> = Arc::new(
            workers
                .into_iter()
                .map(|(rank, port)| (rank, port, AtomicBool::new(false)))
                .collect(),
        );
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (marks, stopped) = (workers.clone(), stop.clone());
        let say = Arc::new(say);
        let said = say.clone();
        let spawned = std::thread::Builder::new()
            .name("tfcluster-workers".into())
            .spawn(move || {
                let why = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    watch(&marks, &look, every, &stopped)
                }))
                .unwrap_or("it panicked");
                said(&format!(
                    "fail_fast=auto: stopped watching this node's workers for the chief's connection ({why})"
                ));
            });
        let thread = match spawned {
            Ok(thread) => thread,
            Err(e) => {
                say(&format!(
                    "fail_fast=auto: cannot watch this node's workers for the chief's connection ({e}); a worker's failure here ends the step"
                ));
                return None;
            }
        };
        Some(Watcher {
            workers,
            stop,
            thread: Some(thread),
        })
    }

    /// Whether a connection to global rank `rank`'s server port has been seen.
    pub fn reached(&self, rank: u32) -> bool {
        self.workers
            .iter()
            .any(|(r, _, seen)| *r == rank && seen.load(Ordering::Relaxed))
    }

    /// Looks once more, here, for rank `rank`'s port (a worker that just ended: its connection
    /// may be closing), with `look`; marks it when seen.
    pub fn look_again(&self, rank: u32, look: impl Fn() -> Vec<u16>) -> bool {
        if self.reached(rank) {
            return true;
        }
        let ports = look();
        for (r, port, seen) in self.workers.iter() {
            if *r == rank && ports.contains(port) {
                seen.store(true, Ordering::Relaxed);
            }
        }
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

/// The thread: a look every `every` until every worker is marked or `stop` is set; why it ended.
fn watch(
    workers: &[(u32, u16, AtomicBool)],
    look: &dyn Fn() -> Vec<u16>,
    every: Duration,
    stop: &(Mutex<bool>, Condvar),
) -> &'static str {
    let (flag, wake) = stop;
    loop {
        let ports = look();
        for (_, port, seen) in workers {
            if ports.contains(port) {
                seen.store(true, Ordering::Relaxed);
            }
        }
        if workers
            .iter()
            .all(|(_, _, seen)| seen.load(Ordering::Relaxed))
        {
            return "the chief has connected to every one";
        }
        let stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
        let (stopped, _) = wake
            .wait_timeout_while(stopped, every, |stopped| !*stopped)
            .unwrap_or_else(|p| p.into_inner());
        if *stopped {
            return "the step ends here";
        }
    }
}
