//! Admin settings (the words after the plugin path in plugstack.conf) and the per-job
//! overrides a user may put in `--tf-cluster` (the keys [`KEYS`] marks). Both are parsed strictly: an unknown key or a malformed value is an error that
//! names the key, never a silently ignored word.

use super::address::AddressFormat;
use super::error::{Error, Result};
use super::ports::PortPolicy;
use super::spec::Role;
use super::text::decimal;

/// Every setting, in the order messages list them, and whether a job may give it in
/// `--tf-cluster` too (the others are the admin's alone). The one list of setting names.
pub const KEYS: &[(&str, bool)] = &[
    ("port_base", true),
    ("port_range", false),
    ("port_block", false),
    ("address", false),
    ("gpus", true),
    ("gpu_roles", true),
    ("rpc_layer", true),
    ("end_with_chief", true),
    ("fail_fast", true),
    ("preemption_exit", true),
    ("grpc_proxy_bypass", true),
    ("even_gpus", true),
    ("evaluator_cluster", true),
    ("dtensor", true),
    ("apptainer_env", true),
    ("isolate", false),
];

/// The settings plugstack.conf takes, for messages: `port_base, port_range, ...`.
pub fn admin_keys() -> String {
    KEYS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
}

/// The settings a job may give in `--tf-cluster`, for messages.
pub fn job_keys() -> String {
    KEYS.iter()
        .filter(|(_, job)| *job)
        .map(|(k, _)| *k)
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
    pub gpu_roles: RoleSet,
    pub rpc_layer: Option<String>,
    /// When the task that decides the job's result (the chief, else worker 0) exits, end the
    /// rest of the step. `auto`: when the spec has `ps` (parameter servers and
    /// ParameterServerStrategy's workers serve forever, so the step would run to its limit).
    pub end_with_chief: Switch,
    /// When a trainer (any task but an evaluator) fails, end the rest of the step
    /// ([`super::ending`]).
    pub fail_fast: bool,
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
    /// `--containall` and win over the image's own definitions. `auto`: when the task's program
    /// is `apptainer` or `singularity` ([`super::container::runs_apptainer`]).
    pub apptainer_env: Switch,
    /// Each node of a step lets only the job's own processes on the step's own nodes connect
    /// to the step's TensorFlow servers ([`super::isolation`]). The admin's alone: a job cannot
    /// turn it off.
    pub isolate: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            port_base: None,
            port_range: DEFAULT_PORT_RANGE,
            port_block: DEFAULT_PORT_BLOCK,
            address: AddressFormat::default(),
            gpus: GpuPolicy::Split,
            gpu_roles: RoleSet::ALL,
            rpc_layer: None,
            end_with_chief: Switch::Auto,
            fail_fast: true,
            preemption_exit: 42,
            grpc_proxy_bypass: true,
            even_gpus: Switch::Auto,
            evaluator_cluster: EvaluatorCluster::Own,
            dtensor: false,
            apptainer_env: Switch::Auto,
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
            if !KEYS.contains(&(key.as_str(), true)) {
                return Err(Error::UnknownOverride {
                    key: key.clone(),
                    allowed: job_keys(),
                });
            }
            settings.set("--tf-cluster", key, value)?;
        }
        Ok(settings)
    }

    fn set(&mut self, origin: &'static str, key: &str, value: &str) -> Result<()> {
        let bad = |expected: &'static str| Error::BadSetting {
            origin,
            key: key.to_string(),
            value: value.to_string(),
            expected,
        };
        match key {
            "port_base" => {
                self.port_base =
                    Some(port(value).ok_or_else(|| bad("expected a port number 1-65535"))?);
            }
            "port_range" => {
                let (lo, hi) = value
                    .split_once('-')
                    .and_then(|(lo, hi)| Some((port(lo)?, port(hi)?)))
                    .filter(|(lo, hi)| lo <= hi)
                    .ok_or_else(|| bad("expected LO-HI with 1 <= LO <= HI <= 65535"))?;
                self.port_range = (lo, hi);
            }
            "port_block" => {
                self.port_block =
                    port(value).ok_or_else(|| bad("expected a number of ports 1-65535"))?;
            }
            "address" => {
                self.address = AddressFormat::parse(value).ok_or_else(|| {
                    bad("expected a template with %h for the node name, e.g. %h-ib")
                })?;
            }
            "gpus" => {
                self.gpus = match value {
                    "split" => GpuPolicy::Split,
                    "keep" => GpuPolicy::Keep,
                    _ => return Err(bad("expected split or keep")),
                };
            }
            "gpu_roles" => {
                self.gpu_roles = RoleSet::parse(value).ok_or_else(|| {
                    bad("expected all, none, or roles joined by + (e.g. chief+worker)")
                })?;
            }
            "rpc_layer" => {
                let ok = !value.is_empty()
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+_-".contains(&b));
                if !ok {
                    return Err(bad("expected a protocol name such as grpc or grpc+verbs"));
                }
                self.rpc_layer = Some(value.to_string());
            }
            "end_with_chief" => {
                self.end_with_chief =
                    switch(value).ok_or_else(|| bad("expected auto, yes or no"))?;
            }
            "fail_fast" => {
                self.fail_fast = yes_no(value).ok_or_else(|| bad("expected yes or no"))?;
            }
            "preemption_exit" => {
                self.preemption_exit = decimal::<u8>(value.trim())
                    .filter(|&code| code >= 1)
                    .ok_or_else(|| bad("expected an exit code 1-255"))?;
            }
            "even_gpus" => {
                self.even_gpus = switch(value).ok_or_else(|| bad("expected auto, yes or no"))?;
            }
            "grpc_proxy_bypass" => {
                self.grpc_proxy_bypass = yes_no(value).ok_or_else(|| bad("expected yes or no"))?;
            }
            "apptainer_env" => {
                self.apptainer_env =
                    switch(value).ok_or_else(|| bad("expected auto, yes or no"))?;
            }
            "isolate" => {
                self.isolate = yes_no(value).ok_or_else(|| bad("expected yes or no"))?;
            }
            "dtensor" => {
                self.dtensor = yes_no(value).ok_or_else(|| bad("expected yes or no"))?;
            }
            "evaluator_cluster" => {
                self.evaluator_cluster = match value {
                    "self" => EvaluatorCluster::Own,
                    "training" => EvaluatorCluster::Training,
                    _ => return Err(bad("expected self or training")),
                };
            }
            _ => {
                return Err(Error::UnknownSetting {
                    key: key.to_string(),
                    known: admin_keys(),
                });
            }
        }
        Ok(())
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
