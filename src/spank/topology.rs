//! Reads the configuration files the topology rules ([`crate::core::topology::node_ranks`])
//! need, as slurmstepd itself runs with them ([`crate::spank::slurm_conf`]).

use crate::core::topology::{self, NodeRanks};
use crate::core::Result;
use crate::spank::slurm_conf;

/// `None` when the cluster's topology does not reorder block steps; otherwise the ranking
/// plugin's node ranks, or why they cannot be known.
pub fn node_ranks() -> Option<Result<NodeRanks>> {
    topology::node_ranks(&slurm_conf::path(), slurm_conf::read)
}
