//! Global rank -> (node, local slot), rebuilt exactly as Slurm places a step's tasks.
//!
//! A compute node only sees its own tasks' global ids; SPANK exposes no global map. Slurm does
//! export the final per-node counts (`SLURM_STEP_TASKS_PER_NODE`, in `SLURM_STEP_NODELIST`
//! order) and the distribution, and for block, cyclic and plane those determine every id
//! (Slurm's `slurm_step_layout.c`):
//!
//! - **block** (also unset, `unknown`, any `,pack`/`,nopack`): node i holds the contiguous ids
//!   starting at the sum of the counts before it.
//! - **cyclic**: ids go round-robin over the nodes, skipping nodes that are full.
//! - **plane=P**: like cyclic, P ids at a time, cut short when a node has less room left.
//! - **arbitrary**: ids follow the user's `SLURM_HOSTFILE`, which a compute node cannot read;
//!   srun reads it and passes every task's host on ([`Layout::from_task_hosts`]). Without that
//!   list it is an error, never a guess.
//!
//! Levels after `:` (socket/core binding) never change which node a task is on.

use super::error::{Error, Result};
use super::hostlist;
use super::text::decimal;
use super::topology::NodeRanks;

/// srun -> slurmstepd: every task's host in rank order, for `-m arbitrary` (SLURM_HOSTFILE).
/// srun forwards every `SLURM_*` variable of its environment to the step whatever `--export` or
/// `SLURM_EXPORT_ENV` say (`NONE`, a list), so the order reaches the nodes in every case. Each
/// task drops it before exec.
pub const TASK_HOSTS_VAR: &str = "SLURM_TFCLUSTER_TASK_HOSTS";

/// The node-level task distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Block,
    Cyclic,
    Plane(u32),
    Arbitrary,
}

impl Distribution {
    /// From `SLURM_DISTRIBUTION` (absent when srun was given no `-m`) and `SLURM_DIST_PLANESIZE`.
    pub fn parse(dist: Option<&str>, plane_size: Option<&str>) -> Result<Distribution> {
        let value = dist.unwrap_or("").trim();
        let node_level = value.split([':', ',']).next().unwrap_or("");
        // srun's own spelling is `plane=N`; Slurm exports `plane` plus SLURM_DIST_PLANESIZE.
        let (method, inline_size) = match node_level.split_once('=') {
            Some((m, n)) => (m, Some(n)),
            None => (node_level, None),
        };
        match method {
            "" | "block" | "unknown" | "*" => Ok(Distribution::Block),
            "cyclic" => Ok(Distribution::Cyclic),
            "arbitrary" => Ok(Distribution::Arbitrary),
            "plane" => {
                let size = inline_size.or(plane_size).unwrap_or("").trim();
                match decimal::<u32>(size) {
                    Some(n) if n >= 1 => Ok(Distribution::Plane(n)),
                    _ => Err(Error::BadPlaneSize {
                        value: size.to_string(),
                    }),
                }
            }
            _ => Err(Error::UnknownDistribution {
                value: value.to_string(),
            }),
        }
    }
}

/// The most tasks a step may have. No TF_CONFIG of more fits in Linux's 128 KiB limit for one
/// environment string (every endpoint takes at least 6 bytes: `"a:1",`), and it keeps what a
/// corrupt count list can make slurmstepd allocate under a megabyte. Checked once, when the
/// counts are read ([`TaskCounts`]): every layout is built from those.
pub const MAX_TASKS: u64 = 1 << 16;

/// A step's task count per node, in node order (`SLURM_STEP_TASKS_PER_NODE`). Only
/// [`TaskCounts::parse`] and [`TaskCounts::new`] make one, and both refuse more than
/// [`MAX_TASKS`] tasks or [`super::hostlist::MAX_HOSTS`] nodes, so nothing built from it can
/// ask for more memory than that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCounts {
    counts: Vec<u32>,
    total: u32,
}

impl std::ops::Deref for TaskCounts {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.counts
    }
}

impl TaskCounts {
    /// Counts known one by one (a heterogeneous step's, [`super::het`]).
    pub fn from_counts(counts: Vec<u32>) -> TaskCounts {
        let total = counts.iter().sum();
        TaskCounts { counts, total }
    }

    /// Parses a compressed count list such as `2(x3),1` (`[2, 2, 2, 1]`); `var` names the
    /// variable it came from, for the message.
    pub fn parse(var: &'static str, value: &str) -> Result<TaskCounts> {
        let fail = |reason: &str| Error::CountList {
            var,
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let mut counts = Vec::new();
        let mut total: u64 = 0;
        for item in value.split(',') {
            let (count, reps) = match item.split_once("(x") {
                Some((count, rest)) => {
                    let reps = rest
                        .strip_suffix(')')
                        .ok_or_else(|| fail("a '(x' has no ')'"))?;
                    (
                        count,
                        decimal::<u32>(reps)
                            .ok_or_else(|| fail("the repeat count is not a number"))?,
                    )
                }
                None => (item, 1),
            };
            let count = decimal::<u32>(count).ok_or_else(|| fail("a count is not a number"))?;
            if reps == 0 {
                return Err(fail("a repeat count is 0"));
            }
            if counts.len() as u64 + u64::from(reps) > super::hostlist::MAX_HOSTS as u64 {
                return Err(fail("more entries than Slurm allows nodes"));
            }
            total += u64::from(count) * u64::from(reps);
            if total > MAX_TASKS {
                return Err(Error::TooManyTasks {
                    var,
                    value: value.to_string(),
                    limit: MAX_TASKS,
                });
            }
            counts.extend(std::iter::repeat_n(count, reps as usize));
        }
        Ok(TaskCounts {
            counts,
            total: total as u32,
        })
    }

    /// Counts given as numbers (tests, benchmarks), under the same bounds as [`Self::parse`].
    pub fn new(counts: Vec<u32>) -> Result<TaskCounts> {
        let text: Vec<String> = counts.iter().map(u32::to_string).collect();
        TaskCounts::parse("the task counts", &text.join(","))
    }

    /// Tasks in the step.
    pub fn total(&self) -> u32 {
        self.total
    }
}

/// Where one global rank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub node: u32,
    /// The task's local index on its node (`SLURM_LOCALID`).
    pub slot: u32,
}

/// Every rank's placement and every node's ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Indexed by global rank.
    pub ranks: Vec<Placement>,
    /// Every node's global ranks in local-slot order, node after node (Slurm's `SLURM_GTIDS`
    /// per node); node i's are `gtids[starts[i]..starts[i + 1]]`. Flat, so a step of thousands
    /// of nodes costs two allocations, not one per node.
    gtids: Vec<u32>,
    starts: Vec<usize>,
}

impl Layout {
    /// The layout of a step: `hosts` in `SLURM_STEP_NODELIST` order, their task `counts`, the
    /// distribution, and, where it decides the order, the task hosts srun passed on (`-m
    /// arbitrary`) or the topology's node ranks (26.05, block steps on several nodes).
    pub fn for_step(
        hosts: &[String],
        counts: &TaskCounts,
        dist: Distribution,
        task_hosts: Option<&str>,
        topology: Option<&Result<NodeRanks>>,
    ) -> Result<Layout> {
        if counts.len() != hosts.len() {
            return Err(Error::NodeCountMismatch {
                nodes: hosts.len(),
                counts: counts.len(),
            });
        }
        match (dist, task_hosts, topology) {
            (Distribution::Arbitrary, Some(list), _) => {
                Layout::from_task_hosts(hosts, counts, &hostlist::expand(list)?)
            }
            // srun refuses -m arbitrary without SLURM_HOSTFILE, so here the order was lost.
            (Distribution::Arbitrary, None, _) => Err(Error::TaskOrderMissing),
            (Distribution::Block, _, Some(topology)) if hosts.len() > 1 => {
                let ranks = topology.as_ref().map_err(Clone::clone)?;
                Ok(Layout::block_in_order(counts, &ranks.order(hosts)?))
            }
            _ => Layout::build(counts, dist),
        }
    }

    pub fn build(counts: &TaskCounts, dist: Distribution) -> Result<Layout> {
        let total = counts.total() as usize;
        let chunk = match dist {
            Distribution::Block => return Ok(Self::block(counts, total)),
            Distribution::Cyclic => 1,
            Distribution::Plane(p) => p,
            Distribution::Arbitrary => return Err(Error::ArbitraryDistribution),
        };
        Ok(Self::round_robin(counts, total, chunk))
    }

    /// Arbitrary distribution: rank k runs on `task_hosts[k]` (the order of the user's
    /// `SLURM_HOSTFILE`, as srun reads it). The result must match Slurm's per-node `counts`.
    pub fn from_task_hosts(
        hosts: &[String],
        counts: &TaskCounts,
        task_hosts: &[String],
    ) -> Result<Layout> {
        let index: std::collections::HashMap<&str, usize> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.as_str(), i))
            .rev()
            .collect();
        let mut layout = Self::empty(counts, counts.total() as usize);
        let mut filled = vec![0u32; counts.len()];
        for (rank, host) in task_hosts.iter().enumerate() {
            let node = *index
                .get(host.as_str())
                .ok_or_else(|| Error::TaskHostNotInStep {
                    rank,
                    host: host.clone(),
                    nodes: hosts.join(","),
                })?;
            if filled[node] == counts[node] {
                let listed = task_hosts.iter().filter(|h| *h == host).count() as u32;
                return Err(Error::TaskHostCount {
                    host: host.clone(),
                    listed,
                    started: counts[node],
                });
            }
            layout.assign(node, &mut filled);
        }
        if let Some(node) = (0..counts.len()).find(|&n| filled[n] != counts[n]) {
            return Err(Error::TaskHostCount {
                host: hosts[node].clone(),
                listed: filled[node],
                started: counts[node],
            });
        }
        Ok(layout)
    }

    /// The global ranks on `node`, by local slot.
    pub fn node(&self, node: usize) -> Option<&[u32]> {
        Some(&self.gtids[*self.starts.get(node)?..*self.starts.get(node + 1)?])
    }

    /// Tasks in the step.
    pub fn tasks(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// The node with the most tasks (the first of them) and its task count: it needs the most
    /// ports, and with `even_gpus` sets every GPU task's share.
    pub fn busiest(&self) -> (usize, usize) {
        self.nodes()
            .enumerate()
            .map(|(n, gtids)| (n, gtids.len()))
            .max_by_key(|&(n, len)| (len, std::cmp::Reverse(n)))
            .unwrap_or((0, 0))
    }

    /// Every node's global ranks, in node order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = &[u32]> + '_ {
        self.starts.windows(2).map(|w| &self.gtids[w[0]..w[1]])
    }

    fn empty(counts: &[u32], total: usize) -> Layout {
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut at = 0;
        starts.push(0);
        for &c in counts {
            at += c as usize;
            starts.push(at);
        }
        Layout {
            ranks: Vec::with_capacity(total),
            gtids: vec![0; total],
            starts,
        }
    }

    /// Gives the next global rank to `node`, at its next free slot (`filled[node]`).
    fn assign(&mut self, node: usize, filled: &mut [u32]) {
        let rank = self.ranks.len() as u32;
        let slot = filled[node];
        self.gtids[self.starts[node] + slot as usize] = rank;
        filled[node] += 1;
        self.ranks.push(Placement {
            node: node as u32,
            slot,
        });
    }

    fn block(counts: &[u32], total: usize) -> Layout {
        let mut layout = Self::empty(counts, total);
        for (node, &count) in counts.iter().enumerate() {
            for slot in 0..count {
                layout.ranks.push(Placement {
                    node: node as u32,
                    slot,
                });
            }
        }
        for (rank, g) in layout.gtids.iter_mut().enumerate() {
            *g = rank as u32;
        }
        layout
    }

    /// Block over the nodes taken in `order` (node indices): Slurm 26.05's topology order
    /// ([`super::topology`]). Node `order[0]` gets the first ranks, and so on; each node's
    /// ranks stay contiguous.
    fn block_in_order(counts: &TaskCounts, order: &[usize]) -> Layout {
        let mut layout = Self::empty(counts, counts.total() as usize);
        let mut filled = vec![0u32; counts.len()];
        for &node in order {
            for _ in 0..counts[node] {
                layout.assign(node, &mut filled);
            }
        }
        layout
    }

    /// Cyclic (`chunk` = 1) and plane (`chunk` = P): rounds over the nodes that still have
    /// room, up to `chunk` ranks each. Nodes leave the round when full, so the work is linear in
    /// the number of tasks whatever the counts.
    fn round_robin(counts: &[u32], total: usize, chunk: u32) -> Layout {
        let mut layout = Self::empty(counts, total);
        let mut filled = vec![0u32; counts.len()];
        let mut open: Vec<usize> = (0..counts.len()).filter(|&n| counts[n] > 0).collect();
        while !open.is_empty() {
            for &node in &open {
                let room = counts[node] - filled[node];
                for _ in 0..room.min(chunk) {
                    layout.assign(node, &mut filled);
                }
            }
            open.retain(|&n| filled[n] < counts[n]);
        }
        layout
    }
}
