//! JAX's and Keras 3's multi-process start (`jax=yes`, `keras=3`). Since TensorFlow 2.16
//! `tf.keras` is Keras 3, whose `model.fit` does not train across nodes under `tf.distribute`
//! (keras-team/keras#20585); Keras's own way across machines is its JAX backend with
//! `keras.distribution.initialize()`, which reads the `KERAS_DISTRIBUTION_*` variables and calls
//! `jax.distributed.initialize`. JAX's own Slurm detection takes the coordinator's host as the
//! first name of `SLURM_STEP_NODELIST` (wrong under `-m arbitrary` and in heterogeneous steps,
//! where rank 0 need not be there), one port per job (steps of one job collide), and one GPU
//! per process by `SLURM_LOCALID`. tfcluster knows where rank 0 runs, the step's own ports and
//! each task's GPU slice, so it sets what JAX reads itself:
//! - `JAX_COORDINATOR_ADDRESS`: rank 0's `address:port` (its TF_CONFIG endpoint: a port of the
//!   step's own block, claimed on its node and covered by `isolate=yes`);
//! - `JAX_LOCAL_DEVICE_IDS`: `0,...,k-1` for a task whose slice of `k` GPUs tfcluster set, so
//!   JAX uses the whole slice;
//! - `JAX_COORDINATOR_BIND_ADDRESS`, in rank 0's task: the same `address:port`, so that the
//!   coordinator listens on rank 0's address alone, not on every interface (JAX's default,
//!   `[::]:port`). Only where rank 0's node resolves its own address to addresses none of
//!   which is loopback ([`JaxStep::bind`]): Debian's installer maps a host's own name to
//!   127.0.1.1, and a coordinator bound there would be out of every other node's reach.
//!
//! JAX takes the process count and id from Slurm (`SLURM_NTASKS`, `SLURM_PROCID`), which
//! are right. With `keras=3` every task also gets Keras's own: `KERAS_BACKEND=jax` (the only
//! backend `keras.distribution` runs on; Keras's default is TensorFlow),
//! `KERAS_DISTRIBUTION_JOB_ADDRESSES` (rank 0's `address:port` alone, the coordinator),
//! `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID` (the rank).
//!
//! Keras reads only the coordinator from `KERAS_DISTRIBUTION_JOB_ADDRESSES`: given a list (with
//! a comma) it checks its length against the process count and takes the first, given one
//! address it takes it as it is (`keras/src/backend/jax/distribution_lib.py`, `initialize`, in
//! the Keras 3.15 tests/jax.rs runs). Every rank's list would be a second variable the size of
//! TF_CONFIG in every task (about 86 KB at 4096 tasks) for nothing that list adds.

use super::address::Endpoints;
use super::layout::Layout;
use super::text;
use std::borrow::Cow;
use std::net::IpAddr;

/// rank 0's `address:port`, where JAX's coordinator service listens.
pub const COORDINATOR: &str = "JAX_COORDINATOR_ADDRESS";
/// Where rank 0's coordinator listens: its `address:port` ([`JaxStep::bind`]).
pub const BIND: &str = "JAX_COORDINATOR_BIND_ADDRESS";
/// The task's GPUs as JAX numbers them (`0,...,k-1` of its `CUDA_VISIBLE_DEVICES`).
pub const LOCAL_DEVICES: &str = "JAX_LOCAL_DEVICE_IDS";
/// Keras's backend: `jax`.
pub const KERAS_BACKEND: &str = "KERAS_BACKEND";
/// The coordinator's `address:port` (rank 0's), as Keras reads it.
pub const KERAS_ADDRESSES: &str = "KERAS_DISTRIBUTION_JOB_ADDRESSES";
/// The step's task count.
pub const KERAS_PROCESSES: &str = "KERAS_DISTRIBUTION_NUM_PROCESSES";
/// The task's rank.
pub const KERAS_PROCESS_ID: &str = "KERAS_DISTRIBUTION_PROCESS_ID";

/// The step-wide values, each NUL-terminated and lent to every task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaxStep {
    coordinator: String,
    /// rank 0's node, and its address as TF_CONFIG names it.
    coordinator_node: usize,
    coordinator_host: String,
    /// Rank 0's coordinator binds [`Self::coordinator`]: its node resolved its own address
    /// to addresses others reach ([`Self::bind`]).
    bind: bool,
    /// With `keras=3`: the process count.
    keras: Option<String>,
}

impl JaxStep {
    /// The values for a step whose settings ask for JAX's variables (`jax`) and Keras's
    /// (`keras3`, which implies JAX's); `None` when neither.
    pub fn new(jax: bool, keras3: bool, layout: &Layout, endpoints: &Endpoints) -> Option<JaxStep> {
        if !(jax || keras3) {
            return None;
        }
        let first = layout.ranks.first().map_or((0, 0), |p| (p.node, p.slot));
        let mut coordinator = endpoints.plain(first.0 as usize, first.1 as usize);
        coordinator.push('\0');
        let keras = keras3.then(|| text::decimal_nul(layout.tasks()));
        Some(JaxStep {
            coordinator,
            coordinator_node: first.0 as usize,
            coordinator_host: endpoints.address(first.0 as usize).to_string(),
            bind: false,
            keras,
        })
    }

    /// On node `node`, which resolves rank 0's address with `resolve` (the node's own
    /// resolver): when it runs rank 0 and every address the name resolves to is one other
    /// nodes can reach (none loopback, at least one), rank 0's coordinator binds its
    /// `address:port` alone. Otherwise JAX's default stays (every interface; `isolate=yes`
    /// still covers the port). Returns whether it binds.
    pub fn bind(
        &mut self,
        node: usize,
        resolve: impl FnOnce(&str) -> Result<Vec<IpAddr>, String>,
    ) -> bool {
        if node != self.coordinator_node {
            return false;
        }
        let reachable = resolve(&self.coordinator_host)
            .is_ok_and(|found| super::address::reachable_by_peers(&found));
        self.bind = reachable;
        reachable
    }

    /// Adds the task's variables to `set`: the coordinator, the GPUs of `gpus` (the slice
    /// tfcluster gives the task; none when it leaves `CUDA_VISIBLE_DEVICES` alone or gives it
    /// no GPU) and, with `keras=3`, Keras's own.
    pub fn add<'r>(
        &'r self,
        set: &mut Vec<(&'static str, Cow<'r, str>)>,
        rank: u32,
        gpus: Option<&str>,
    ) {
        set.push((COORDINATOR, Cow::Borrowed(&self.coordinator)));
        if rank == 0 && self.bind {
            set.push((BIND, Cow::Borrowed(&self.coordinator)));
        }
        if let Some(ids) = gpus.and_then(local_device_ids) {
            set.push((LOCAL_DEVICES, Cow::Owned(ids + "\0")));
        }
        if let Some(processes) = &self.keras {
            set.push((KERAS_BACKEND, Cow::Borrowed("jax\0")));
            set.push((KERAS_ADDRESSES, Cow::Borrowed(&self.coordinator)));
            set.push((KERAS_PROCESSES, Cow::Borrowed(processes)));
            set.push((KERAS_PROCESS_ID, Cow::Owned(text::decimal_nul(rank))));
        }
    }
}

/// `0,1,...,k-1` for a `CUDA_VISIBLE_DEVICES` of `k` devices (the process sees only its slice,
/// renumbered from 0); `None` for an empty one (no GPU: JAX's default is right).
fn local_device_ids(visible: &str) -> Option<String> {
    let count = visible.split(',').filter(|d| !d.trim().is_empty()).count();
    (count > 0).then(|| {
        (0..count)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::layout::{Distribution, TaskCounts};
    use crate::core::ports::StepPorts;

    /// What rank 0's address resolves to on a node: its addresses, or the resolver's error.
    type Resolved = Result<&'static [&'static str], &'static str>;

    /// (what, the node, what rank 0's address resolves to there, whether the coordinator binds it)
    #[rustfmt::skip]
    const BINDS: &[(&str, usize, Resolved, bool)] = &[
        ("rank 0's node, a routable address",        0, Ok(&["10.0.0.9"]),               true),
        ("rank 0's node, IPv4 and IPv6",             0, Ok(&["10.0.0.9", "fd00::9"]),    true),
        ("Debian's 127.0.1.1 for the host's name",   0, Ok(&["127.0.1.1"]),              false),
        ("a loopback among the addresses",           0, Ok(&["10.0.0.9", "::1"]),        false),
        ("resolves to nothing",                      0, Ok(&[]),                         false),
        ("does not resolve",                         0, Err("no such host"),             false),
        ("another node: only rank 0's binds",        1, Ok(&["10.0.0.10"]),              false),
    ];

    #[test]
    fn the_coordinator_binds_rank_0s_address_only_where_others_reach_it() {
        let hosts = ["a".to_string(), "b".to_string()];
        let layout =
            Layout::build(&TaskCounts::from_counts(vec![1, 1]), Distribution::Block).unwrap();
        let ports = StepPorts::plan(
            &crate::core::Settings::default().ports(),
            None,
            1,
            0,
            1,
            "a",
        )
        .unwrap();
        let endpoints = Endpoints::new(&hosts, &Default::default(), &ports, 1);
        for &(what, node, resolved, binds) in BINDS {
            let mut step = JaxStep::new(true, false, &layout, &endpoints).unwrap();
            let mut asked = None;
            let bound = step.bind(node, |name| {
                asked = Some(name.to_string());
                resolved
                    .map(|list| list.iter().map(|a| a.parse().unwrap()).collect())
                    .map_err(str::to_string)
            });
            assert_eq!(bound, binds, "{what}");
            let mut set = Vec::new();
            step.add(&mut set, 0, None);
            let bind = set
                .iter()
                .find(|(n, _)| *n == BIND)
                .map(|(_, v)| v.to_string());
            assert_eq!(bind.is_some(), binds, "{what}");
            if binds {
                assert_eq!(asked.as_deref(), Some("a"), "{what}");
                assert_eq!(
                    bind.as_deref(),
                    set.iter()
                        .find(|(n, _)| *n == COORDINATOR)
                        .map(|(_, v)| v.as_ref()),
                    "{what}"
                );
            }
            let mut other = Vec::new();
            step.add(&mut other, 1, None);
            assert!(other.iter().all(|(n, _)| *n != BIND), "{what}: rank 1");
        }
    }
}
