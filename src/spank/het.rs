//! slurmstepd, for a heterogeneous job's or step's component: ask slurmctld where every
//! component's tasks run ([`crate::core::het`] rebuilds the step from the answers).
//!
//! One request per component, from each node, when the step starts (K requests per node for K
//! components); slurmstepd runs as root, which slurmctld's rate limit exempts.

use super::slurm;
use super::step::Shape;
use crate::core::het::{self, HetLayout, Own, StepKind};
use crate::core::Error;

/// The step's ranks for a heterogeneous job or step ([`het::probe`]), asking slurmctld for each
/// component's layout of step `step_id` (a heterogeneous job's: `shape.het_jobs`, which
/// slurmctld vouched for), with the node's short name as `own`'s ([`short_name`]); `None` for a
/// whole step.
pub fn components(shape: &Shape, own: Own) -> Result<Option<HetLayout>, Error> {
    // A whole step asks nothing, and needs no host name either.
    let hostname = (shape.kind != StepKind::Whole)
        .then(|| short_name(shape.node.as_deref()?))
        .flatten();
    let own = Own {
        hostname: hostname.as_deref(),
        ..own
    };
    let (step_id, jobs) = (shape.step_id, shape.het_jobs.clone()?);
    het::probe(&shape.kind, own, &jobs, &mut |job_id, component| {
        slurm::step_layout(job_id, step_id, component)
    })
}

/// The jobs whose step ends when a node stops it: every component's for a heterogeneous job
/// (each is a job of its own, and a stop of one reaches no other), as slurmctld vouched for
/// them; else, or when the step's shape is unknown, the node's own job (a heterogeneous step's
/// stop reaches all its components). Never a job the environment alone names.
pub fn jobs_to_stop(shape: Option<&Shape>, own_job: u32) -> Vec<u32> {
    match shape.map(|shape| &shape.het_jobs) {
        Some(Ok(jobs)) if !jobs.is_empty() => jobs.clone(),
        _ => vec![own_job],
    }
}

/// The short form of the node's name ([`Shape::node`]: its NodeName, else the machine's host
/// name): it tells apart components of equal shape ([`Own`]).
fn short_name(name: &str) -> Option<String> {
    let short = name.split('.').next()?;
    (!short.is_empty()).then(|| short.to_string())
}

/// A heterogeneous job's first component's job (its leader), as slurmctld vouched for it. A
/// step whose components were refused stops its own job alone: as a leader's is stopped where
/// slurmctld's record says it is one (on 25.11 a plain stop of a leader's step cancels every
/// component's whole job: build.rs), else as any job's.
pub fn leader(shape: Option<&Shape>) -> Option<u32> {
    let shape = shape?;
    match &shape.het_jobs {
        Ok(jobs) => jobs.first().copied(),
        Err(_) => slurm::job_record(shape.job_id)
            .ok()
            .flatten()
            .filter(|record| record.het_job_id == shape.job_id)
            .map(|_| shape.job_id),
    }
}
