//! The holder of ended tables ([`crate::core::isolation::holding`] says why): a thread in the
//! job's extern slurmstepd ([`super::handover`] is slurmstepd's side). All as root, through
//! libnftables and files in a root-only directory of the node.

use super::nftables::{self, Nft};
use super::watch::Watch;
use crate::core::claims::Owner;
use crate::core::isolation::handover::{self, Stage, HOLDER_FILE};
use crate::core::isolation::holding::{self, Act, HolderFile, Holding, Look, StepKey, ASK};
use crate::core::isolation::{rules, tables};
use crate::spank::log;
use crate::spank::process;
use crate::spank::run_dir;
use crate::spank::slurm;
use crate::spank::timing;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running holder: job `job_id`'s extern slurmstepd's, stopped when it exits (the job has
/// ended), its tables and its directory with it.
pub struct Holder {
    stop: Arc<AtomicBool>,
    /// Set by the thread when it gave way to another live holder: the directory is that one's.
    yielded: Arc<AtomicBool>,
    /// Wakes the thread to stop (an eventfd).
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
    dir: PathBuf,
    /// Where its lines go ([`Passed::say`]).
    say: Arc<dyn Fn(&str) + Send + Sync>,
}

impl Holder {
    /// Stops the holder as the plugin is unloaded without its exit hook having run (Slurm
    /// skips it when an earlier `required` plugin's fails), saying so first.
    pub fn stop_unloaded(self) {
        (self.say)(holding::UNLOADED_LINE);
    }
}

/// The extern slurmstepd of job `job_id`, with `isolate=yes`: start holding. `None`, with a
/// line in slurmd's log, when it cannot (the job's ended tables then stay, not owned, and the
/// first step that leaves one says so once per node).
pub fn start_for_job(job_id: u32) -> Option<Holder> {
    let failed = |e: String| {
        log::error(&format!(
            "isolate=yes: job {job_id}'s extern step cannot hold the tables of nodes whose \
             tasks ended first: {e}; they stay, not owned, so a `nft flush ruleset` on this \
             node lets other users here reach the steps' other nodes: check that root can load \
             libnftables.so.1 and write {} on this node",
            handover::HELD_DIR
        ));
    };
    let (Some(node), Some(me)) = (process::node_name(), process::me()) else {
        failed("cannot read the node's name or this process's /proc entry".into());
        return None;
    };
    // The thread opens its own (a context stays in its thread); a node without libnftables
    // has no step table to hold.
    if let Err(e) = Nft::open() {
        failed(e);
        return None;
    }
    let passed = Passed {
        open: Box::new(Nft::open),
        step_exists: Box::new(move |job, step| slurm::step_exists_vouched(job, step, job_id)),
        say: Arc::new(log::error),
        ask: ASK,
    };
    let dir = PathBuf::from(handover::job_dir(&node, job_id));
    start(&dir, me, &format!("job {job_id}'s extern step"), passed)
        .map_err(failed)
        .ok()
}

/// A node's tables, as the holder changes them: libnftables ([`Nft`]) on a node, a stand-in
/// in tests/isolation.rs, which runs this holder as it is.
pub trait Tables {
    /// Runs an nftables script in one transaction: its output, or why it failed.
    fn run(&mut self, script: &str) -> Result<String, String>;
    /// The names of the node's `inet` tables ([`nftables::node_tables`]), or why not.
    fn names(&mut self) -> Result<Vec<String>, String>;
}

impl Tables for Nft {
    fn run(&mut self, script: &str) -> Result<String, String> {
        Nft::run(self, script)
    }
    fn names(&mut self) -> Result<Vec<String>, String> {
        nftables::node_tables()
    }
}

/// What a holder is given from outside: how to open the node's tables (in its own thread),
/// ask slurmctld whether a step exists ([`slurm::step_exists`]), and log a line; and how often
/// it may ask ([`ASK`]).
pub struct Passed<T> {
    pub open: Box<dyn FnOnce() -> Result<T, String> + Send>,
    pub step_exists: Box<dyn Fn(u32, u32) -> Option<bool> + Send>,
    pub say: Arc<dyn Fn(&str) + Send + Sync>,
    pub ask: Duration,
}

/// Starts holder `me` (`who`, for its lines) in directory `dir`: makes the directory root's
/// alone, refuses it when its holder file names another live holder, writes its own, and starts
/// the thread. Why it cannot, else.
pub fn start<T: Tables + 'static>(
    dir: &Path,
    me: Owner,
    who: &str,
    passed: Passed<T>,
) -> Result<Holder, String> {
    run_dir::private(dir).map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    let file = dir.join(HOLDER_FILE);
    let text = fs::read_to_string(&file).ok();
    if holding::whose(text.as_deref(), me, process::stat) == HolderFile::OtherLive {
        // Not forsaken: the directory is the other holder's.
        return Err(format!(
            "{} names another holder that still runs ({})",
            file.display(),
            text.unwrap_or_default().trim()
        ));
    }
    let made = crate::spank::run_dir::write_private(&file, &handover::holder_text(me))
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))
        .and_then(|()| Watch::new(dir));
    let (watch, wake) = match made {
        Ok(pair) => pair,
        Err(e) => {
            forsake(dir);
            return Err(e);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let yielded = Arc::new(AtomicBool::new(false));
    let (flag, gave_way) = (stop.clone(), yielded.clone());
    let (path, who) = (dir.to_path_buf(), who.to_string());
    let said = passed.say.clone();
    let thread = std::thread::Builder::new()
        .name("tfcluster-holder".into())
        .spawn(move || {
            let Passed {
                open,
                step_exists,
                say,
                ask,
            } = passed;
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut tables = open()?;
                hold(
                    &path,
                    me,
                    &flag,
                    &watch,
                    &mut tables,
                    &*step_exists,
                    &*say,
                    ask,
                )
            }));
            // Ended before its stop: it says so, and its directory goes, holder file and the
            // files of the tables it held (they went with its libnftables context), so that no
            // file says a table is held and no step hands it one (they find no holder, and the
            // first says so once per node). A holder that yielded to another leaves the
            // directory to it.
            if !flag.load(Ordering::Relaxed) {
                let yielded = matches!(ended, Ok(Ok(Ended::Yielded)));
                gave_way.store(yielded, Ordering::Relaxed);
                let why = match ended {
                    Ok(Err(e)) => e,
                    Ok(Ok(Ended::Yielded)) => format!(
                        "{} names another holder that runs; it holds here now",
                        path.join(HOLDER_FILE).display()
                    ),
                    Ok(Ok(Ended::Stopped)) => "it ended".to_string(),
                    Err(_) => "it panicked".to_string(),
                };
                if !yielded {
                    forsake(&path);
                }
                say(&format!(
                    "isolate=yes: {who} stopped holding the tables of nodes whose tasks ended \
                     first ({why}); those it held go with it, and later ones stay, not owned: \
                     check the node's nftables as root (nft list tables)"
                ));
            }
            timing::thread_end("holder");
        });
    match thread {
        Ok(thread) => Ok(Holder {
            stop,
            yielded,
            wake,
            thread: Some(thread),
            dir: dir.to_path_buf(),
            say: said,
        }),
        Err(e) => {
            forsake(dir);
            Err(format!("cannot start a thread: {e}"))
        }
    }
}

/// A holder that could not start, or has stopped: its directory goes.
fn forsake(dir: &Path) {
    let _ = fs::remove_dir_all(dir);
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let one: u64 = 1;
        // SAFETY: an 8-byte write of a live u64 to the eventfd this holder owns.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if !self.yielded.load(Ordering::Relaxed) {
            forsake(&self.dir);
        }
    }
}

/// How a holder's loop ended without an error.
enum Ended {
    /// Its stop ([`Holder`]'s drop).
    Stopped,
    /// Its holder file names another live holder ([`Act::Yield`]).
    Yielded,
}

/// The holder's loop: looks at its directory and the node's tables, and carries out what
/// [`Holding`] decides, until stopped, or with why it cannot go on. It sleeps between looks
/// until a file arrives or goes, or its next ask is due.
#[allow(clippy::too_many_arguments)]
fn hold(
    dir: &Path,
    me: Owner,
    stop: &AtomicBool,
    watch: &Watch,
    tables: &mut impl Tables,
    step_exists: &dyn Fn(u32, u32) -> Option<bool>,
    say: &dyn Fn(&str),
    ask: Duration,
) -> Result<Ended, String> {
    let started = Instant::now();
    let mut holding = Holding::new(ask);
    while !stop.load(Ordering::Relaxed) {
        let text = fs::read_to_string(dir.join(HOLDER_FILE)).ok();
        let files: Vec<_> = fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| handover::step_of(e.file_name().to_str()?))
            .collect();
        let listing = tables.names().ok();
        let present: Option<Vec<StepKey>> = listing.as_deref().map(|listing| {
            tables::ended_steps(listing)
                .into_iter()
                .map(|(_, job_id, step_id)| (job_id, step_id))
                .collect()
        });
        let look = Look {
            holder_file: holding::whose(text.as_deref(), me, process::stat),
            files: &files,
            tables: present.as_deref(),
            now: started.elapsed(),
        };
        for act in holding.acts(look) {
            match act {
                Act::Yield => return Ok(Ended::Yielded),
                Act::Reclaim => {
                    let _ = crate::spank::run_dir::write_private(
                        &dir.join(HOLDER_FILE),
                        &handover::holder_text(me),
                    );
                }
                Act::Take(key, from) => {
                    if from == Stage::Held {
                        say(&holding::reinstalled_line(key.0, key.1));
                    }
                    let holds = take(tables, dir, key, from, say);
                    holding.took(key, holds);
                }
                Act::Ask((job_id, step_id)) => {
                    if step_exists(job_id, step_id) == Some(false) {
                        let file = handover::stage_file(job_id, step_id, Stage::Held);
                        let _ = fs::remove_file(dir.join(file));
                    }
                }
                Act::Release((job_id, step_id)) => {
                    let table = tables::ended_table_name(job_id, step_id);
                    let _ = tables.run(&tables::removal(&table));
                }
            }
        }
        watch.wait(holding.sleep());
    }
    Ok(Ended::Stopped)
}

/// Takes the ended table of a step over from its file at stage `from` ([`Act::Take`]): claims
/// a file slurmstepd left first (slurmstepd can no longer withdraw it, and waits for what
/// follows), then replaces the table with its own copy, or installs it where it is gone, and
/// says so by the file's name; on failure removes the file, with a line. Whether it holds the
/// table now.
fn take(
    tables: &mut impl Tables,
    dir: &Path,
    (job_id, step_id): StepKey,
    from: Stage,
    say: &dyn Fn(&str),
) -> bool {
    let at = |stage| dir.join(handover::stage_file(job_id, step_id, stage));
    let taking = at(Stage::Taking);
    let claimed = match from {
        Stage::Left => fs::rename(at(Stage::Left), &taking).map(|()| taking.clone()),
        _ => Ok(at(from)),
    };
    let Ok(file) = claimed else {
        return false; // withdrawn meanwhile
    };
    let scripts = fs::read_to_string(&file)
        .ok()
        .and_then(|ended| handover::take_over(job_id, step_id, &ended));
    let Some([replace, install]) = scripts else {
        let _ = fs::remove_file(&file);
        return false;
    };
    let installed = run_persistent(tables, &replace)
        .or_else(|e| run_persistent(tables, &install).map_err(|_| e));
    match installed {
        Ok(_) if file == at(Stage::Held) || fs::rename(&file, at(Stage::Held)).is_ok() => true,
        // The job's epilog removed the file meanwhile: the table is this holder's alone.
        Ok(_) => {
            let _ = tables.run(&tables::removal(&tables::ended_table_name(job_id, step_id)));
            false
        }
        Err(e) => {
            say(&format!(
                "isolate=yes: this node cannot hold the table of step {job_id}.{step_id} \
                 (nodes whose tasks ended first): {e}; it stays, not owned, until the step \
                 ends: check the node's nftables as root (nft list tables)"
            ));
            let _ = fs::remove_file(&file);
            false
        }
    }
}

/// Runs `script` with its table persistent where libnftables and the kernel can (a killed
/// holder then leaves it to the job's epilog), as slurmstepd's own table, else as it is.
fn run_persistent(tables: &mut impl Tables, script: &str) -> Result<String, String> {
    tables
        .run(&rules::persistent(script))
        .or_else(|_| tables.run(script))
}
