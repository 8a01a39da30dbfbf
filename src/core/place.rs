//! This node's place in the step's plan: which of the plan's nodes it is, the plan's slot of
//! each of its tasks, what turns Slurm's task ids into the step's ranks, and which GPUs its
//! tasks may be given. For a whole step these are Slurm's own, checked against the plan; for a
//! component of a heterogeneous job or step they come from the rebuilt step ([`HetLayout`]),
//! where Slurm's ids count only the node's own component.

use super::error::{Error, Result};
use super::het::HetLayout;
use super::layout::Layout;

/// What Slurm says of this node before its tasks fork.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeFacts<'a> {
    /// `S_JOB_NODEID`: the node's index in its step (its component's, in a heterogeneous one).
    pub node: usize,
    /// `S_JOB_LOCAL_TO_GLOBAL_ID` of each local task.
    pub gtids: &'a [u32],
    /// `CUDA_VISIBLE_DEVICES` in slurmstepd: the node's GPUs for the step.
    pub step_gpus: Option<&'a str>,
    /// `SLURM_STEP_GPUS` is set: Slurm gave the step GPUs on this node.
    pub slurm_gave_gpus: bool,
}

/// The GPUs this node's tasks are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeGpus {
    /// The node's `CUDA_VISIBLE_DEVICES`, shared among its tasks as the settings say (`None`:
    /// the node has none listed, and its tasks' variable is left alone).
    Step(Option<String>),
    /// A heterogeneous component's node where Slurm gave the step no GPU: Slurm neither sets
    /// nor clears `CUDA_VISIBLE_DEVICES` on a node without GPU GRES, so a list there was
    /// inherited from srun's environment (a GPU login or batch node) and is not the step's.
    /// Its tasks get the variable empty: no GPU.
    Hidden,
}

/// This node's place in the step ([`crate::core::StepPlan::place`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The node's index in the plan's hosts.
    pub node: usize,
    /// Each local task's slot in the plan's node: its local id, except on a node that
    /// components of a heterogeneous step share.
    pub slots: Vec<usize>,
    /// What to add to Slurm's task ids on this node for the step's ranks: the tasks of the
    /// heterogeneous components before this node's (0 otherwise).
    pub rank_offset: u32,
    pub gpus: NodeGpus,
}

impl Place {
    /// This node's place in `layout` (over `hosts`): from `het` when the step is a
    /// heterogeneous one (whose own tasks were checked as it was rebuilt), else Slurm's node
    /// index and task ids, which must be the plan's: a difference means the plan is wrong for
    /// this step, and no TF_CONFIG may be handed out.
    pub fn new(
        layout: &Layout,
        hosts: &[String],
        het: Option<&HetLayout>,
        facts: &NodeFacts,
    ) -> Result<Place> {
        let step_gpus = NodeGpus::Step(facts.step_gpus.map(str::to_string));
        match het {
            Some(het) => Ok(Place {
                node: het.own_node(),
                slots: het.slots(layout, facts.gtids),
                rank_offset: het.own_offset,
                gpus: match facts.slurm_gave_gpus {
                    true => step_gpus,
                    false => NodeGpus::Hidden,
                },
            }),
            None => {
                check_node(layout, hosts, facts.node, facts.gtids)?;
                Ok(Place {
                    node: facts.node,
                    slots: (0..facts.gtids.len()).collect(),
                    rank_offset: 0,
                    gpus: step_gpus,
                })
            }
        }
    }

    /// The step's rank of this node's task with Slurm's task id `slurm_gtid`.
    pub fn rank(&self, slurm_gtid: u32) -> u32 {
        self.rank_offset + slurm_gtid
    }

    /// The node's GPUs for the step, where its tasks share them.
    pub fn step_gpus(&self) -> Option<&str> {
        match &self.gpus {
            NodeGpus::Step(gpus) => gpus.as_deref(),
            NodeGpus::Hidden => None,
        }
    }
}

/// `node`'s ranks in `layout` are the global ids Slurm really put there.
fn check_node(layout: &Layout, hosts: &[String], node: usize, slurm_gtids: &[u32]) -> Result<()> {
    let ours = layout.node(node).ok_or(Error::NodeOutOfRange {
        node,
        nodes: hosts.len(),
    })?;
    if ours != slurm_gtids {
        return Err(Error::LayoutMismatch {
            node,
            host: hosts.get(node).cloned().unwrap_or_default(),
            expected: join(ours),
            actual: join(slurm_gtids),
        });
    }
    Ok(())
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}
