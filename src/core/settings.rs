//! Admin settings (the words after the plugin path in plugstack.conf) and the per-job
//! overrides a user may put in `--tf-cluster` (the keys [`KEYS`] marks). Both are parsed
//! strictly: an unknown key or a malformed value is an error that names the key, never a
//! silently ignored word.

use super::address::AddressFormat;
use super::container::ApptainerEnv;
use super::error::{Error, Result};
use super::isolation;
use super::keras::Keras;
use super::ports::{check_base, PortPolicy};
use super::spec::Role;
use super::text::decimal;

/// One setting: its name, whether a job may give it in `--tf-cluster` too (the others are the
/// admin's alone), what the documentation says of it, and how a value is read into [`Settings`]
/// (`Err`: what a value must look like, for the message).
pub struct Key {
    pub name: &'static str,
    pub per_job: bool,
    /// For the documentation (docs/admin-guide.md's configuration reference and the man page,
    /// checked against this table by
    /// tests/settings.rs): the default, the values it takes, an example, and what it does.
    pub default: &'static str,
    pub values: &'static str,
    pub example: &'static str,
    pub meaning: &'static str,
    pub set: fn(&mut Settings, &str) -> std::result::Result<(), &'static str>,
}

const PORT: &str = "expected a port number 1-65535";
const SWITCH: &str = "expected auto, yes or no";
const YES_NO: &str = "expected yes or no";

/// Every setting, in the order messages list them: the one table of setting names, and
/// [`Settings::set`] is a lookup in it.
#[rustfmt::skip]
pub const KEYS: &[Key] = &[
    Key { name: "port_base", per_job: true,
          default: "unset", values: "1-65535", example: "`port_base=24000`",
          meaning: "TensorFlow's scheme: local slot k listens on N+k",
          set: |s, v| {
        s.port_base = Some(port(v).ok_or(PORT)?);
        Ok(())
    } },
    Key { name: "port_range", per_job: false,
          default: "`20000-32767`", values: "`LO-HI`", example: "`port_range=40000-44999`",
          meaning: "automatic ports when the step has no Slurm reservation",
          set: |s, v| {
        s.port_range = v
            .split_once('-')
            .and_then(|(lo, hi)| Some((port(lo)?, port(hi)?)))
            .filter(|(lo, hi)| lo <= hi)
            .ok_or("expected LO-HI with 1 <= LO <= HI <= 65535")?;
        Ok(())
    } },
    Key { name: "port_block", per_job: false,
          default: "`64`", values: "1-65535", example: "`port_block=16`",
          meaning: "the block of the range a job's step lies in (steps of a job take consecutive blocks; a step uses as many of its block's ports as its busiest node needs)",
          set: |s, v| {
        s.port_block = port(v).ok_or("expected a number of ports 1-65535")?;
        Ok(())
    } },
    Key { name: "address", per_job: false,
          default: "`%h`", values: "a template with `%h`", example: "`address=%h-ib`",
          meaning: "the address TensorFlow dials for node `%h`",
          set: |s, v| {
        s.address = AddressFormat::parse(v)
            .ok_or("expected a template with %h for the node name, e.g. %h-ib")?;
        Ok(())
    } },
    Key { name: "gpus", per_job: true,
          default: "`split`", values: "`split`, `keep`", example: "`gpus=keep`",
          meaning: "split the node's GPUs among its tasks, or leave `CUDA_VISIBLE_DEVICES` alone",
          set: |s, v| {
        s.gpus = match v {
            "split" => GpuPolicy::Split,
            "keep" => GpuPolicy::Keep,
            _ => return Err("expected split or keep"),
        };
        Ok(())
    } },
    Key { name: "gpu_affinity", per_job: true,
          default: "`yes`", values: "`yes`, `no`", example: "`gpu_affinity=no`",
          meaning: "with `gpus=split`, give each task the node's GPUs closest to the CPUs Slurm bound it to (each GPU's local CPUs from the node's PCI tree); a contiguous slice in Slurm's order where the node or Slurm does not say (no binding, no PCI entry, a GPU it cannot place), and always with `no`. `srun -v` says which, for each task",
          set: |s, v| {
        s.gpu_affinity = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "gpu_roles", per_job: true,
          default: "`all`", values: "`all`, `none`, roles joined by `+`", example: "`gpu_roles=chief+worker`",
          meaning: "roles that get GPUs; the others get `CUDA_VISIBLE_DEVICES=` (empty)",
          set: |s, v| {
        s.gpu_roles = RoleSet::parse(v)
            .ok_or("expected all, none, or roles joined by + (e.g. chief+worker)")?;
        Ok(())
    } },
    Key { name: "rpc_layer", per_job: true,
          default: "unset", values: "a protocol name", example: "`rpc_layer=grpc`",
          meaning: "adds `\"rpc_layer\"` to TF_CONFIG",
          set: |s, v| {
        let ok = !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"+_-".contains(&b));
        if !ok {
            return Err("expected a protocol name such as grpc or grpc+verbs");
        }
        s.rpc_layer = Some(v.to_string());
        Ok(())
    } },
    Key { name: "end_with_chief", per_job: true,
          default: "`auto`", values: "`auto`, `yes`, `no`", example: "`end_with_chief=yes`",
          meaning: "when the chief (or master, else worker 0) exits, end the rest of the step; `auto`: when the spec has `ps`, or with `tuner=yes`",
          set: |s, v| {
        s.end_with_chief = switch(v).ok_or(SWITCH)?;
        Ok(())
    } },
    Key { name: "fail_fast", per_job: true,
          default: "`auto`", values: "`auto`, `yes`, `no`", example: "`fail_fast=no`",
          meaning: "when a task other than the evaluator fails (non-zero exit, crash signal, OOM kill), end the rest of the step; `auto`: except a worker of a spec with `ps` that fails once the chief has connected to it (ParameterServerStrategy goes on without it)",
          set: |s, v| {
        s.fail_fast = switch(v).ok_or(SWITCH)?;
        Ok(())
    } },
    Key { name: "preemption_exit", per_job: true,
          default: "`42`", values: "1-255", example: "`preemption_exit=143`",
          meaning: "the exit code that means \"checkpointed, preempted\" (TensorFlow's `PreemptionCheckpointHandler` default); never a failure",
          set: |s, v| {
        s.preemption_exit = decimal::<u8>(v.trim())
            .filter(|&code| code >= 1)
            .ok_or("expected an exit code 1-255")?;
        Ok(())
    } },
    Key { name: "grpc_proxy_bypass", per_job: true,
          default: "`yes`", values: "`yes`, `no`", example: "`grpc_proxy_bypass=no`",
          meaning: "when the job's environment sets a proxy (`http_proxy`, `https_proxy`, `grpc_proxy`), set `no_grpc_proxy` to the user's `no_grpc_proxy` or `no_proxy` entries plus every cluster address, so gRPC reaches the other tasks directly",
          set: |s, v| {
        s.grpc_proxy_bypass = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "even_gpus", per_job: true,
          default: "`auto`", values: "`auto`, `yes`, `no`", example: "`even_gpus=no`",
          meaning: "give every GPU task of the step the busiest node's share of GPUs, so all-reduce workers have equal counts; `auto`: when the spec has no `ps`, with `dtensor=yes`, `jax=yes` or `keras=3`",
          set: |s, v| {
        s.even_gpus = switch(v).ok_or(SWITCH)?;
        Ok(())
    } },
    Key { name: "evaluator_cluster", per_job: true,
          default: "`self`", values: "`self`, `training`", example: "`evaluator_cluster=training`",
          meaning: "the evaluator's own `cluster`: itself alone (TensorFlow's documented shape), or the trainers plus itself (Estimator's `RunConfig` demands a chief there)",
          set: |s, v| {
        s.evaluator_cluster = match v {
            "self" => EvaluatorCluster::Own,
            "training" => EvaluatorCluster::Training,
            _ => return Err("expected self or training"),
        };
        Ok(())
    } },
    Key { name: "dtensor", per_job: true,
          default: "`no`", values: "`yes`, `no`", example: "`dtensor=yes`",
          meaning: "also set `DTENSOR_JOBS` and `DTENSOR_CLIENT_ID` for DTensor's multi-client mesh",
          set: |s, v| {
        s.dtensor = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "apptainer_env", per_job: true,
          default: "`yes`", values: "`yes`, `always`, `auto`, `no`", example: "`apptainer_env=auto`",
          meaning: "also set every variable as `APPTAINERENV_X` where Apptainer is installed and `SINGULARITYENV_X` where SingularityCE is (found once per node and step in the job's `PATH`, looked at as the job's user, and the usual prefixes), which reach the program through `--cleanenv`/`--containall` and win over the image's own, in every task, however it starts the container (a wrapper script, `bash -c`), and nothing on a node with neither; `always`: both names in every task, found or not; `auto`: both, only when the task's program is `apptainer` or `singularity`; `no`: never",
          set: |s, v| {
        s.apptainer_env = ApptainerEnv::parse(v).ok_or("expected yes, always, auto or no")?;
        Ok(())
    } },
    Key { name: "keras", per_job: true,
          default: "`auto`", values: "`auto`, `2`, `3`", example: "`keras=2`",
          meaning: "`2`: set `TF_USE_LEGACY_KERAS=1` in every task, so `tf.keras` is Keras 2 (the `tf_keras` package, which must match TensorFlow's minor version) and `model.fit` trains under MultiWorkerMirroredStrategy and ParameterServerStrategy on TensorFlow 2.16 and later; `3`: Keras 3 on JAX across the step's tasks, `keras.distribution.initialize()` with no arguments: set `KERAS_BACKEND=jax`, `KERAS_DISTRIBUTION_JOB_ADDRESSES` (rank 0's address and port, the coordinator, all Keras reads of it), `KERAS_DISTRIBUTION_NUM_PROCESSES`, `KERAS_DISTRIBUTION_PROCESS_ID` (the rank) and what `jax=yes` sets; `auto`: set nothing (TensorFlow's own default)",
          set: |s, v| {
        s.keras = Keras::parse(v).ok_or("expected auto, 2 or 3")?;
        Ok(())
    } },
    Key { name: "jax", per_job: true,
          default: "`no`", values: "`yes`, `no`", example: "`jax=yes`",
          meaning: "`jax.distributed.initialize()` with no arguments across the step's tasks: set `JAX_COORDINATOR_ADDRESS` (rank 0's address and its port of the step; in rank 0's task also `JAX_COORDINATOR_BIND_ADDRESS`, the same, where rank 0's node resolves its address to none but addresses other nodes reach, so the coordinator does not listen on every interface) and, for a task whose GPU slice tfcluster set, `JAX_LOCAL_DEVICE_IDS` (`0,...,k-1`: the whole slice); JAX takes the process count and id from Slurm",
          set: |s, v| {
        s.jax = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "torch", per_job: true,
          default: "`no`", values: "`yes`, `no`", example: "`torch=yes`",
          meaning: "PyTorch across the step's tasks, `init_process_group()` and torchrun with no rendezvous arguments: set `MASTER_ADDR` and `MASTER_PORT` (rank 0's address and its port of the step, where torch's store listens), `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `GROUP_RANK` and `NODE_RANK` (nodes numbered from rank 0's), and in a step of one task per node torchrun's `PET_NNODES`, `PET_NODE_RANK`, `PET_MASTER_ADDR` and `PET_MASTER_PORT`; they win over the job's own; the spec must be workers alone",
          set: |s, v| {
        s.torch = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "tuner", per_job: true,
          default: "`no`", values: "`yes`, `no`", example: "`tuner=yes`",
          meaning: "Keras Tuner's distributed search: the chief is the oracle (`KERASTUNER_TUNER_ID=chief`), every other task a tuner (`tuner0`, `tuner1`, ... in rank order), all with `KERASTUNER_ORACLE_IP` and `KERASTUNER_ORACLE_PORT` (the chief's address and port); the spec needs a chief",
          set: |s, v| {
        s.tuner = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "socket_ifname", per_job: true,
          default: "`yes`", values: "`yes`, `no`", example: "`socket_ifname=no`",
          meaning: "set `NCCL_SOCKET_IFNAME` and `GLOO_SOCKET_IFNAME` in every task to the node's interface that holds its step address (the one TF_CONFIG and `address=` name, as the node resolves it), so the collectives use the network the step's servers use; none where that address resolves to a loopback address, to no interface or to two, nor in a task whose job sets its own",
          set: |s, v| {
        s.socket_ifname = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "timing", per_job: false,
          default: "`no`", values: "`yes`, `no`", example: "`timing=yes`",
          meaning: "plugstack.conf only, for measuring: each hook logs the CPU tfcluster spent in it and the page faults its thread took, by phase (`tfcluster timing: ...` in slurmd's log for slurmstepd, its tasks and the epilog; in srun's output with `srun -v`), for the account in docs/performance.md",
          set: |s, v| {
        s.timing = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
    Key { name: "isolate", per_job: false,
          default: "`no`", values: "`yes`, `no`", example: "`isolate=yes`",
          meaning: "plugstack.conf only: each node of a step admits connections to the step's TensorFlow ports only from the job's uid on the step's nodes, at the node's own step address, through an nftables table its slurmstepd owns; needs libnftables on the nodes, and `port_range` covering tfcluster's own ports and `port_base` (Slurm's reserved ports need not be). The code's default is `no`; the packaged snippet turns it on (see [Security](#security))",
          set: |s, v| {
        s.isolate = yes_no(v).ok_or(YES_NO)?;
        Ok(())
    } },
];

/// The settings plugstack.conf takes, for messages: `port_base, port_range, ...`.
pub fn admin_keys() -> String {
    KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// The settings a job may give in `--tf-cluster`, for messages.
fn job_keys() -> String {
    KEYS.iter()
        .filter(|k| k.per_job)
        .map(|k| k.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A switch whose `auto` depends on the step's spec (see each setting for what `auto` means).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    Auto,
    Yes,
    No,
}

impl Switch {
    /// On or off, given what `auto` means for this step.
    pub fn on(self, auto: bool) -> bool {
        match self {
            Switch::Auto => auto,
            Switch::Yes => true,
            Switch::No => false,
        }
    }
}

/// What the evaluator's own TF_CONFIG lists in `cluster` (the trainers never list it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvaluatorCluster {
    /// `{"evaluator":[its own address]}`, TensorFlow's documented shape: the evaluator does not
    /// know the training cluster, so nothing it builds (e.g. MultiWorkerMirroredStrategy, whose
    /// health check would wait for every task it is told about) waits for a trainer.
    Own,
    /// The trainers' cluster plus the evaluator itself: what TF 1.x Estimator's RunConfig
    /// demands (a `chief` in `cluster`, even on the evaluator, which it then ignores).
    Training,
}

/// The default automatic port range: below Linux's ephemeral range (32768-60999), so no
/// outgoing connection can already hold one of these ports, and above the usual services.
pub const DEFAULT_PORT_RANGE: (u16, u16) = (20000, 32767);
/// Ports per step block: the most tasks per node the automatic scheme expects (a step with
/// more takes a wider block).
pub const DEFAULT_PORT_BLOCK: u16 = 64;

/// What to do with `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuPolicy {
    /// Split the node's GPU tokens among its GPU tasks (default).
    Split,
    /// Leave `CUDA_VISIBLE_DEVICES` exactly as Slurm set it.
    Keep,
}

/// A set of roles, e.g. the roles that get GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleSet(u8);

impl RoleSet {
    pub const ALL: RoleSet = RoleSet(0b1_1111);
    pub const NONE: RoleSet = RoleSet(0);

    pub fn contains(self, role: Role) -> bool {
        self.0 & (1 << role as u8) != 0
    }

    /// `all`, `none`, or roles joined by `+` (`chief+worker`): a comma already separates
    /// `--tf-cluster` items.
    fn parse(text: &str) -> Option<RoleSet> {
        match text {
            "all" => Some(RoleSet::ALL),
            "none" => Some(RoleSet::NONE),
            _ => text.split('+').try_fold(RoleSet::NONE, |set, name| {
                Role::parse(name.trim())
                    .ok()
                    .map(|r| RoleSet(set.0 | 1 << r as u8))
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `port_base=`: TensorFlow's scheme; when set it wins over the range.
    pub port_base: Option<u16>,
    /// `port_range=LO-HI` and `port_block=N`: the automatic scheme.
    pub port_range: (u16, u16),
    pub port_block: u16,
    pub address: AddressFormat,
    pub gpus: GpuPolicy,
    /// With `gpus=split`: each task's GPUs are the closest to its CPUs ([`super::gpu_affinity`]).
    pub gpu_affinity: bool,
    pub gpu_roles: RoleSet,
    pub rpc_layer: Option<String>,
    /// When the task that decides the job's result (the chief, else worker 0) exits, end the
    /// rest of the step. `auto`: when the spec has `ps` (parameter servers and
    /// ParameterServerStrategy's workers serve forever, so the step would run to its limit).
    pub end_with_chief: Switch,
    /// When a trainer (any task but an evaluator) fails, end the rest of the step; `auto`: not
    /// for a worker of a spec with ps that the chief had connected to ([`super::ending`]).
    pub fail_fast: Switch,
    /// The exit code that means "checkpointed, preempted" (TensorFlow's
    /// `PreemptionCheckpointHandler` exits 42): never a failure.
    pub preemption_exit: u8,
    /// When a proxy is set, set `no_grpc_proxy` so gRPC reaches the cluster directly
    /// ([`super::proxy`]).
    pub grpc_proxy_bypass: bool,
    /// Give every GPU task of the step the same number of GPUs (the busiest node's share), so
    /// no worker has more than another. `auto`: when the spec has no `ps` (all-reduce
    /// training: MultiWorkerMirroredStrategy and DTensor need equal counts) or `dtensor` is on.
    pub even_gpus: Switch,
    pub evaluator_cluster: EvaluatorCluster,
    /// Also set DTensor's multi-client variables (`DTENSOR_JOBS`, `DTENSOR_CLIENT_ID`).
    pub dtensor: bool,
    /// Also set every variable under Apptainer's and SingularityCE's own names
    /// (`APPTAINERENV_TF_CONFIG`, ...), which reach the program through `--cleanenv` and
    /// `--containall` and win over the image's own definitions ([`ApptainerEnv`]).
    pub apptainer_env: ApptainerEnv,
    /// Which Keras `tf.keras` is in every task ([`super::keras`]).
    pub keras: Keras,
    /// JAX's own multi-process variables ([`super::jax`]); `keras=3` sets them too.
    pub jax: bool,
    /// PyTorch's `env://` and torchrun's variables ([`super::torch`]).
    pub torch: bool,
    /// The collectives' interface, `NCCL_SOCKET_IFNAME` and `GLOO_SOCKET_IFNAME`
    /// ([`super::collectives`]).
    pub socket_ifname: bool,
    /// Each hook logs its CPU by phase (`crate::spank::timing`).
    pub timing: bool,
    /// Keras Tuner's distributed search: the chief is the oracle ([`super::tuner`]).
    pub tuner: bool,
    /// Each node of a step lets only the job's own processes on the step's own nodes connect
    /// to the step's TensorFlow servers ([`super::isolation`]). The admin's alone: a job cannot
    /// turn it off.
    pub isolate: bool,
}

impl Settings {
    /// Whether a node reads its PCI tree to choose its tasks' GPUs ([`super::gpu_affinity`]):
    /// `gpus=split` with `gpu_affinity=yes`. A step and the check decide it here alike.
    pub fn gpus_by_affinity(&self) -> bool {
        self.gpus == GpuPolicy::Split && self.gpu_affinity
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            port_base: None,
            port_range: DEFAULT_PORT_RANGE,
            port_block: DEFAULT_PORT_BLOCK,
            address: AddressFormat::default(),
            gpus: GpuPolicy::Split,
            gpu_affinity: true,
            gpu_roles: RoleSet::ALL,
            rpc_layer: None,
            end_with_chief: Switch::Auto,
            fail_fast: Switch::Auto,
            preemption_exit: 42,
            grpc_proxy_bypass: true,
            even_gpus: Switch::Auto,
            evaluator_cluster: EvaluatorCluster::Own,
            dtensor: false,
            apptainer_env: ApptainerEnv::Found,
            keras: Keras::Auto,
            jax: false,
            torch: false,
            socket_ifname: true,
            timing: false,
            tuner: false,
            isolate: false,
        }
    }
}

impl Settings {
    /// The port scheme these settings give, whatever order their words came in.
    pub fn ports(&self) -> PortPolicy {
        match self.port_base {
            Some(base) => PortPolicy::Base(u32::from(base)),
            None => PortPolicy::Range {
                lo: self.port_range.0,
                hi: self.port_range.1,
                block: self.port_block,
            },
        }
    }

    /// srun, before launch, with `tasks` over `nodes`: `port_base` must leave every task a port
    /// (and, with `isolate=yes`, lie in `port_range`). The busiest node runs at least
    /// tasks/nodes (rounded up); each node checks its real count again.
    pub fn check_ports_before_launch(&self, tasks: u32, nodes: u32) -> Result<()> {
        if let PortPolicy::Base(base) = self.ports() {
            let busiest = tasks.div_ceil(nodes.max(1));
            check_base(base, busiest as usize)?;
            if self.isolate {
                isolation::rules::check_ports(self.port_range, base..base + busiest)?;
            }
        }
        Ok(())
    }

    /// Parses plugstack.conf arguments (`key=value` words).
    pub fn from_plugstack<S: AsRef<str>>(args: &[S]) -> Result<Settings> {
        let mut settings = Settings::default();
        for word in args {
            let word = word.as_ref();
            let (key, value) = word.split_once('=').ok_or_else(|| Error::UnknownSetting {
                key: word.to_string(),
                known: admin_keys(),
            })?;
            settings.set("plugstack.conf", key, value)?;
        }
        Ok(settings)
    }

    /// Applies a job's `--tf-cluster` overrides on top of the admin's settings.
    pub fn with_overrides(&self, overrides: &[(String, String)]) -> Result<Settings> {
        let mut settings = self.clone();
        for (key, value) in overrides {
            if !KEYS.iter().any(|k| k.per_job && k.name == key) {
                return Err(Error::UnknownOverride {
                    key: key.clone(),
                    allowed: job_keys(),
                });
            }
            settings.set("--tf-cluster", key, value)?;
        }
        Ok(settings)
    }

    /// Sets `key` from `value`, as [`KEYS`] says.
    fn set(&mut self, origin: &'static str, key: &str, value: &str) -> Result<()> {
        let Some(setting) = KEYS.iter().find(|k| k.name == key) else {
            return Err(Error::UnknownSetting {
                key: key.to_string(),
                known: admin_keys(),
            });
        };
        (setting.set)(self, value).map_err(|expected| Error::BadSetting {
            origin,
            key: key.to_string(),
            value: value.to_string(),
            expected,
        })
    }
}

fn switch(text: &str) -> Option<Switch> {
    match text {
        "auto" => Some(Switch::Auto),
        "yes" => Some(Switch::Yes),
        "no" => Some(Switch::No),
        _ => None,
    }
}

fn yes_no(text: &str) -> Option<bool> {
    match text {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

fn port(text: &str) -> Option<u16> {
    decimal::<u16>(text.trim()).filter(|&p| p >= 1)
}
