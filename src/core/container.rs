//! Slurm's own OCI containers (`srun --container=BUNDLE`, oci.conf): whether what tfcluster
//! sets for a task can reach the program inside.
//!
//! Before 23.02 slurmstepd writes the container's environment (config.json's `process.env`)
//! while it sets the step up, before any plugin's `task_init` and before Slurm's own GPU
//! variables, and never writes it again; it also runs one task per node at most. A task in
//! such a container gets no TF_CONFIG, no CUDA_VISIBLE_DEVICES and no SLURM_PROCID: it trains
//! alone and exits 0. From 23.02 (SchedMD bug 15449) the file is written again from the final
//! task environment just before the runtime starts, so the variables arrive.
//!
//! A step runs in a container when its srun has `--container` or `SRUN_CONTAINER` (srun's
//! opt.c); a job's container (`sbatch`/`salloc --container`) is its batch step's, not its
//! steps'. srun exports the bundle as `SLURM_CONTAINER` only when that is not set yet, so a
//! `SLURM_CONTAINER` srun started with (the job's, or an outer step's) says nothing sure about
//! this step.

use super::error::{Error, Result};
use std::borrow::Cow;

/// srun's input for `--container` (every release).
pub const REQUEST_VAR: &str = "SRUN_CONTAINER";
/// The bundle srun exports for a `--container` step, unless it was set already.
pub const BUNDLE_VAR: &str = "SLURM_CONTAINER";

/// The step's container as srun sees it, and whether this release hands a container its
/// task's final environment (decided at build time from the release).
#[derive(Debug, Clone, Copy)]
pub struct ContainerStep<'a> {
    /// `SRUN_CONTAINER` in srun's environment.
    pub requested: Option<&'a str>,
    /// `SLURM_CONTAINER` in srun's environment once srun has read its options.
    pub bundle: Option<&'a str>,
    /// Whether `SLURM_CONTAINER` was already in the environment srun started with; `None` when
    /// that cannot be told (then it counts as inherited: a warning, never a refusal).
    pub inherited: Option<bool>,
    /// The Slurm release, `major.minor`, for the message.
    pub release: &'a str,
    /// Whether the container's environment is written after `task_init` (23.02 and later).
    pub gets_task_env: bool,
}

/// What srun prints, and goes on, when it cannot tell whether the step runs in a container
/// its tasks' TF_CONFIG cannot reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerWarning {
    #[error(
        "SLURM_CONTAINER ({bundle}) came with srun's environment (a job or step started with \
         --container); if this step runs in a container too (srun --container), its tasks get \
         no TF_CONFIG on Slurm {release} and train alone: run the container inside the task \
         instead (srun --tf-cluster apptainer exec IMAGE python train.py), or use Slurm 23.02 \
         or later"
    )]
    MaybeInContainer { bundle: String, release: String },
    /// A node's oci.conf would remove variables tfcluster set ([`super::oci`]).
    #[error(
        "oci.conf on {node} has EnvExclude=\"{pattern}\", which removes {names} from the \
         environment of this step's tasks in Slurm's container ({bundle}): they would start \
         without it and train alone; ask the admin to make EnvExclude match none of them, or \
         run the container inside the task (srun --tf-cluster apptainer exec IMAGE python \
         train.py)"
    )]
    EnvExcluded {
        node: String,
        pattern: String,
        names: String,
        bundle: String,
    },
    /// A node's oci.conf starts the runtime with none of the task's variables ([`super::oci`]).
    #[error(
        "oci.conf on {node} has IgnoreFileConfigJson=true and no CreateEnvFile, so Slurm starts \
         the runtime of this step's container ({bundle}) without its tasks' environment: they \
         would start without TF_CONFIG and train alone; ask the admin to set \
         CreateEnvFile=newline and have RunTimeRun pass the file (%e) to the runtime, or run the \
         container inside the task (srun --tf-cluster apptainer exec IMAGE python train.py)"
    )]
    TaskEnvLost { node: String, bundle: String },
}

impl ContainerStep<'_> {
    /// Refuses, before launch, a container step whose tasks could not get their TF_CONFIG;
    /// warns where srun cannot tell whether the step has a container.
    pub fn check(&self) -> Result<Option<ContainerWarning>> {
        if self.gets_task_env {
            return Ok(None);
        }
        let release = self.release.to_string();
        match (set(self.requested), set(self.bundle), self.inherited) {
            (Some(requested), bundle, _) => Err(Error::ContainerTooOld {
                bundle: shown(bundle.unwrap_or(requested)),
                release,
            }),
            (None, Some(bundle), Some(false)) => Err(Error::ContainerTooOld {
                bundle: shown(bundle),
                release,
            }),
            (None, Some(bundle), _) => Ok(Some(ContainerWarning::MaybeInContainer {
                bundle: shown(bundle),
                release,
            })),
            (None, None, _) => Ok(None),
        }
    }
}

/// A variable that is set and not empty.
fn set(v: Option<&str>) -> Option<&str> {
    v.filter(|v| !v.is_empty())
}

/// The longest bundle path a message repeats (Linux's PATH_MAX); a longer value is cut.
const MAX_SHOWN: usize = 4096;

fn shown(bundle: &str) -> String {
    if bundle.len() <= MAX_SHOWN {
        return bundle.into();
    }
    let mut end = MAX_SHOWN;
    while !bundle.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &bundle[..end])
}

/// The programs that start an Apptainer or SingularityCE container
/// (`srun --tf-cluster apptainer exec IMAGE python train.py`), by the last part of the path.
const APPTAINER_PROGRAMS: &[&str] = &["apptainer", "singularity"];

/// Whether a task's program (its argv\[0\], as srun resolved it) starts Apptainer or
/// SingularityCE.
fn runs_apptainer(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    APPTAINER_PROGRAMS.contains(&name)
}

/// When a task also gets each variable under the container runtimes' own names
/// ([`APPTAINER_NAMES`]): the `apptainer_env` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApptainerEnv {
    /// `yes` (the default): in every task, under the names of the runtimes found on its node
    /// ([`Runtimes::find`]), since a task that starts one from a wrapper script or `bash -c`
    /// cannot be told from one that does not; nothing where none is found.
    Found,
    /// `always`: both runtimes' names in every task, found or not (a runtime the node's look
    /// misses: one a wrapper script loads as a module).
    Always,
    /// `auto`: both names, only when the task's program is `apptainer` or `singularity`.
    Auto,
    /// `no`: never.
    No,
}

impl ApptainerEnv {
    /// The setting's word in plugstack.conf or `--tf-cluster`.
    pub fn parse(word: &str) -> Option<ApptainerEnv> {
        match word {
            "yes" => Some(ApptainerEnv::Found),
            "always" => Some(ApptainerEnv::Always),
            "auto" => Some(ApptainerEnv::Auto),
            "no" => Some(ApptainerEnv::No),
            _ => None,
        }
    }

    /// Whose names a task whose program is `program` (its argv\[0\]) gets on a node where
    /// `found` are installed.
    pub fn for_task(self, found: Runtimes, program: Option<&str>) -> Runtimes {
        match self {
            ApptainerEnv::Found => found,
            ApptainerEnv::Always => Runtimes::BOTH,
            ApptainerEnv::Auto if program.is_some_and(runs_apptainer) => Runtimes::BOTH,
            ApptainerEnv::Auto | ApptainerEnv::No => Runtimes::NONE,
        }
    }
}

/// The container runtimes of a node, told apart by the prefix they read: Apptainer
/// `APPTAINERENV_` (and, with a deprecation warning, `SINGULARITYENV_`), SingularityCE and
/// the older Singularity `SINGULARITYENV_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Runtimes {
    pub apptainer: bool,
    pub singularity: bool,
}

/// Where runtimes are installed when the job's `PATH` does not name them: distribution
/// packages, `make install`'s default prefix, and the usual `/opt` trees.
pub const RUNTIME_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/local/bin",
    "/opt/apptainer/bin",
    "/usr/local/apptainer/bin",
    "/opt/singularity/bin",
    "/usr/local/singularity/bin",
];

/// The most directories of the job's `PATH` a node looks in (each look is two system calls).
pub const MAX_PATH_DIRS: usize = 64;

impl Runtimes {
    pub const NONE: Runtimes = Runtimes {
        apptainer: false,
        singularity: false,
    };
    pub const BOTH: Runtimes = Runtimes {
        apptainer: true,
        singularity: true,
    };

    /// The runtimes in the job's `PATH` (absolute directories only: a relative one names the
    /// task's directory, not slurmstepd's) and in [`RUNTIME_DIRS`]. `program_at` gives the file
    /// name of the executable a path leads to, links followed, or `None`. Apptainer installs
    /// `singularity` as a link to `apptainer`, so a `singularity` that leads to `apptainer...`
    /// is Apptainer; any other is SingularityCE.
    pub fn find(
        path: Option<&str>,
        mut program_at: impl FnMut(&str) -> Option<String>,
    ) -> Runtimes {
        let from_path = path
            .unwrap_or("")
            .split(':')
            .filter(|dir| dir.starts_with('/'))
            .take(MAX_PATH_DIRS);
        let mut looked: Vec<&str> = Vec::new();
        let mut found = Runtimes::NONE;
        for dir in from_path.chain(RUNTIME_DIRS.iter().copied()) {
            let dir = dir.trim_end_matches('/');
            if looked.contains(&dir) || found == Runtimes::BOTH {
                continue;
            }
            looked.push(dir);
            if program_at(&format!("{dir}/apptainer")).is_some() {
                found.apptainer = true;
            }
            match program_at(&format!("{dir}/singularity")) {
                Some(real) if real.starts_with("apptainer") => found.apptainer = true,
                Some(_) => found.singularity = true,
                None => {}
            }
        }
        found
    }
}

/// Each variable tfcluster sets, and the names under which Apptainer (`APPTAINERENV_`) and
/// SingularityCE (`SINGULARITYENV_`) set it inside the container. Those reach the program
/// through `--cleanenv`, `--containall` and SingularityCE's `--oci` mode, and win over the
/// image's own definition of the name (`%environment`, a Docker `ENV`), which a plain
/// variable does not. Both prefixes, with the same value: each runtime reads its own, and
/// Apptainer is silent when both agree. Static names, so a task's list holds no allocation.
pub const APPTAINER_NAMES: &[(&str, [&str; 2])] = &[
    (
        "TF_CONFIG",
        ["APPTAINERENV_TF_CONFIG", "SINGULARITYENV_TF_CONFIG"],
    ),
    (
        "CUDA_VISIBLE_DEVICES",
        [
            "APPTAINERENV_CUDA_VISIBLE_DEVICES",
            "SINGULARITYENV_CUDA_VISIBLE_DEVICES",
        ],
    ),
    (
        "no_grpc_proxy",
        ["APPTAINERENV_no_grpc_proxy", "SINGULARITYENV_no_grpc_proxy"],
    ),
    (
        "DTENSOR_JOBS",
        ["APPTAINERENV_DTENSOR_JOBS", "SINGULARITYENV_DTENSOR_JOBS"],
    ),
    (
        "TF_USE_LEGACY_KERAS",
        [
            "APPTAINERENV_TF_USE_LEGACY_KERAS",
            "SINGULARITYENV_TF_USE_LEGACY_KERAS",
        ],
    ),
    (
        "DTENSOR_CLIENT_ID",
        [
            "APPTAINERENV_DTENSOR_CLIENT_ID",
            "SINGULARITYENV_DTENSOR_CLIENT_ID",
        ],
    ),
    (
        "JAX_COORDINATOR_ADDRESS",
        [
            "APPTAINERENV_JAX_COORDINATOR_ADDRESS",
            "SINGULARITYENV_JAX_COORDINATOR_ADDRESS",
        ],
    ),
    (
        "JAX_LOCAL_DEVICE_IDS",
        [
            "APPTAINERENV_JAX_LOCAL_DEVICE_IDS",
            "SINGULARITYENV_JAX_LOCAL_DEVICE_IDS",
        ],
    ),
    (
        "KERAS_BACKEND",
        ["APPTAINERENV_KERAS_BACKEND", "SINGULARITYENV_KERAS_BACKEND"],
    ),
    (
        "KERAS_DISTRIBUTION_JOB_ADDRESSES",
        [
            "APPTAINERENV_KERAS_DISTRIBUTION_JOB_ADDRESSES",
            "SINGULARITYENV_KERAS_DISTRIBUTION_JOB_ADDRESSES",
        ],
    ),
    (
        "KERAS_DISTRIBUTION_NUM_PROCESSES",
        [
            "APPTAINERENV_KERAS_DISTRIBUTION_NUM_PROCESSES",
            "SINGULARITYENV_KERAS_DISTRIBUTION_NUM_PROCESSES",
        ],
    ),
    (
        "KERAS_DISTRIBUTION_PROCESS_ID",
        [
            "APPTAINERENV_KERAS_DISTRIBUTION_PROCESS_ID",
            "SINGULARITYENV_KERAS_DISTRIBUTION_PROCESS_ID",
        ],
    ),
    (
        "KERASTUNER_TUNER_ID",
        [
            "APPTAINERENV_KERASTUNER_TUNER_ID",
            "SINGULARITYENV_KERASTUNER_TUNER_ID",
        ],
    ),
    (
        "KERASTUNER_ORACLE_IP",
        [
            "APPTAINERENV_KERASTUNER_ORACLE_IP",
            "SINGULARITYENV_KERASTUNER_ORACLE_IP",
        ],
    ),
    (
        "KERASTUNER_ORACLE_PORT",
        [
            "APPTAINERENV_KERASTUNER_ORACLE_PORT",
            "SINGULARITYENV_KERASTUNER_ORACLE_PORT",
        ],
    ),
    (
        "CUDA_DEVICE_ORDER",
        [
            "APPTAINERENV_CUDA_DEVICE_ORDER",
            "SINGULARITYENV_CUDA_DEVICE_ORDER",
        ],
    ),
    (
        "NCCL_SOCKET_IFNAME",
        [
            "APPTAINERENV_NCCL_SOCKET_IFNAME",
            "SINGULARITYENV_NCCL_SOCKET_IFNAME",
        ],
    ),
    (
        "GLOO_SOCKET_IFNAME",
        [
            "APPTAINERENV_GLOO_SOCKET_IFNAME",
            "SINGULARITYENV_GLOO_SOCKET_IFNAME",
        ],
    ),
    (
        "JAX_COORDINATOR_BIND_ADDRESS",
        [
            "APPTAINERENV_JAX_COORDINATOR_BIND_ADDRESS",
            "SINGULARITYENV_JAX_COORDINATOR_BIND_ADDRESS",
        ],
    ),
    (
        "MASTER_ADDR",
        ["APPTAINERENV_MASTER_ADDR", "SINGULARITYENV_MASTER_ADDR"],
    ),
    (
        "MASTER_PORT",
        ["APPTAINERENV_MASTER_PORT", "SINGULARITYENV_MASTER_PORT"],
    ),
    ("RANK", ["APPTAINERENV_RANK", "SINGULARITYENV_RANK"]),
    (
        "WORLD_SIZE",
        ["APPTAINERENV_WORLD_SIZE", "SINGULARITYENV_WORLD_SIZE"],
    ),
    (
        "LOCAL_RANK",
        ["APPTAINERENV_LOCAL_RANK", "SINGULARITYENV_LOCAL_RANK"],
    ),
    (
        "LOCAL_WORLD_SIZE",
        [
            "APPTAINERENV_LOCAL_WORLD_SIZE",
            "SINGULARITYENV_LOCAL_WORLD_SIZE",
        ],
    ),
    (
        "GROUP_RANK",
        ["APPTAINERENV_GROUP_RANK", "SINGULARITYENV_GROUP_RANK"],
    ),
    (
        "NODE_RANK",
        ["APPTAINERENV_NODE_RANK", "SINGULARITYENV_NODE_RANK"],
    ),
    (
        "PET_NNODES",
        ["APPTAINERENV_PET_NNODES", "SINGULARITYENV_PET_NNODES"],
    ),
    (
        "PET_NODE_RANK",
        ["APPTAINERENV_PET_NODE_RANK", "SINGULARITYENV_PET_NODE_RANK"],
    ),
    (
        "PET_MASTER_ADDR",
        [
            "APPTAINERENV_PET_MASTER_ADDR",
            "SINGULARITYENV_PET_MASTER_ADDR",
        ],
    ),
    (
        "PET_MASTER_PORT",
        [
            "APPTAINERENV_PET_MASTER_PORT",
            "SINGULARITYENV_PET_MASTER_PORT",
        ],
    ),
];

/// The Apptainer and SingularityCE names of a variable tfcluster sets (none for another).
pub fn apptainer_names(name: &str) -> &'static [&'static str] {
    APPTAINER_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&[], |(_, names)| names)
}

/// Whether a variable in a task's environment reaches a program under `--cleanenv`: it is one
/// of Apptainer's names, or has them. A variable tfcluster sets without them would not.
pub fn reaches_apptainer(name: &str) -> bool {
    APPTAINER_NAMES
        .iter()
        .any(|(own, names)| *own == name || names.contains(&name))
}

/// The longest name variable `name` may be set under in a task: its own, or, when the
/// Apptainer names may be set too (`apptainer` = `apptainer_env` is not `no`), the longest of
/// those. Linux's limit applies to each `NAME=value` string, so a step's size check uses it.
pub fn longest_name(name: &'static str, apptainer: bool) -> &'static str {
    let names = if apptainer {
        apptainer_names(name)
    } else {
        &[]
    };
    names
        .iter()
        .copied()
        .chain([name])
        .max_by_key(|n| n.len())
        .expect("at least the name itself")
}

/// Appends every variable of a task's list again under the names `runtimes` read
/// (Apptainer's, SingularityCE's), with the same value (a borrowed value, such as the rendered
/// TF_CONFIG, is not copied).
pub fn add_apptainer_names(set: &mut Vec<(&'static str, Cow<'_, str>)>, runtimes: Runtimes) {
    if runtimes == Runtimes::NONE {
        return;
    }
    for i in 0..set.len() {
        let names = apptainer_names(set[i].0);
        let wanted = [runtimes.apptainer, runtimes.singularity];
        for (&name, _) in names.iter().zip(wanted).filter(|(_, on)| *on) {
            let value = set[i].1.clone();
            set.push((name, value));
        }
    }
}
