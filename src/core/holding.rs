//! With `isolate=yes`, a node whose tasks have all ended while the step runs on elsewhere holds
//! the step's firewall until no other node of the step has a task left.
//!
//! Its peers admit its address until their own tasks end, so the rules that keep other users on
//! it away from them must stay. Kept by its slurmstepd, which waits in its exit hook, the table
//! stays owned ([`super::isolation`]): `nft flush ruleset` on the node leaves it, and its own
//! ports stay closed to a program another user starts on them. A table left behind once
//! slurmstepd has exited is owned by no one, and a flush removes it.
//!
//! Slurm says where tasks still run: each node's slurmd answers with its step's process ids
//! (`slurm_job_step_get_pids`, what `sstat --pidformat` reads), a node whose slurmstepd has gone
//! does not answer. No node waits for slurmctld's word that the step has ended: slurmctld waits
//! for this node's slurmstepd, which sends its part only after the exit hook returns.
//!
//! This module decides, from plain answers, whom to ask next and how long to wait; the shell
//! asks (tests/isolation.rs).

use std::time::Duration;

/// The first wait between two asks: a step ended by its chief ends everywhere within a few
/// hundred milliseconds (docs/performance.md), so the hold is short.
pub const FIRST_WAIT: Duration = Duration::from_millis(100);

/// The longest wait between two asks: how long a node may hold after the step's last task has
/// ended (the step's completion waits for it).
pub const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// One node's hold: the nodes still to ask, and the wait before the next ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    asking: Vec<String>,
    wait: Duration,
}

impl Hold {
    /// The hold of node `own` of a step on `hosts` (Slurm's node names): every other node is
    /// asked. `None` for a step on one node, which has no peers.
    pub fn new(hosts: &[String], own: usize) -> Option<Hold> {
        let asking: Vec<String> = hosts
            .iter()
            .enumerate()
            .filter(|&(node, _)| node != own)
            .map(|(_, host)| host.clone())
            .collect();
        (!asking.is_empty()).then_some(Hold {
            asking,
            wait: FIRST_WAIT,
        })
    }

    /// The nodes to ask, as Slurm takes a node list (names joined by commas).
    pub fn asking(&self) -> String {
        self.asking.join(",")
    }

    /// After an answer (each node that answered, with its step's process count): the wait
    /// before the next ask, or `None` when no other node has a task left. A node that did not
    /// answer, or answered none, has ended; only nodes with tasks are asked again (their tasks
    /// never come back). The wait doubles up to [`LONGEST_WAIT`].
    pub fn answered(&mut self, answers: &[(String, u32)]) -> Option<Duration> {
        self.asking.retain(|node| {
            answers
                .iter()
                .any(|(answered, pids)| answered == node && *pids > 0)
        });
        if self.asking.is_empty() {
            return None;
        }
        let wait = self.wait;
        self.wait = (self.wait * 2).min(LONGEST_WAIT);
        Some(wait)
    }
}
