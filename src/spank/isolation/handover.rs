//! slurmstepd's side of handing a table over to the job's holder ([`super::holder`],
//! [`crate::core::isolation::holding`] says why), and the job epilog's: the holder's files the
//! job leaves. As root, through files in a root-only directory of the node.

use crate::core::isolation::handover::{self, Stage, HOLDER_FILE};
use crate::core::isolation::tables;
use crate::spank::log;
use crate::spank::process;
use crate::spank::run_dir;
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long slurmstepd waits for a holder to take its ended table over.
pub const HANDOVER: Duration = Duration::from_secs(2);

/// What became of a step's ended table at its handover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handed {
    /// A holder owns it.
    Held,
    /// No live holder: the job has no extern step on this node (no `PrologFlags=Contain`), or
    /// its holder failed, and said so. The table stays, owned by no process.
    NoHolder,
    /// The holder did not take it in time, or could not (and said so). It stays, owned by no
    /// process.
    NotTaken,
}

/// slurmstepd, its tasks all ended, its ended table installed (`ended`: its script): hand the
/// table over to the job's extern step where it holds tables, and wait for it to take it
/// ([`HANDOVER`] at most, twice that when the holder has claimed it by then). The caller keeps
/// its own table until this returns. `node`: the node's name as slurmstepd has it (no name, no
/// holder directory).
pub fn hand_over(node: Option<&str>, (job_id, step_id): (u32, u32), ended: &str) -> Handed {
    let Some(node) = node else {
        return Handed::NoHolder;
    };
    let dir = handover::job_dir(node, job_id);
    hand_over_in(Path::new(&dir), (job_id, step_id), ended, HANDOVER)
}

/// [`hand_over`] to the holder of directory `dir`, waiting `limit` where it waits
/// [`HANDOVER`] (tests/isolation.rs plays the holder's side in a directory of its own, in
/// shorter times).
pub fn hand_over_in(
    dir: &Path,
    (job_id, step_id): (u32, u32),
    ended: &str,
    limit: Duration,
) -> Handed {
    let live = fs::read_to_string(dir.join(HOLDER_FILE))
        .ok()
        .and_then(|text| handover::holder_of(&text))
        .is_some_and(|owner| owner.is_live(process::stat));
    if !live {
        return Handed::NoHolder;
    }
    let at = |stage| dir.join(handover::stage_file(job_id, step_id, stage));
    let left = at(Stage::Left);
    let tmp = dir.join(format!(".{}", handover::step_file(job_id, step_id)));
    if crate::spank::run_dir::write_private(&tmp, ended)
        .and_then(|()| fs::rename(&tmp, &left))
        .is_err()
    {
        return Handed::NotTaken;
    }
    let (taking, held) = (at(Stage::Taking), at(Stage::Held));
    // The holder is done, either way, once the file has left the names it is not done at.
    let done = || !left.exists() && !taking.exists();
    let outcome = || match held.exists() {
        true => Handed::Held,
        false => Handed::NotTaken,
    };
    if waited(done, limit) {
        return outcome();
    }
    // Not claimed: withdrawn, and no take-over follows.
    if fs::remove_file(&left).is_ok() {
        return Handed::NotTaken;
    }
    match waited(done, limit) {
        true => outcome(),
        false => Handed::NotTaken,
    }
}

/// slurmstepd whose ended table no holder took (no extern step): says so
/// in slurmd's log, once per node until it reboots (a marker in [`handover::node_dir`], on the
/// node's /run): the site learns what it leaves open, without a line at every step.
pub fn say_no_holder_once(node: Option<&str>, (job_id, step_id): (u32, u32)) {
    let Some(node) = node else {
        return;
    };
    let dir = PathBuf::from(handover::node_dir(node));
    let first = run_dir::private(&dir)
        .map_err(std::io::Error::other)
        .and_then(|()| {
            // Root's alone, as every file under /run/tfcluster (the check names one that is not).
            fs::File::options()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dir.join(handover::TOLD_FILE))
        })
        .is_ok();
    if first {
        log::info(&handover::no_holder_line(job_id, step_id));
    }
}

/// Whether `done` held within `limit`, asked every 5 ms.
fn waited(done: impl Fn() -> bool, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// slurmd's job epilog: the job's holder directory, left when the extern slurmstepd was killed
/// (it removes its own as it exits); and the job's files in the directory of a 0.7.0 slurmd's
/// holder, should such a slurmd still run (one not restarted since the upgrade): the tables it
/// held for the job, which it lets go once their files are gone (the caller waits for that:
/// only their owner can remove them).
pub fn forget(job_id: u32) -> Vec<String> {
    let Some(node) = process::node_name() else {
        return Vec::new();
    };
    let _ = fs::remove_dir_all(handover::job_dir(&node, job_id));
    let dir = PathBuf::from(handover::legacy_slurmd_dir(&node));
    let mut held = Vec::new();
    for name in fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
    {
        if let Some((job, step_id, stage)) = handover::step_of(&name) {
            if job == job_id && fs::remove_file(dir.join(&name)).is_ok() && stage != Stage::Left {
                held.push(tables::ended_table_name(job_id, step_id));
            }
        }
    }
    held
}
