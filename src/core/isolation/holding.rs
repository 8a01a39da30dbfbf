//! With `isolate=yes`, who keeps the table of a node whose tasks have all ended while the step
//! runs on elsewhere ([`super::tables::ended_table_name`]), and what it does at each look.
//!
//! Its peers admit its address until their own tasks end, so the node must keep the rules that
//! keep other users on it away from them. slurmstepd cannot keep them owned: it exits once its
//! tasks have ended, and it cannot wait, since slurmctld keeps the step until that very
//! slurmstepd has ended, and asking every node instead is N² requests. A table no process owns
//! goes with `nft flush ruleset`.
//!
//! So a holder, a process that lives on, takes each ended table over, as its own (one
//! transaction replaces the table slurmstepd left with the same rules, owned:
//! [`super::handover`]), and removes it once slurmctld says its step has ended. The holder is
//! the job's extern step (slurm.conf `PrologFlags=Contain`): a slurmstepd on every node of the
//! job for the job's whole life, which outlives slurmd's restarts, reconfigures and upgrades;
//! its tables go with it when the job ends. slurmd itself holds nothing (0.7.0's holder thread
//! in slurmd lost its tables when `scontrol reconfigure` started a 23.11 or later slurmd anew,
//! the old and the new process both acting on them, and lived in slurmd for as long as slurmd
//! ran): the fewest moving parts in a root daemon that keep the guarantee, where a site sets
//! Contain (as sites with `pam_slurm_adopt` already do).
//!
//! A holder acts only on a directory whose holder file names it ([`whose`]), and checks at every
//! look that each table a file says it holds is on the node, installing it again where it is
//! not: what it does is decided from each look in one place, [`Holding`] (the transitions are a
//! table in tests/holder.rs, which also runs the shell's holder on the host).

use super::handover::{holder_of, Stage};
use super::tables::ended_table_name;
use std::time::Duration;

/// How often a holder asks slurmctld whether a held table's step has ended: one request per
/// `ASK` at most, about one table ([`next_to_ask`]), however many it holds. Between, it sleeps
/// until a step leaves a file or the holder is stopped: no wake-up while it holds nothing.
/// docs/isolation.md quotes it.
pub const ASK: Duration = Duration::from_secs(1);

/// Which held table's step the holder asks slurmctld about next, from each table's time since
/// it was last asked about (`None`: never): the one never asked first, else the one asked
/// longest ago; ties by job and step. One request per [`ASK`] per node at most, whatever the
/// number of tables: a job of many steps that end first on its nodes would otherwise ask once a
/// second per table and node, as root, whom slurmctld's rate limit exempts. A table whose step
/// has ended is then let go within [`ASK`] times the number held. `None` when it holds none.
pub fn next_to_ask(held: &[((u32, u32), Option<Duration>)]) -> Option<(u32, u32)> {
    held.iter()
        .min_by(|(a, since_a), (b, since_b)| match (since_a, since_b) {
            (None, None) => a.cmp(b),
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.cmp(x).then(a.cmp(b)),
        })
        .map(|(key, _)| *key)
}

/// Whether a held table's step still exists, as slurmctld vouches for it: its answer about the
/// step (`step`: `Some(false)`, it has no such step), and, only where it has none, its answer
/// about the holder's own job (`own_job`: whether it has that job's record). The holder runs in
/// that job's extern step, so the job runs as long as the holder does: a slurmctld that denies
/// the job too (one started from a state without it, or answering before it has read its
/// state, as a 25.05 slurmctld restarted after hanging in a reconfigure may) vouches for
/// nothing, and the table stays, `None`, as when slurmctld does not answer.
pub fn step_exists_vouched(
    step: Option<bool>,
    own_job: impl FnOnce() -> Option<bool>,
) -> Option<bool> {
    match step {
        Some(false) => match own_job() {
            Some(true) => Some(false),
            Some(false) | None => None,
        },
        answer => answer,
    }
}

/// What a holder says, in slurmd's log, when Slurm unloads the plugin before its exit hook ran
/// (Slurm skips it when an earlier `required` plugin's fails): it stops there.
pub const UNLOADED_LINE: &str = "isolate=yes: the plugin was unloaded before its exit hook ran \
     (an earlier plugin's failed): the extern step's holder stops there, and the tables it held \
     go with it";

/// What a holder says when a table one of its files says it holds is not on the node, as it
/// installs it again ([`Act::Take`] from [`Stage::Held`]).
pub fn reinstalled_line(job_id: u32, step_id: u32) -> String {
    format!(
        "isolate=yes: the table {} that this node holds was gone; it is installed again (check \
         what removes tables here: nft list tables)",
        ended_table_name(job_id, step_id)
    )
}

/// A step, by job and step id.
pub type StepKey = (u32, u32);

/// Whose the holder file of a holder's directory is, as the holder reads it at each look
/// ([`whose`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderFile {
    /// It names this holder.
    Mine,
    /// It names another process that runs: that one holds here, this one must not act.
    OtherLive,
    /// Missing, unreadable, of another shape, or naming a process gone.
    NoneLive,
}

/// Whose the holder file's text `text` (`None`: missing or unreadable) is, for holder `me`;
/// `stat` gives `/proc/PID/stat` ([`crate::core::claims::Owner::is_live`]).
pub fn whose(
    text: Option<&str>,
    me: crate::core::claims::Owner,
    stat: impl FnOnce(u32) -> Option<String>,
) -> HolderFile {
    match text.and_then(holder_of) {
        Some(owner) if owner == me => HolderFile::Mine,
        Some(owner) if owner.is_live(stat) => HolderFile::OtherLive,
        _ => HolderFile::NoneLive,
    }
}

/// What a holder sees at one look: its holder file, the step files in its directory and the
/// node's ended tables.
#[derive(Debug, Clone, Copy)]
pub struct Look<'a> {
    pub holder_file: HolderFile,
    /// The step files in the directory ([`super::handover::step_of`] of each name).
    pub files: &'a [(u32, u32, Stage)],
    /// The steps whose ended table is on the node ([`super::tables::ended_steps`] of the kernel's list);
    /// `None` when the node could not list them (nothing is then installed again).
    pub tables: Option<&'a [StepKey]>,
    /// Time since the holder started.
    pub now: Duration,
}

/// What a holder does after a look, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Another live holder's directory: act on nothing, stop (the tables this one held go with
    /// it; the files still say held, and the other installs them again).
    Yield,
    /// Write the holder file again, naming this holder (it was missing, or named a process
    /// gone): steps then find a live holder.
    Reclaim,
    /// Make the table of this step's file this holder's: from [`Stage::Left`], claim the file
    /// (renamed to [`Stage::Taking`]) and take the table over ([`super::handover::take_over`]); from
    /// [`Stage::Taking`] (a claim its holder did not finish) or [`Stage::Held`] (a table a file
    /// says is held that is not on the node), install it again from the file. Then the file
    /// says [`Stage::Held`], or is removed when it cannot be; the shell reports which
    /// ([`Holding::took`]).
    Take(StepKey, Stage),
    /// Ask slurmctld whether this held table's step has ended: if it has, remove its file (the
    /// next look then releases it).
    Ask(StepKey),
    /// Remove this table: this holder held it, and no file names it any more (its step ended,
    /// or the job's epilog removed the file).
    Release(StepKey),
}

/// The holder's lifecycle of the tables it holds, decided from each [`Look`]: a table is taken
/// when slurmstepd leaves its file, checked at every look and installed again when missing,
/// asked about one at a time ([`next_to_ask`], at most one request per `ask`), and released
/// once its file is gone. The shell ([`crate::spank::isolation::holder`]) carries the acts out.
#[derive(Debug, Clone)]
pub struct Holding {
    ask: Duration,
    held: std::collections::BTreeSet<StepKey>,
    asked: std::collections::BTreeMap<StepKey, Duration>,
    last_ask: Option<Duration>,
}

impl Holding {
    /// A holder that holds nothing yet and asks slurmctld once per `ask` at most ([`ASK`]).
    pub fn new(ask: Duration) -> Holding {
        Holding {
            ask,
            held: Default::default(),
            asked: Default::default(),
            last_ask: None,
        }
    }

    /// What to do after `look`.
    pub fn acts(&mut self, look: Look) -> Vec<Act> {
        let mut acts = Vec::new();
        match look.holder_file {
            HolderFile::OtherLive => return vec![Act::Yield],
            HolderFile::NoneLive => acts.push(Act::Reclaim),
            HolderFile::Mine => {}
        }
        let mut named = std::collections::BTreeSet::new();
        for &(job_id, step_id, stage) in look.files {
            let key = (job_id, step_id);
            named.insert(key);
            let missing = look.tables.is_some_and(|tables| !tables.contains(&key));
            match stage {
                Stage::Left | Stage::Taking => acts.push(Act::Take(key, stage)),
                Stage::Held if missing => acts.push(Act::Take(key, stage)),
                Stage::Held => {
                    self.held.insert(key);
                }
            }
        }
        for key in self.held.iter().filter(|key| !named.contains(key)) {
            acts.push(Act::Release(*key));
        }
        self.held.retain(|key| named.contains(key));
        self.asked.retain(|key, _| self.held.contains(key));
        if self
            .last_ask
            .is_none_or(|at| look.now.saturating_sub(at) >= self.ask)
        {
            let ages: Vec<_> = self
                .held
                .iter()
                .map(|key| (*key, self.asked.get(key).map(|at| look.now - *at)))
                .collect();
            if let Some(key) = next_to_ask(&ages) {
                self.asked.insert(key, look.now);
                self.last_ask = Some(look.now);
                acts.push(Act::Ask(key));
            }
        }
        acts
    }

    /// The shell's report on an [`Act::Take`]: whether this holder now holds the table (its
    /// file says [`Stage::Held`]).
    pub fn took(&mut self, key: StepKey, holds: bool) {
        match holds {
            true => self.held.insert(key),
            false => self.held.remove(&key),
        };
    }

    /// How long the holder may sleep before its next look when no file arrives: until its next
    /// ask while it holds a table, else until a file arrives.
    pub fn sleep(&self) -> Option<Duration> {
        (!self.held.is_empty()).then_some(self.ask)
    }
}
