//! PyTorch's multi-node start (`torch=yes`). `torch.distributed.init_process_group()` with no
//! arguments reads the `env://` variables (`MASTER_ADDR`, `MASTER_PORT`, `RANK`,
//! `WORLD_SIZE`), and torchrun reads its own flags from `PET_*` variables. What sites write
//! by hand, and the Slurm helpers of the frameworks, take the first host of the node list as
//! rank 0's (wrong under `-m arbitrary`, in heterogeneous steps and in 26.05's topology order)
//! and one port per job from the job id (two steps of a job collide). tfcluster knows where
//! rank 0 runs and the step's own ports, so every task gets:
//! - `MASTER_ADDR`, `MASTER_PORT`: rank 0's TF_CONFIG endpoint (its node's `address=`, its
//!   port of the step's own block: claimed on its node and, with `isolate=yes`, reachable
//!   only by the job's owner), where torch's rendezvous store listens;
//! - `RANK`, `WORLD_SIZE`: the task's rank and the step's task count;
//! - `LOCAL_RANK`, `LOCAL_WORLD_SIZE`: its index among its node's tasks and their count;
//! - `GROUP_RANK`, `NODE_RANK`: its node's rank, nodes numbered by their lowest task rank, so
//!   rank 0's node is node 0.
//!
//! A step of one task per node may run torchrun: each task then also gets `PET_NNODES`,
//! `PET_NODE_RANK`, `PET_MASTER_ADDR` and `PET_MASTER_PORT`, so that `torchrun
//! --nproc-per-node=N script.py` needs no other flag (its static rendezvous: node rank 0's
//! agent serves the store at the master's port, the workers' too).
//!
//! Only workers: PyTorch has no chief, parameter server or evaluator, and a step that names one
//! is refused before launch ([`check`]).

use super::address::Endpoints;
use super::error::{Error, Result};
use super::layout::Layout;
use super::spec::{Role, RoleTable};
use super::text;
use std::borrow::Cow;

/// rank 0's address, where torch's store listens.
pub const MASTER_ADDR: &str = "MASTER_ADDR";
/// rank 0's port of the step.
pub const MASTER_PORT: &str = "MASTER_PORT";
/// The task's rank.
pub const RANK: &str = "RANK";
/// The step's task count.
pub const WORLD_SIZE: &str = "WORLD_SIZE";
/// The task's index among its node's tasks (`SLURM_LOCALID`).
pub const LOCAL_RANK: &str = "LOCAL_RANK";
/// The task count of its node.
pub const LOCAL_WORLD_SIZE: &str = "LOCAL_WORLD_SIZE";
/// Its node's rank, as torchrun names it for its workers.
pub const GROUP_RANK: &str = "GROUP_RANK";
/// Its node's rank, as Lightning and most scripts name it.
pub const NODE_RANK: &str = "NODE_RANK";
/// torchrun's `--nnodes`.
pub const PET_NNODES: &str = "PET_NNODES";
/// torchrun's `--node-rank`.
pub const PET_NODE_RANK: &str = "PET_NODE_RANK";
/// torchrun's `--master-addr`.
pub const PET_MASTER_ADDR: &str = "PET_MASTER_ADDR";
/// torchrun's `--master-port`.
pub const PET_MASTER_PORT: &str = "PET_MASTER_PORT";

/// The step-wide values, each NUL-terminated and lent to every task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchStep {
    address: String,
    port: String,
    world_size: String,
    /// Each node's rank, by node index.
    node_ranks: Vec<u32>,
    /// With one task on every node (torchrun's shape): the node count.
    nnodes: Option<String>,
}

impl TorchStep {
    /// The values of a step with `torch=yes` (`on`); `None` when off. A spec with a role other
    /// than `worker` is refused ([`check`]).
    pub fn new(
        on: bool,
        roles: &RoleTable,
        layout: &Layout,
        endpoints: &Endpoints,
    ) -> Result<Option<TorchStep>> {
        if !on {
            return Ok(None);
        }
        check(roles)?;
        let first = layout.ranks.first().map_or((0, 0), |p| (p.node, p.slot));
        let address = endpoints.address(first.0 as usize).to_string() + "\0";
        let port = endpoints.port(first.1 as usize).to_string() + "\0";
        let nnodes = layout
            .nodes()
            .all(|ranks| ranks.len() == 1)
            .then(|| text::decimal_nul(layout.nodes().len() as u32));
        Ok(Some(TorchStep {
            address,
            port,
            world_size: text::decimal_nul(layout.tasks()),
            node_ranks: node_ranks(layout),
            nnodes,
        }))
    }

    /// Adds the variables of the task of `rank`, local index `slot` on node `node` of
    /// `local_tasks` tasks, to `set`.
    pub fn add<'r>(
        &'r self,
        set: &mut Vec<(&'static str, Cow<'r, str>)>,
        rank: u32,
        node: usize,
        slot: usize,
        local_tasks: usize,
    ) {
        let node_rank = self.node_ranks.get(node).copied().unwrap_or(0);
        set.push((MASTER_ADDR, Cow::Borrowed(&self.address)));
        set.push((MASTER_PORT, Cow::Borrowed(&self.port)));
        set.push((RANK, Cow::Owned(text::decimal_nul(rank))));
        set.push((WORLD_SIZE, Cow::Borrowed(&self.world_size)));
        set.push((LOCAL_RANK, Cow::Owned(text::decimal_nul(slot as u32))));
        set.push((
            LOCAL_WORLD_SIZE,
            Cow::Owned(text::decimal_nul(local_tasks as u32)),
        ));
        let node_rank = text::decimal_nul(node_rank);
        set.push((GROUP_RANK, Cow::Owned(node_rank.clone())));
        set.push((NODE_RANK, Cow::Owned(node_rank.clone())));
        if let Some(nnodes) = &self.nnodes {
            set.push((PET_NNODES, Cow::Borrowed(nnodes)));
            set.push((PET_NODE_RANK, Cow::Owned(node_rank)));
            set.push((PET_MASTER_ADDR, Cow::Borrowed(&self.address)));
            set.push((PET_MASTER_PORT, Cow::Borrowed(&self.port)));
        }
    }
}

/// Each node's rank, by node index: nodes numbered in the order of their lowest task rank.
fn node_ranks(layout: &Layout) -> Vec<u32> {
    let mut ranks = vec![u32::MAX; layout.nodes().len()];
    let mut next = 0;
    for place in &layout.ranks {
        let rank = &mut ranks[place.node as usize];
        if *rank == u32::MAX {
            *rank = next;
            next += 1;
        }
    }
    ranks
}

/// A spec of workers alone, which `torch=yes` needs (srun checks it before launch too).
pub fn check(roles: &RoleTable) -> Result<()> {
    let others: Vec<String> = roles
        .slices
        .iter()
        .filter(|s| s.role != Role::Worker)
        .map(|s| s.role.to_string())
        .collect();
    match others.is_empty() {
        true => Ok(()),
        false => Err(Error::TorchRoles {
            roles: others.join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::layout::{Distribution, TaskCounts};

    /// (tasks per node, distribution, each node's rank by node index, one task per node)
    #[rustfmt::skip]
    const NODE_RANKS: &[(&[u32], Distribution, &[u32], bool)] = &[
        (&[2, 2],    Distribution::Block,  &[0, 1],    false),
        (&[1, 1, 1], Distribution::Block,  &[0, 1, 2], true),
        (&[2, 1],    Distribution::Cyclic, &[0, 1],    false),
    ];

    #[test]
    fn nodes_are_ranked_by_their_lowest_task() {
        for &(counts, dist, want, one_each) in NODE_RANKS {
            let layout = Layout::build(&TaskCounts::from_counts(counts.to_vec()), dist).unwrap();
            assert_eq!(node_ranks(&layout), want, "{counts:?} {dist:?}");
            assert_eq!(layout.nodes().all(|r| r.len() == 1), one_each);
        }
    }

    #[test]
    fn a_node_that_holds_no_rank_0_can_be_node_0() {
        // -m arbitrary with rank 0 on the second node: that node is node 0.
        let hosts = ["a".to_string(), "b".to_string()];
        let task_hosts = ["b", "a", "a"].map(String::from);
        let counts = TaskCounts::from_counts(vec![2, 1]);
        let layout = Layout::from_task_hosts(&hosts, &counts, &task_hosts).unwrap();
        assert_eq!(node_ranks(&layout), [1, 0]);
    }
}
