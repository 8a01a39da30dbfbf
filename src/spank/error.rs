//! Every way the SPANK shell itself can fail, with the message the user sees (the core's own
//! errors pass through unchanged). `tests/errors.rs` lists each message.

use super::handle::SpankError;
use crate::core::error::OnError;
use crate::core::Error;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShellError {
    #[error(transparent)]
    Core(#[from] Error),
    #[error("cannot read {name} from the job environment: {err}")]
    Env { name: &'static str, err: SpankError },
    #[error("{name} is not set; is this an srun job step?")]
    Missing { name: &'static str },
    #[error("cannot get {what} from Slurm: {err}")]
    Item { what: &'static str, err: SpankError },
    #[error("cannot get the global id of local task {task} from Slurm: {err}")]
    GlobalId { task: u32, err: SpankError },
    #[error("cannot set {name} for the task: {err}")]
    SetEnv { name: &'static str, err: SpankError },
    #[error("cannot read SLURM_HOSTFILE {path}: {reason}")]
    Hostfile { path: String, reason: String },
    #[error("cannot pass the task order to the nodes: {reason}")]
    PassOrder { reason: String },
    #[error(
        "node {node} cannot give the step its ports: {reason}; no task of the step runs on this \
         node, and the step is stopped on every node (when the reason is the node's files, ask \
         the admin to let slurmstepd write /run/tfcluster)"
    )]
    Ports { node: String, reason: String },
    #[error(
        "isolate=yes: node {node} cannot install the step's firewall: {reason}; the step is \
         stopped, so that no TensorFlow server of it runs open to other users"
    )]
    Isolation { node: String, reason: String },
    #[error(
        "{error}; this --tf-cluster came from the job's environment (#SBATCH --tf-cluster, or \
         {ENV_OPTION}), which srun applies to every step: a step that is not TensorFlow's opts \
         out with srun --tf-cluster=off"
    )]
    FromEnvironment { error: Box<ShellError> },
    #[error(
        "could not stop the step's other tasks ({reason}); they run until they exit or reach \
         the time limit"
    )]
    Kill { reason: String },
}

/// The environment form of `--tf-cluster`, which sbatch and salloc put in the job's environment
/// for every srun inside it.
pub const ENV_OPTION: &str = "SLURM_SPANK__SLURM_SPANK_OPTION_tfcluster_tf_cluster";

impl ShellError {
    /// What this error does to the step ([`OnError`]): the core's errors say it themselves
    /// ([`Error::on_error`]); a node that cannot isolate the step, or cannot give it its ports,
    /// keeps every task of the node from running, whether plugstack.conf says `required` or
    /// `optional` (`optional` would run a task whose hook failed), said once by its first task,
    /// which stops the step: the other nodes' tasks would otherwise run with a TF_CONFIG that
    /// names a port of another job, or wait for these; an error from the job's environment
    /// does what the error does; the shell's other errors concern the task alone.
    pub fn on_error(&self) -> OnError {
        match self {
            ShellError::Core(e) => e.on_error(),
            ShellError::Isolation { .. } | ShellError::Ports { .. } => OnError::StopFromFirstTask,
            ShellError::FromEnvironment { error } => error.on_error(),
            _ => OnError::TaskOnly,
        }
    }
}
