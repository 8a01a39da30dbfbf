//! slurmstepd, for a heterogeneous job's or step's component: ask slurmctld where every
//! component's tasks run ([`crate::core::het`] rebuilds the step from the answers).
//!
//! One request per component, from each node, when the step starts (K requests per node for K
//! components); slurmstepd runs as root, which slurmctld's rate limit exempts.

use super::handle::Spank;
use super::slurm;
use crate::core::het::{self, HetLayout, Own, StepKind};
use crate::core::Error;

/// The step's ranks for a heterogeneous job or step ([`het::probe`]), asking slurmctld for each
/// component's layout of step `step_id`, with the machine's host name as `own`'s; `None` for a
/// whole step.
pub fn components(
    sp: &Spank,
    kind: &StepKind,
    step_id: u32,
    own: Own,
) -> Result<Option<HetLayout>, Error> {
    // A whole step asks nothing, and needs no host name either.
    let hostname = (*kind != StepKind::Whole).then(hostname).flatten();
    let own = Own {
        hostname: hostname.as_deref(),
        ..own
    };
    het::probe(kind, own, |name| env(sp, name), &mut |job_id, component| {
        slurm::step_layout(job_id, step_id, component)
    })
}

/// The jobs whose step ends when a node stops it: every component's for a heterogeneous job
/// (each is a job of its own, and a stop of one reaches no other), else the node's own job
/// (a heterogeneous step's stop reaches all its components).
pub fn jobs_to_stop(sp: &Spank, kind: Option<&StepKind>, own_job: u32) -> Vec<u32> {
    match kind {
        Some(StepKind::HetJob { size, .. }) => {
            het::job_ids(*size, |name| env(sp, name)).unwrap_or_else(|_| vec![own_job])
        }
        _ => vec![own_job],
    }
}

fn env(sp: &Spank, name: &str) -> Option<String> {
    sp.getenv(name).ok().flatten()
}

/// The machine's short host name, which is the node's name wherever slurmd found its node by
/// its host name (the usual case): it tells apart components of equal shape ([`Own`]).
pub fn hostname() -> Option<String> {
    let name = super::process::host_name()?;
    let short = name.split('.').next()?;
    (!short.is_empty()).then(|| short.to_string())
}

/// A heterogeneous job's first component's job (its leader): `SLURM_JOB_ID_HET_GROUP_0`.
pub fn leader(sp: &Spank, kind: &StepKind) -> Option<u32> {
    match kind {
        StepKind::HetJob { .. } => het::job_ids(1, |name| env(sp, name)).ok()?.first().copied(),
        _ => None,
    }
}
