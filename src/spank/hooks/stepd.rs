//! slurmstepd (remote context): plan the step once per node, hand each task its part, and end
//! the step when the chief is done, when a trainer fails, or when the plan turns out wrong.

use super::stop::{self, Stop};
use super::{isolation, settings, state};
use crate::core::container::{self, Runtimes};
use crate::core::error::OnError;
use crate::core::het::Own;
use crate::core::layout::TASK_HOSTS_VAR;
use crate::core::plan::{self, UNSET_ON_ERROR};
use crate::core::tf_config::Renderers;
use crate::core::{
    gpus, Component, Error, ProxyEnv, Settings, Spec, StepInputs, StepKind, StepPlan,
};
use crate::spank::claims::{Claimant, Claimed};
use crate::spank::error::ShellError;
use crate::spank::ffi;
use crate::spank::handle::{self, Spank, U32Item};
use crate::spank::het;
use crate::spank::log;
use crate::spank::oci::NodeOci;
use crate::spank::oom;
use crate::spank::runtimes;
use std::ffi::c_int;

/// The plan plus this node's facts, prepared once before the tasks fork.
pub struct Node {
    plan: StepPlan,
    /// Each local task's slot in the plan's node: its local id, except on a node that a
    /// heterogeneous job's components share.
    slots: Vec<usize>,
    /// What to add to Slurm's task ids on this node for the step's ranks: the tasks of the
    /// heterogeneous components before this node's (0 otherwise).
    rank_offset: u32,
    /// A heterogeneous component's node where Slurm gave the step no GPU: its tasks see none.
    hide_gpus: bool,
    node: usize,
    step_gpus: Option<String>,
    /// srun ran with -v (`SRUN_DEBUG` above info): each task reports what it got.
    verbose: bool,
    /// Where each task renders its TF_CONFIG: made here, before the tasks fork.
    renderers: Renderers,
    /// The node's OOM-kill count when the step started ([`oom`]).
    oom_kills: Option<u64>,
    /// This node has ended the step already: the tasks it killed are not reported again.
    stopping: bool,
    /// The node's claim on the step's ports, given back by [`exit`].
    claim: Option<Claimed>,
    /// With `isolate=yes`: the step's firewall on this node, removed by [`exit`].
    firewall: Option<isolation::Installed>,
    /// In Slurm's container (23.02 and later): the node's oci.conf, when it can keep the
    /// task's variables from the program.
    oci: Option<NodeOci>,
}

/// slurmstepd, once per node before the tasks fork: build the step's one [`Stop`], then plan
/// the step. A plan that Slurm's own placement contradicts on this node is wrong for the whole
/// step, and tasks on other nodes may already be starting with it: the step is stopped on every
/// node at once ([`OnError::StopNow`]).
pub fn init_post_opt(sp: &Spank) -> c_int {
    let mut state = state();
    let Some(spec) = state.option.clone() else {
        return 0;
    };
    if !is_task_step(sp) {
        return 0;
    }
    let shape = Shape::read(sp);
    state.stop = Stop::of_step(sp, shape.as_ref().ok().map(|shape| &shape.kind));
    let planned = shape.and_then(|shape| plan_node(sp, spec, settings(&state), &shape));
    if let Err(e) = &planned {
        if e.on_error() == OnError::StopNow {
            log::error(&e.to_string());
            if let Some(stop) = &state.stop {
                stop.now();
            }
        }
    }
    state.plan = Some(planned);
    0
}

/// What Slurm says of the step before anything is planned: its ids, this component's node and
/// task counts, and which kind of step it is (one job's, or a heterogeneous job's or step's).
struct Shape {
    job_id: u32,
    step_id: u32,
    nodes: u32,
    tasks: u32,
    kind: StepKind,
}

impl Shape {
    fn read(sp: &Spank) -> Result<Shape, ShellError> {
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
        Ok(Shape {
            job_id,
            step_id,
            nodes,
            tasks,
            kind,
        })
    }
}

/// Batch script, extern and interactive steps carry no TF tasks; planning them would hand a
/// stale TF_CONFIG to every srun nested in a batch script.
fn is_task_step(sp: &Spank) -> bool {
    match sp.item_u32(U32Item::StepId) {
        Ok(step) => i64::from(step) < ffi::TFC_SLURM_INTERACTIVE_STEP,
        Err(_) => false,
    }
}

fn plan_node(
    sp: &Spank,
    spec: Result<Spec, Error>,
    settings: Result<Settings, Error>,
    shape: &Shape,
) -> Result<Node, ShellError> {
    let env = |name: &'static str| sp.getenv(name).map_err(|err| ShellError::Env { name, err });
    let required = |name: &'static str| env(name)?.ok_or(ShellError::Missing { name });
    let item = |it, what: &'static str| {
        sp.item_u32(it)
            .map_err(|err| ShellError::Item { what, err })
    };
    let &Shape {
        job_id,
        step_id,
        nodes,
        tasks,
        ref kind,
    } = shape;
    let (spec, settings) = (spec?, settings?);
    let node = item(U32Item::NodeId, "this node's index")? as usize;
    let local = item(U32Item::LocalTasks, "the local task count")?;
    let gtids = (0..local)
        .map(|task| {
            sp.local_to_global(task)
                .map_err(|err| ShellError::GlobalId { task, err })
        })
        .collect::<Result<Vec<u32>, ShellError>>()?;
    let components = match kind {
        StepKind::Whole => None,
        _ => {
            let hostname = het::hostname();
            let own = Own {
                job_id,
                node,
                nodes,
                tasks,
                gtids: &gtids,
                hostname: hostname.as_deref(),
            };
            Some(het::components(sp, kind, step_id, own)?)
        }
    };
    let (nodelist, tasks_per_node) = (
        required("SLURM_STEP_NODELIST")?,
        required("SLURM_STEP_TASKS_PER_NODE")?,
    );
    let (distribution, plane_size) = (env("SLURM_DISTRIBUTION")?, env("SLURM_DIST_PLANESIZE")?);
    let resv_ports = env("SLURM_STEP_RESV_PORTS")?;
    let task_hosts = env(TASK_HOSTS_VAR)?;
    // Read only where Slurm reorders: 26.05 and later, steps on several nodes (not a
    // heterogeneous step's, whose ranks come from its components' layouts).
    let topology = (ffi::TOPOLOGY_ORDERS_BLOCK_STEPS && nodes > 1 && components.is_none())
        .then(crate::spank::topology::node_ranks)
        .flatten();
    let plan = StepPlan::new(
        &spec,
        &settings,
        &StepInputs {
            nodelist: &nodelist,
            tasks_per_node: &tasks_per_node,
            distribution: distribution.as_deref(),
            plane_size: plane_size.as_deref(),
            resv_ports: resv_ports.as_deref(),
            task_hosts: task_hosts.as_deref(),
            topology: topology.as_ref(),
            het: components.as_ref(),
            proxies: ProxyEnv::read(env)?,
            runtimes: Runtimes::find(env("PATH")?.as_deref(), runtimes::program_at),
            // A heterogeneous job's components are jobs of their own: ports follow the first's.
            job_id: components.as_ref().map_or(job_id, |c| c.jobs[0]),
            step_id,
        },
    )?;
    let (node, slots, rank_offset) = match &components {
        // Checked against the node's own tasks when the components were put together.
        Some(het) => {
            let at = het.own_node();
            let slots = het.slots(&plan.layout, &gtids);
            (at, slots, het.own_offset)
        }
        None => {
            plan.check_node(node, &gtids)?;
            (node, (0..local as usize).collect(), 0)
        }
    };
    let hide_gpus = components.is_some() && env(gpus::SLURM_STEP_GPUS)?.is_none();
    // An inherited list is not the step's GPUs: its tasks get none (`TaskEnv::hide_gpus`).
    let step_gpus = match hide_gpus {
        true => None,
        false => env(gpus::VAR)?,
    };
    let verbose = plan::reports_tasks(env("SRUN_DEBUG")?.as_deref());
    let oci = match ffi::CONTAINER_GETS_TASK_ENV {
        true => env(container::BUNDLE_VAR)?.and_then(NodeOci::of_node),
        false => None,
    };
    // Last, so that nothing after them can fail and leave the rules to the epilog.
    let uid = item(U32Item::JobUid, "the job's user id")?;
    let jobs = components
        .as_ref()
        .map_or_else(|| vec![job_id], |c| c.jobs.clone());
    let host = &plan.hosts[node];
    let claim = Claimant {
        node: host,
        jobs: &jobs,
        step_id,
        ports: &plan.node_ports(node),
    }
    .claim()
    .map_err(|reason| ShellError::Ports {
        node: host.clone(),
        reason,
    })?;
    let firewall = isolation::install(&plan, (job_id, &jobs), step_id, uid, node)?;
    Ok(Node {
        renderers: plan.renderers(),
        oom_kills: oom::kills(),
        stopping: false,
        claim: Some(claim),
        firewall,
        oci,
        plan,
        slots,
        rank_offset,
        hide_gpus,
        node,
        step_gpus,
        verbose,
    })
}

/// Each task, just before `execve`: set every variable the plan gives it (TF_CONFIG,
/// CUDA_VISIBLE_DEVICES, ...).
pub fn task_init(sp: &Spank) -> c_int {
    let mut state = state();
    let Some(planned) = &mut state.plan else {
        return 0;
    };
    let applied = match planned {
        Ok(node) => apply(sp, node),
        Err(e) => Err(e.clone()),
    };
    match applied {
        Ok(()) => 0,
        Err(e) => {
            for name in UNSET_ON_ERROR {
                let _ = sp.unsetenv(name);
            }
            let on_error = e.on_error();
            if on_error == OnError::StopFromFirstTask {
                // The node's first task says why and stops the step: the other nodes' tasks,
                // which may have started, would otherwise wait for these.
                if sp.task_id().is_ok_and(|t| t == 0) {
                    log::error(&e.to_string());
                    if let Some(stop) = &state.stop {
                        stop.now();
                    }
                }
                handle::end_task(1);
            }
            let node = sp.getenv("SLURMD_NODENAME").ok().flatten();
            log::error(&plan::task_error_line(
                &e.to_string(),
                node.as_deref(),
                sp.task_id().ok(),
            ));
            if on_error == OnError::StopFromEachTask {
                if let Some(stop) = &state.stop {
                    stop.now();
                }
            }
            -1
        }
    }
}

fn apply(sp: &Spank, node: &mut Node) -> Result<(), ShellError> {
    let local = sp.task_id().map_err(|err| ShellError::Item {
        what: "the local task id",
        err,
    })? as usize;
    let slot = node.slots.get(local).copied().unwrap_or(local);
    let task_gpus = sp.getenv(gpus::VAR).map_err(|err| ShellError::Env {
        name: gpus::VAR,
        err,
    })?;
    // The task's program, for apptainer_env=auto; unknown counts as not Apptainer.
    let program = sp.program().ok().flatten();
    let mut env = node.plan.task(
        node.node,
        slot,
        node.step_gpus.as_deref(),
        task_gpus.as_deref(),
        program.as_deref(),
        &mut node.renderers,
    )?;
    if node.hide_gpus {
        env.hide_gpus();
    }
    for &name in env.unset {
        let _ = sp.unsetenv(name);
    }
    for (name, value) in &env.set {
        sp.setenv_nul(name, value)
            .map_err(|err| ShellError::SetEnv { name, err })?;
    }
    if let (0, Some(oci)) = (local, &node.oci) {
        // Once per node: Slurm would keep some of them from the program.
        if let Some(warning) = oci.warning(&node.plan.hosts[node.node], &env.set) {
            log::user(&format!("warning: {warning}"));
        }
    }
    if env.rank == 0 {
        // Once per step: why some GPUs stay unused.
        if let Some(note) = node.plan.gpu_note(node.step_gpus.as_deref()) {
            log::user(&note);
        }
    }
    if node.verbose {
        log::user(&env.report(task_gpus.as_deref()));
    }
    Ok(())
}

/// slurmstepd, each time one of its tasks ends: when its end ends the step
/// ([`StepPlan::ending`]: the decider's exit, or a trainer's failure), say which task and how,
/// and end the rest of the step through Slurm, on every node. Without this, ps and worker
/// servers hold the nodes until the time limit after training, and MultiWorkerMirroredStrategy
/// waits an hour for a task that died at start. From 23.11 the stopped tasks count as
/// successful, so srun's exit status is that task's.
pub fn task_exit(sp: &Spank) -> c_int {
    let mut state = state();
    let state = &mut *state;
    let (Some(Ok(node)), Some(stop)) = (&mut state.plan, &state.stop) else {
        return 0;
    };
    if node.stopping {
        return 0;
    }
    let Ok(rank) = sp.item_u32(U32Item::TaskGlobalId) else {
        return 0;
    };
    let rank = rank + node.rank_offset;
    let status = sp.task_exit_status().ok();
    let before = node.oom_kills;
    let Some(end) = node.plan.ending(rank, status, || oom::killed_since(before)) else {
        return 0;
    };
    if end.failure {
        log::error(&end.message);
    } else {
        log::user(&end.message);
    }
    node.stopping = true;
    stop.after_return();
    0
}

/// slurmstepd, before it exits (the node's last task may end before the stop is sent): wait
/// for the stop [`task_exit`] started, then remove the step's firewall and give back its
/// ports. Elsewhere nothing to do.
pub fn exit() -> c_int {
    stop::wait_for_the_stopper();
    if let Some(Ok(node)) = &mut state().plan {
        if let Some(firewall) = &mut node.firewall {
            isolation::leave(firewall);
        }
        node.firewall = None;
        node.claim = None;
    }
    0
}
