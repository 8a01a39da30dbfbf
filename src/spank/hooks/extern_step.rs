//! The job's extern slurmstepd (slurm.conf `PrologFlags=Contain`), with `isolate=yes`: it holds
//! the tables of the job's steps whose tasks ended first on its node, from its `init` to its
//! `exit` ([`crate::spank::isolation::holder`]), and, should Slurm unload the plugin without
//! calling that `exit`, to the unload (where a step's watcher of its workers,
//! [`crate::spank::workers`], stops too).

use crate::spank::ffi;
use crate::spank::handle::{self, Spank};
use crate::spank::isolation::holder::Holder;
use std::sync::Mutex;

/// The job's extern slurmstepd, with `isolate=yes`: the holder of ended tables.
static HOLDER: Mutex<Option<Holder>> = Mutex::new(None);

/// The job's extern slurmstepd (slurm.conf `PrologFlags=Contain`), with `isolate=yes`: hold the
/// tables of the job's steps on this node whose tasks ended first, until slurmctld says each
/// step has ended ([`crate::spank::isolation::holder`]). Any other step: nothing.
pub fn start(sp: &Spank) {
    let step = sp.item_u32(handle::U32Item::StepId);
    let job = sp.item_u32(handle::U32Item::JobId);
    if let (Ok(step), Ok(job)) = (step, job) {
        if i64::from(step) == ffi::TFC_SLURM_EXTERN_CONT {
            *super::locked(&HOLDER) = crate::spank::isolation::holder::start_for_job(job);
        }
    }
}

/// The extern slurmstepd as it exits (the job has ended): its holder stops, and the tables it
/// held go with it. In any other process there is no holder: nothing happens.
pub fn stop() {
    // Taken out first, so that the thread is joined without the state's lock held.
    let holder = super::locked(&HOLDER).take();
    drop(holder);
}

/// Runs as the plugin is unloaded (`dlclose`, or the process's exit): a holder still running
/// is stopped and joined there, so that no thread of ours runs on in code that is gone. Slurm
/// skips the later plugins' `exit` when an earlier `required` plugin's fails, and unloads them
/// all the same. Said in slurmd's log, since the tables it held go with it early.
#[used]
#[link_section = ".fini_array"]
static STOP_AT_UNLOAD: extern "C" fn() = stop_at_unload;

extern "C" fn stop_at_unload() {
    let _ = std::panic::catch_unwind(|| {
        // Not waiting on a lock a hook may hold as the process exits.
        let holder = match HOLDER.try_lock() {
            Ok(mut holder) => holder.take(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().take(),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        let workers = super::stepd::workers_at_unload();
        // Through the holder's own log: a test binary has no Slurm to link.
        if let Some(holder) = holder {
            holder.stop_unloaded();
        }
        // A step's watcher of its workers (`fail_fast=auto`) stops too, and says so.
        drop(workers);
    });
}
