//! The files of a handover: how a step's slurmstepd hands its ended table to the job's holder
//! ([`super::holding`] says why there is one). They meet in a root-only directory per node and
//! job ([`job_dir`]): the holder says it is there ([`HOLDER_FILE`]); slurmstepd leaves the ended
//! table's script in a file named after its job and step, and keeps its own table until the
//! holder has taken the table over ([`take_over`]), so the rules are owned throughout. The
//! file's name says how far the holder is ([`Stage`]): a slurmstepd that waited long enough
//! withdraws a file the holder has not claimed yet, and waits for the outcome of one it has.
//! Without a live holder the table stays not owned, and slurmd's log says so once per node
//! ([`no_holder_line`]).

use super::tables::{ended_table_name, removal};
use crate::core::text::decimal;

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

/// The directory of node `node` below [`HELD_DIR`] ([`crate::core::claims::dir_name`]).
pub fn node_dir(node: &str) -> String {
    format!("{HELD_DIR}/{}", crate::core::claims::dir_name(node))
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
    let owned = format!("{header}{}{body}", super::rules::OWNED);
    Some([format!("{}{owned}", removal(&table)), owned])
}

/// The text of [`HOLDER_FILE`]: `pid=P start=S`, one line.
pub fn holder_text(owner: crate::core::claims::Owner) -> String {
    format!("pid={} start={}\n", owner.pid, owner.start)
}

/// The holder named by the text of [`HOLDER_FILE`]; `None` for text of another shape.
pub fn holder_of(text: &str) -> Option<crate::core::claims::Owner> {
    let (pid, start) = text.trim_end_matches('\n').split_once(' ')?;
    Some(crate::core::claims::Owner {
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
