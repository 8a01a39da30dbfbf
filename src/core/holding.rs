//! With `isolate=yes`, who keeps the table of a node whose tasks have all ended while the step
//! runs on elsewhere ([`super::isolation::ended_table_name`]).
//!
//! Its peers admit its address until their own tasks end, so the node must keep the rules that
//! keep other users on it away from them. slurmstepd cannot keep them owned: it exits once its
//! tasks have ended, and it cannot wait, since slurmctld keeps the step until that very
//! slurmstepd has ended, and asking every node instead is N² requests. A table no process owns
//! goes with `nft flush ruleset`.
//!
//! So a holder, a process that lives on, takes each ended table over, as its own (one
//! transaction replaces the table slurmstepd left with the same rules, owned), and removes it
//! once slurmctld says its step has ended. The holder is the job's extern step (slurm.conf
//! `PrologFlags=Contain`): a slurmstepd on every node of the job for the job's whole life,
//! which outlives slurmd's restarts, reconfigures and upgrades; its tables go with it when the
//! job ends. slurmd itself holds nothing (0.7.0's holder thread in slurmd lost its tables when
//! `scontrol reconfigure` started a 23.11 or later slurmd anew, the old and the new process
//! both acting on them, and lived in slurmd for as long as slurmd ran): the fewest moving parts
//! in a root daemon that keep the guarantee, where a site sets Contain (as sites with
//! `pam_slurm_adopt` already do).
//!
//! slurmstepd hands its table to the job's extern step. They meet in a root-only directory per
//! job ([`job_dir`]): the holder says it is there ([`HOLDER_FILE`]); slurmstepd leaves the
//! ended table's script in a file named after its job and step, and keeps its own table until
//! the holder has taken the table over, so the rules are owned throughout. The file's name says
//! how far the holder is ([`Stage`]): a slurmstepd that waited long enough withdraws a file the
//! holder has not claimed yet, and waits for the outcome of one it has. Without a live holder
//! the table stays not owned, and slurmd's log says so once per node ([`no_holder_line`]).
//!
//! A holder acts only on a directory whose holder file names it ([`whose`]), and checks at every
//! look that each table a file says it holds is on the node, installing it again where it is
//! not: what it does is decided from each look in one place, [`Holding`].
//!
//! This module names the files, writes the holder's script and decides its acts, from plain
//! values (the transitions are a table in tests/holder.rs, which also runs the shell's holder
//! on the host).

use super::isolation::{ended_table_name, removal};
use super::text::decimal;
use std::time::Duration;

/// How often a holder asks slurmctld whether a held table's step has ended: one request per
/// `ASK` at most, about one table ([`next_to_ask`]), however many it holds. Between, it sleeps
/// until a step leaves a file or the holder is stopped: no wake-up while it holds nothing.
/// docs/admin-guide.md quotes it.
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

/// Where holders and slurmstepds meet: a directory per node below it, with one per job (the
/// extern step's) in it.
pub const HELD_DIR: &str = "/run/tfcluster/held";

/// The file a holder writes in its directory: its pid and start time, as a claim's owner.
pub const HOLDER_FILE: &str = "holder";

/// What the holder adds to a step's file name as it claims it, before it takes the table over.
pub const TAKING_SUFFIX: &str = ".taking";

/// What the holder puts there instead once it owns the table.
pub const HELD_SUFFIX: &str = ".held";

/// How far a step's file in a holder's directory has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Left by slurmstepd (`step_J.S`); slurmstepd may still withdraw it.
    Left,
    /// Claimed by the holder, which is taking the table over ([`TAKING_SUFFIX`]).
    Taking,
    /// The holder owns the table ([`HELD_SUFFIX`]).
    Held,
}

/// The file, in a node's directory, that says the node has told its log once that no holder
/// took a step's ended table ([`no_holder_line`]).
pub const TOLD_FILE: &str = ".told-no-holder";

/// The name of a 0.7.0 slurmd's holder directory in a node's ([`legacy_slurmd_dir`]): not a
/// job id.
pub const LEGACY_SLURMD_HOLDER: &str = "slurmd";

/// The directory of node `node` below [`HELD_DIR`] ([`super::claims::dir_name`]).
pub fn node_dir(node: &str) -> String {
    format!("{HELD_DIR}/{}", super::claims::dir_name(node))
}

/// The directory of node `node`'s holder for job `job_id` (its extern step's), in [`node_dir`].
pub fn job_dir(node: &str, job_id: u32) -> String {
    format!("{}/{job_id}", node_dir(node))
}

/// The directory where a 0.7.0 slurmd not restarted since the upgrade holds tables, in
/// [`node_dir`]: the job epilog removes the job's files there, and that slurmd then lets their
/// tables go.
pub fn legacy_slurmd_dir(node: &str) -> String {
    format!("{}/{LEGACY_SLURMD_HOLDER}", node_dir(node))
}

/// The name of the file slurmstepd leaves for step `step_id` of job `job_id`.
pub fn step_file(job_id: u32, step_id: u32) -> String {
    format!("step_{job_id}.{step_id}")
}

/// The name of the file of step `step_id` of job `job_id` at `stage`.
pub fn stage_file(job_id: u32, step_id: u32, stage: Stage) -> String {
    let suffix = match stage {
        Stage::Left => "",
        Stage::Taking => TAKING_SUFFIX,
        Stage::Held => HELD_SUFFIX,
    };
    format!("{}{suffix}", step_file(job_id, step_id))
}

/// The job and step of a file name in a holder's directory, and how far it has come; `None`
/// for any other name.
pub fn step_of(name: &str) -> Option<(u32, u32, Stage)> {
    let rest = name.strip_prefix("step_")?;
    let (step, stage) = if let Some(step) = rest.strip_suffix(HELD_SUFFIX) {
        (step, Stage::Held)
    } else if let Some(step) = rest.strip_suffix(TAKING_SUFFIX) {
        (step, Stage::Taking)
    } else {
        (rest, Stage::Left)
    };
    let (job, step) = step.split_once('.')?;
    Some((decimal(job)?, decimal(step)?, stage))
}

/// The scripts that make the ended table of step `step_id` of job `job_id` the holder's, the
/// first that nftables takes: `[0]` removes the table slurmstepd installed and installs `ended`
/// (its script) again, owned, in one transaction, so the rules never lapse; `[1]` only installs
/// it, owned, for a table that is gone meanwhile (nftables has no "delete if there" before
/// 1.0.8, and an "add table" first would change a persistent table's flags, which the kernel
/// refuses). `None` when `ended` is not that table's script.
pub fn take_over(job_id: u32, step_id: u32, ended: &str) -> Option<[String; 2]> {
    let table = ended_table_name(job_id, step_id);
    let header = format!("table inet {table} {{\n");
    let body = ended.strip_prefix(&header)?;
    let owned = format!("{header}{}{body}", super::isolation::OWNED);
    Some([format!("{}{owned}", removal(&table)), owned])
}

/// The text of [`HOLDER_FILE`]: `pid=P start=S`, one line.
pub fn holder_text(owner: super::claims::Owner) -> String {
    format!("pid={} start={}\n", owner.pid, owner.start)
}

/// The holder named by the text of [`HOLDER_FILE`]; `None` for text of another shape.
pub fn holder_of(text: &str) -> Option<super::claims::Owner> {
    let (pid, start) = text.trim_end_matches('\n').split_once(' ')?;
    Some(super::claims::Owner {
        pid: decimal(pid.strip_prefix("pid=")?)?,
        start: decimal(start.strip_prefix("start=")?)?,
    })
}

/// What slurmstepd says in slurmd's log, once per node ([`TOLD_FILE`]), when no holder takes
/// its ended table: job `job_id` has no extern step there (no `PrologFlags=Contain`), or its
/// holder could not start or has stopped, and said why.
pub fn no_holder_line(job_id: u32, step_id: u32) -> String {
    format!(
        "isolate=yes: nothing on this node holds the table ({}) that keeps other users here \
         from step {job_id}.{step_id}'s other nodes now that its tasks here have ended: job \
         {job_id} has no extern step here that holds tables; owned by no process, the table \
         goes with a `nft flush ruleset` (nftables.service restarting), and those nodes are \
         then open to other users here until the step ends: set PrologFlags=Contain in \
         slurm.conf (where the extern step could not hold it, its own error line says why; said \
         once per node until it reboots)",
        ended_table_name(job_id, step_id)
    )
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
/// `stat` gives `/proc/PID/stat` ([`super::claims::Owner::is_live`]).
pub fn whose(
    text: Option<&str>,
    me: super::claims::Owner,
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
    /// The step files in the directory ([`step_of`] of each name).
    pub files: &'a [(u32, u32, Stage)],
    /// The steps whose ended table is on the node (`list tables`: [`super::isolation::ended_steps`]);
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
    /// (renamed to [`Stage::Taking`]) and take the table over ([`take_over`]); from
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
/// once its file is gone. The shell ([`crate::spank::holder`]) carries the acts out.
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
