//! What Slurm says of a step in slurmstepd, before anything is planned: its ids and kind
//! ([`Shape`]), the variables its plan is made of ([`StepVars`]), and Slurm's ids for the node's
//! tasks ([`gtids`]). Read only; the core decides what they mean.

use super::error::ShellError;
use super::handle::{Spank, U32Item};
use super::process;
use super::slurm;
use crate::core::layout::TASK_HOSTS_VAR;
use crate::core::{het, Component, ProxyEnv, StepInputs, StepKind};

/// What Slurm says of the step before anything is planned, read once, from what Slurm vouches
/// for: its ids and user (SPANK items), this component's node and task counts, which kind of
/// step it is (one job's, or a heterogeneous job's or step's), and, for a heterogeneous job's
/// step, its component jobs as slurmctld vouches for them; the node's name as slurmstepd has
/// it. The stop, the components' probe, the claims, the firewall (and its hand-over), the
/// workers' watcher and the check all take it.
pub struct Shape {
    pub job_id: u32,
    pub step_id: u32,
    pub nodes: u32,
    pub tasks: u32,
    pub kind: StepKind,
    /// The job's user (`S_JOB_UID`): whose the step's jobs must be, whose connections count,
    /// whom the firewall admits.
    pub uid: u32,
    /// This node's name as slurmstepd has it ([`process::node_name`]): every file a node keeps
    /// (claims, holders) and every line about the node names it; never the job's environment.
    pub node: Option<String>,
    /// A heterogeneous job's component jobs, each one slurmctld says is a component of that
    /// job and the step's user's ([`het::vouched_job_ids`]), or why they were refused; empty
    /// for any other step.
    pub het_jobs: Result<Vec<u32>, crate::core::Error>,
}

impl Shape {
    pub fn read(sp: &Spank) -> Result<Shape, ShellError> {
        let env = |name: &'static str| sp.getenv(name).map_err(|err| ShellError::Env { name, err });
        let item = |it, what: &'static str| {
            sp.item_u32(it)
                .map_err(|err| ShellError::Item { what, err })
        };
        let (job_id, step_id) = (
            item(U32Item::JobId, "the job id")?,
            item(U32Item::StepId, "the step id")?,
        );
        let nodes = item(U32Item::Nodes, "the step's node count")?;
        let tasks = item(U32Item::TotalTasks, "the step's task count")?;
        let kind = Component {
            nodes,
            tasks,
            step_nodes: env("SLURM_STEP_NUM_NODES")?.as_deref(),
            step_tasks: env("SLURM_STEP_NUM_TASKS")?.as_deref(),
            het_size: env("SLURM_HET_SIZE")?.as_deref(),
        }
        .kind()?;
        let uid = item(U32Item::JobUid, "the job's user id")?;
        let het_jobs = match kind {
            StepKind::HetJob { size, .. } => het::vouched_job_ids(
                size,
                |name| sp.getenv(name).ok().flatten(),
                job_id,
                uid,
                &mut slurm::job_record,
            ),
            _ => Ok(Vec::new()),
        };
        Ok(Shape {
            job_id,
            step_id,
            nodes,
            tasks,
            kind,
            uid,
            node: process::node_name(),
            het_jobs,
        })
    }
}

/// The step's variables that [`StepInputs`] is made of, as slurmstepd has them.
pub struct StepVars {
    nodelist: String,
    tasks_per_node: String,
    distribution: Option<String>,
    plane_size: Option<String>,
    resv_ports: Option<String>,
    task_hosts: Option<String>,
    proxies: ProxyEnv,
}

impl StepVars {
    pub fn read(sp: &Spank) -> Result<StepVars, ShellError> {
        let env = |name: &'static str| sp.getenv(name).map_err(|err| ShellError::Env { name, err });
        let required = |name: &'static str| env(name)?.ok_or(ShellError::Missing { name });
        Ok(StepVars {
            nodelist: required("SLURM_STEP_NODELIST")?,
            tasks_per_node: required("SLURM_STEP_TASKS_PER_NODE")?,
            distribution: env("SLURM_DISTRIBUTION")?,
            plane_size: env("SLURM_DIST_PLANESIZE")?,
            resv_ports: env("SLURM_STEP_RESV_PORTS")?,
            task_hosts: env(TASK_HOSTS_VAR)?,
            proxies: ProxyEnv::read(env)?,
        })
    }

    /// `SLURM_STEP_RESV_PORTS` as the job's environment has it: the user's, until slurmctld
    /// vouches for it ([`crate::core::ports::Reservation`]).
    pub fn resv_ports(&self) -> Option<&str> {
        self.resv_ports.as_deref()
    }

    /// The inputs these variables give; the rest (ids, components, topology, the reserved
    /// ports) as the default.
    pub fn inputs(&self) -> StepInputs<'_> {
        StepInputs {
            nodelist: &self.nodelist,
            tasks_per_node: &self.tasks_per_node,
            distribution: self.distribution.as_deref(),
            plane_size: self.plane_size.as_deref(),
            task_hosts: self.task_hosts.as_deref(),
            proxies: self.proxies.clone(),
            ..Default::default()
        }
    }
}

/// The global ids Slurm gave this node's tasks (`S_JOB_LOCAL_TO_GLOBAL_ID`), in local order.
pub fn gtids(sp: &Spank) -> Result<Vec<u32>, ShellError> {
    let local = sp
        .item_u32(U32Item::LocalTasks)
        .map_err(|err| ShellError::Item {
            what: "the local task count",
            err,
        })?;
    (0..local)
        .map(|task| {
            sp.local_to_global(task)
                .map_err(|err| ShellError::GlobalId { task, err })
        })
        .collect()
}
