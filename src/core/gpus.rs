//! Each task's slice of its node's GPUs.
//!
//! The entries of `CUDA_VISIBLE_DEVICES` are opaque tokens: local indices under cgroup device
//! constraints, global indices otherwise, or UUIDs. They are partitioned, never renumbered
//! (TensorFlow's resolver writes ordinals 0..n-1, which is wrong whenever Slurm gave e.g. 2,3).

use super::error::{Error, Result};
use super::gpu_affinity::{Basis, Hardware};
use super::layout::Layout;
use super::settings::{GpuPolicy, RoleSet};
use super::spec::{Role, RoleTable};

/// The variable CUDA reads: Slurm's GPUs for the step (or the task) in, the task's slice out.
pub const VAR: &str = "CUDA_VISIBLE_DEVICES";
/// The order CUDA numbers GPUs in. Slurm numbers them in PCI bus order (NVML's), and its
/// documentation says `CUDA_DEVICE_ORDER=PCI_BUS_ID` must be set for CUDA to number them the
/// same; Slurm does not set it, and CUDA's default (fastest first) then makes a task on a node
/// with mixed GPUs drive a GPU it was not given.
pub const DEVICE_ORDER: &str = "CUDA_DEVICE_ORDER";
/// [`DEVICE_ORDER`]'s value that is Slurm's order, NUL-terminated.
pub const PCI_BUS_ORDER: &str = "PCI_BUS_ID\0";
/// Slurm's own list of the step's GPUs on a node: gres/gpu sets it beside [`VAR`], and only
/// where the step has GPUs.
pub const SLURM_STEP_GPUS: &str = "SLURM_STEP_GPUS";

/// What to do with the task's `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuAction {
    /// Leave it as Slurm set it (unset stays unset).
    Leave,
    /// Set it to this value (`""` hides every GPU from CUDA).
    Set(String),
}

/// The GPU facts of one task.
#[derive(Debug, Clone, Copy)]
pub struct GpuInputs<'a> {
    pub host: &'a str,
    /// `CUDA_VISIBLE_DEVICES` of the step on this node, as it was before the tasks forked.
    pub step: Option<&'a str>,
    /// `CUDA_VISIBLE_DEVICES` of this task now (Slurm rewrites it per task with `--gpus-per-task`
    /// or `--gpu-bind`).
    pub task: Option<&'a str>,
    /// The roles of this node's tasks, by local slot.
    pub node_roles: &'a [Role],
    pub slot: usize,
    /// With `even_gpus`: the step's busiest node (its name and its GPU task count). Every GPU
    /// task then gets the share a task of that node gets, assuming every node of the step has
    /// as many GPUs as this one (as `--gres=gpu:N` and `--gpus-per-node=N` give).
    pub busiest: Option<(&'a str, usize)>,
    /// Where the node's GPUs sit and where Slurm bound its tasks ([`super::gpu_affinity`]);
    /// `None`: not known, and the slices are contiguous.
    pub hardware: Option<Hardware<'a>>,
}

/// A task's GPUs, and how the node's slices were chosen where tfcluster chose them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    pub action: GpuAction,
    /// `None` where the node's GPUs were not split among its tasks.
    pub basis: Option<Basis>,
}

impl From<GpuAction> for Assigned {
    fn from(action: GpuAction) -> Assigned {
        Assigned {
            action,
            basis: None,
        }
    }
}

pub fn assign(policy: GpuPolicy, gpu_roles: RoleSet, t: &GpuInputs) -> Result<Assigned> {
    let step = match (policy, t.step) {
        (GpuPolicy::Keep, _) | (_, None) => return Ok(GpuAction::Leave.into()),
        (GpuPolicy::Split, Some(step)) if step.trim().is_empty() => {
            return Ok(GpuAction::Leave.into())
        }
        (GpuPolicy::Split, Some(step)) => step,
    };
    if !gpu_roles.contains(t.node_roles[t.slot]) {
        return Ok(GpuAction::Set(String::new()).into());
    }
    if t.task.is_some_and(|task| task != step) {
        // Slurm already bound GPUs to this task; its binding is more precise than ours.
        return Ok(GpuAction::Leave.into());
    }
    let tokens: Vec<&str> = step.split(',').map(str::trim).collect();
    if tokens.iter().any(|t| t.is_empty()) {
        return Err(Error::BadGpuList {
            value: step.to_string(),
        });
    }
    // Two tasks must never share a GPU because the list named it twice.
    let mut seen = std::collections::HashSet::with_capacity(tokens.len());
    if let Some(token) = tokens.iter().find(|t| !seen.insert(**t)) {
        return Err(Error::RepeatedGpu {
            value: step.to_string(),
            token: token.to_string(),
        });
    }
    let gpu_slots: Vec<usize> = (0..t.node_roles.len())
        .filter(|&s| gpu_roles.contains(t.node_roles[s]))
        .collect();
    let own = tokens.len() / gpu_slots.len();
    if own == 0 {
        return Err(Error::NotEnoughGpus {
            host: t.host.to_string(),
            gpus: tokens.len(),
            tokens: step.to_string(),
            tasks: gpu_slots.len(),
        });
    }
    let per_task = match t.busiest {
        Some((busiest, tasks)) if tokens.len() < tasks => {
            // This node has GPUs for its own tasks but not for the busiest node's share: the
            // nodes were given different GPU counts.
            return Err(Error::UnevenGpus {
                host: t.host.to_string(),
                gpus: tokens.len(),
                busiest: busiest.to_string(),
                tasks,
            });
        }
        Some((_, tasks)) => tokens.len() / tasks,
        None => own,
    };
    let nth = gpu_slots
        .iter()
        .position(|&s| s == t.slot)
        .expect("slot is a GPU slot");
    let contiguous = || tokens[nth * per_task..(nth + 1) * per_task].join(",");
    let (slice, basis) = match t
        .hardware
        .map(|h| h.slices(tokens.len(), &gpu_slots, per_task))
    {
        Some(Ok(slices)) => {
            let own: Vec<&str> = slices[nth].iter().map(|&p| tokens[p]).collect();
            (own.join(","), Some(Basis::Affinity))
        }
        Some(Err(why)) => (contiguous(), Some(Basis::Contiguous(why))),
        None => (contiguous(), None),
    };
    Ok(Assigned {
        action: GpuAction::Set(slice),
        basis,
    })
}

/// How a step's GPU tasks spread over its nodes (for `even_gpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuSpread {
    /// The node with the most GPU tasks (the first of them).
    pub busiest: usize,
    /// Its GPU tasks: every GPU task gets the share a task of that node gets.
    pub most: usize,
    /// The fewest GPU tasks on a node that has any (0: no node has one).
    pub fewest: usize,
}

impl GpuSpread {
    /// The spread of the tasks whose roles are in `gpu_roles`.
    pub fn of_step(layout: &Layout, roles: &RoleTable, gpu_roles: RoleSet) -> GpuSpread {
        let gpu_tasks = layout.nodes().map(|gtids| {
            gtids
                .iter()
                .filter(|&&g| {
                    gpu_roles.contains(roles.of_rank(g).expect("roles cover every rank").0)
                })
                .count()
        });
        GpuSpread::of(gpu_tasks)
    }

    fn of(gpu_tasks_per_node: impl Iterator<Item = usize>) -> GpuSpread {
        let mut spread = GpuSpread {
            busiest: 0,
            most: 0,
            fewest: 0,
        };
        for (node, count) in gpu_tasks_per_node.enumerate() {
            if count > spread.most {
                (spread.busiest, spread.most) = (node, count);
            }
            if count > 0 && (spread.fewest == 0 || count < spread.fewest) {
                spread.fewest = count;
            }
        }
        spread
    }

    /// When the even share leaves some node's GPUs unused, the line that tells the user why,
    /// given a node's `CUDA_VISIBLE_DEVICES` (every node is taken to have as many GPUs).
    pub fn note(&self, hosts: &[String], step_gpus: Option<&str>) -> Option<String> {
        let GpuSpread {
            busiest,
            most,
            fewest,
        } = *self;
        let gpus = step_gpus?
            .split(',')
            .filter(|t| !t.trim().is_empty())
            .count();
        if most == 0 || gpus < most {
            return None;
        }
        let each = gpus / most;
        if fewest == 0 || gpus / fewest == each {
            return None;
        }
        Some(format!(
            "every GPU task gets {each} GPU{}, the share of the busiest node ({}: {most} GPU tasks \
             for {gpus} GPUs), because all-reduce training needs the same count on every worker; \
             nodes with fewer tasks leave GPUs unused. Put as many tasks on every node \
             (--ntasks-per-node) to use them all, or set even_gpus=no",
            if each == 1 { "" } else { "s" },
            hosts[busiest],
        ))
    }
}
