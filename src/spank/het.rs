//! slurmstepd, for a heterogeneous job's or step's component: ask slurmctld where every
//! component's tasks run ([`crate::core::het`] rebuilds the step from the answers).
//!
//! One request per component, from each node, when the step starts (K requests per node for K
//! components); slurmstepd runs as root, which slurmctld's rate limit exempts.

use super::handle::Spank;
use super::slurm;
use crate::core::het::{self, Answer, HetLayout, Own, StepKind, MAX_COMPONENTS};
use crate::core::Error;

/// Every component's layout, and from them the step's.
pub fn components(sp: &Spank, kind: &StepKind, step_id: u32, own: Own) -> Result<HetLayout, Error> {
    let (answers, step_tasks) = match *kind {
        StepKind::Whole => unreachable!("asked only for a heterogeneous job or step"),
        StepKind::HetJob { size, step_tasks } => {
            // A component the step does not cover (`--het-group`) has no such step: its
            // refusal is one of the answers, and the task counts say whether it mattered.
            let answers = het::job_ids(size, |name| env(sp, name))?
                .into_iter()
                .zip(0..)
                .map(|(job_id, component)| Answer {
                    component,
                    job_id,
                    layout: slurm::step_layout(job_id, step_id, None),
                })
                .collect();
            (answers, step_tasks)
        }
        StepKind::HetStep { step_tasks } => {
            let mut answers: Vec<Answer> = Vec::new();
            let mut found = 0u64;
            for component in 0..MAX_COMPONENTS {
                let layout = slurm::step_layout(own.job_id, step_id, Some(component));
                let refused = layout.is_err();
                found += layout.as_ref().map_or(0, |l| u64::from(l.tasks));
                answers.push(Answer {
                    component,
                    job_id: own.job_id,
                    layout,
                });
                if refused || found >= u64::from(step_tasks) {
                    break;
                }
            }
            (answers, step_tasks)
        }
    };
    HetLayout::new(&answers, step_tasks, own)
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
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let short = name.trim().split('.').next()?;
    (!short.is_empty()).then(|| short.to_string())
}

/// A heterogeneous job's first component's job (its leader): `SLURM_JOB_ID_HET_GROUP_0`.
pub fn leader(sp: &Spank, kind: &StepKind) -> Option<u32> {
    match kind {
        StepKind::HetJob { .. } => het::job_ids(1, |name| env(sp, name)).ok()?.first().copied(),
        _ => None,
    }
}
