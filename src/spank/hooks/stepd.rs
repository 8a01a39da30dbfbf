//! slurmstepd (remote context): plan the step once per node, before the tasks fork (each task's
//! own process takes its part: [`super::task`]), and end the step when the chief is done, when
//! a trainer fails, or when the plan turns out wrong.

use super::locked;
use crate::core::check;
use crate::core::container;
use crate::core::ending::WorkerSeen;
use crate::core::env_entries;
use crate::core::error::OnError;
use crate::core::gpu_affinity::{self, Contiguous, CpuSet};
use crate::core::het::Own;
use crate::core::plan;
use crate::core::ports::Reservation;
use crate::core::tf_config::Renderers;
use crate::core::topology;
use crate::core::{gpus, Error, NodeFacts, Place, Settings, Spec, StepInputs, StepPlan};
use crate::spank::claims::{Claimant, Claimed};
use crate::spank::error::ShellError;
use crate::spank::ffi;
use crate::spank::handle::{Spank, U32Item};
use crate::spank::hardware;
use crate::spank::het;
use crate::spank::isolation::firewall;
use crate::spank::log;
use crate::spank::oci::NodeOci;
use crate::spank::oom;
use crate::spank::process;
use crate::spank::resolver;
use crate::spank::runtimes;
use crate::spank::slurm;
use crate::spank::slurm_conf;
use crate::spank::sock_diag;
use crate::spank::step::{gtids, Shape, StepVars};
use crate::spank::stop::{self, Stop};
use crate::spank::task_env;
use crate::spank::timing;
use crate::spank::workers::{self, Watcher};
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

/// The plan plus this node's facts, prepared once before the tasks fork.
pub(super) struct Node {
    pub(super) plan: StepPlan,
    /// This node's place in the plan: its node, its tasks' slots and ranks, its GPUs.
    pub(super) place: Place,
    /// srun ran with -v (`SRUN_DEBUG` above info): each task reports what it got.
    pub(super) verbose: bool,
    /// Where each task renders its TF_CONFIG: made here, before the tasks fork.
    pub(super) renderers: Renderers,
    /// The node's OOM-kill count when the step started ([`oom`]).
    pub(super) oom_kills: Option<u64>,
    /// This node has ended the step already: the tasks it killed are not reported again.
    pub(super) stopping: bool,
    /// Workers of this node whose failure the step survived (`fail_fast=auto` with ps).
    pub(super) lost_workers: u32,
    /// The node's claim on the step's ports, given back by [`exit`].
    pub(super) claim: Option<Claimed>,
    /// With `isolate=yes`: the step's firewall on this node, removed by [`exit`].
    pub(super) firewall: Option<firewall::Installed>,
    /// In Slurm's container (23.02 and later): the node's oci.conf, when it can keep the
    /// task's variables from the program.
    pub(super) oci: Option<NodeOci>,
    /// Why `SLURM_STEP_RESV_PORTS` was not taken ([`Reservation`]), said by rank 0.
    pub(super) reservation_note: Option<String>,
    /// With `socket_ifname=yes`: the collectives' interface on this node, or why none
    /// (`srun -v` prints it).
    pub(super) collectives_note: Option<String>,
    /// Which of the variables tfcluster only defaults ([`plan::DEFAULTED`]) the job's
    /// environment sets itself, looked up once for the node's tasks.
    pub(super) job_sets: Vec<&'static str>,
    /// The names made empty in the step's environment before the forks ([`user_init`]), for
    /// each task to write its values into ([`task_env`]).
    pub(super) presets: Vec<String>,
    /// The strings of the first task's large values, made with the presets.
    pub(super) premade: Vec<task_env::Premade>,
    /// The job's user ([`Shape::uid`]): whose connections the workers' watcher counts.
    pub(super) uid: u32,
    /// Where the node's GPUs are split by affinity: each GPU token's local CPUs, from the
    /// node's PCI tree ([`hardware`]) and `SLURM_STEP_GPUS`, matched once before the tasks
    /// fork; or why they are not known.
    pub(super) gpu_cpus: Option<Result<Vec<CpuSet>, Contiguous>>,
    /// This node's name ([`Shape::node`]), for the tasks' lines.
    pub(super) name: Option<String>,
}

/// What a step's slurmstepd keeps from `init_post_opt` to `exit` (its task children inherit a
/// copy).
pub(super) struct Step {
    /// The step's plan for this node, or why there is none (reported by each task).
    pub(super) plan: Option<Result<Node, ShellError>>,
    /// `fail_fast=auto` with ps: the watcher of this node's workers' server ports
    /// ([`crate::spank::workers`]), stopped by `exit` or at the unload.
    pub(super) workers: Option<Watcher>,
    /// The step's one stop, built before planning, whatever the plan then says.
    pub(super) stop: Option<Stop>,
    /// With `check`: this node's line, printed by its first task.
    pub(super) check_verdict: Option<check::Verdict>,
}

static STEP: Mutex<Step> = Mutex::new(Step {
    plan: None,
    workers: None,
    stop: None,
    check_verdict: None,
});

pub(super) fn state() -> MutexGuard<'static, Step> {
    locked(&STEP)
}

/// The workers' watcher, taken as the plugin is unloaded without `exit`
/// ([`super::extern_step`]), unless a hook holds the lock then.
pub fn workers_at_unload() -> Option<Watcher> {
    match STEP.try_lock() {
        Ok(mut step) => step.workers.take(),
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().workers.take(),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// slurmstepd, once per node before the tasks fork: build the step's one [`Stop`], then plan
/// the step. A plan that Slurm's own placement contradicts on this node is wrong for the whole
/// step, and tasks on other nodes may already be starting with it: the step is stopped on every
/// node at once ([`OnError::StopNow`]).
pub fn init_post_opt(sp: &Spank) -> c_int {
    let given = super::given();
    let mut state = state();
    if given.check {
        if is_task_step(sp) {
            // Slurmstepd's own name for the node, also where the step's shape cannot be read
            // (a job environment the user made unreadable must not rename the node).
            let node = Shape::read(sp)
                .ok()
                .and_then(|shape| shape.node)
                .or_else(process::node_name);
            let verdict = crate::spank::check::node(sp, (given.settings(), &given.words), node);
            state.check_verdict = Some(verdict);
        }
        return 0;
    }
    let Some(spec) = given.option.clone() else {
        return 0;
    };
    if !is_task_step(sp) {
        return 0;
    }
    let shape = Shape::read(sp);
    state.stop = Stop::of_step(sp, shape.as_ref().ok());
    timing::phase("shape");
    let planned = shape.and_then(|shape| plan_node(sp, spec, given.settings(), &shape));
    if let Err(e) = &planned {
        if e.on_error() == OnError::StopNow {
            log::error(&e.to_string());
            if let Some(stop) = &state.stop {
                stop.now();
            }
        }
    }
    // With `fail_fast=auto` and ps: whether the chief has connected to each of the node's
    // workers, watched from before they start (the node's claim has just seen their ports
    // held by no socket, so every connection seen is the step's). The thread starts once the
    // tasks have forked ([`task_post_fork`]): a thread of slurmstepd's makes each fork and
    // exec cost more.
    // Where Slurm may run that hook in a child process (`contain_spank`), it starts here.
    if let Ok(node) = &planned {
        let watched = node.plan.watched_workers(&node.place);
        let ports: Vec<u16> = watched.iter().map(|&(_, port)| port).collect();
        let listened = ports.clone();
        let uid = node.uid;
        state.workers = Watcher::new(
            watched,
            (
                move || sock_diag::connections(&ports, uid),
                move || sock_diag::listening_on(&listened, uid),
            ),
            workers::EVERY,
            log::debug,
        );
        if state.workers.is_some() && slurm_conf::hooks_may_run_in_children() {
            run_watcher(&mut state);
        }
        timing::phase("watcher");
    }
    state.plan = Some(planned);
    0
}

/// slurmstepd, once per node before the tasks fork, with the job's user's privileges (Slurm
/// drops them for this hook): the container runtimes the job's `PATH` names, looked at as the
/// user, so that root looks at no file the job's environment names
/// ([`crate::core::root_inputs`]); then the names and strings the tasks will write their
/// variables into (`presets`, below). With `SlurmdParameters=contain_spank` (24.05 and later) it
/// runs in a child process of slurmstepd's that shares its memory, which drops to the user as
/// well.
pub fn user_init(sp: &Spank) -> c_int {
    if let Some(Ok(node)) = &mut state().plan {
        node.plan.find_runtimes(|| {
            let path = sp.getenv("PATH").ok().flatten();
            let found = container::Runtimes::find(path.as_deref(), runtimes::program_at);
            // SAFETY: geteuid takes nothing and cannot fail.
            let uid = unsafe { libc::geteuid() };
            log::debug(&format!(
                "apptainer_env: the runtimes found as uid {uid}: {found:?}"
            ));
            found
        });
        (node.presets, node.premade) = presets(sp, node);
    }
    0
}

/// The names the node's first task will be given (the plan, asked as that task will ask it)
/// that the step's environment lacks, made there now, empty: each task then writes its values
/// into its own copy of them ([`task_env`]) rather than through Slurm's `spank_setenv`. Last in
/// `user_init`: the runtimes found decide Apptainer's names. The strings of that task's large
/// values are made too ([`task_env::Premade`]).
fn presets(sp: &Spank, node: &mut Node) -> (Vec<String>, Vec<task_env::Premade>) {
    let task_gpus = sp.getenv(gpus::VAR).ok().flatten();
    let job_sets = &node.job_sets;
    let own = |name: &str| job_sets.contains(&name);
    let Ok(env) = node.plan.task(
        &node.place,
        0,
        task_gpus.as_deref(),
        None,
        &own,
        None,
        &mut node.renderers,
    ) else {
        return (Vec::new(), Vec::new());
    };
    let names = env_entries::presets(env.set.iter().map(|(name, _)| *name), |name| {
        task_env::has(sp, name)
    });
    let large: Vec<(&str, &str, usize)> = env
        .set
        .iter()
        .filter(|(_, value)| value.len() >= env_entries::PREMADE_BYTES)
        .map(|(name, value)| (*name, value.as_ref(), env.head_of(value)))
        .collect();
    let (made, premade) = task_env::preset(sp, names, &large);
    log::debug(&format!(
        "the tasks' own entries, made before the forks: {made:?}, {} with a string",
        premade.len()
    ));
    (made, premade)
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
    let item = |it, what: &'static str| {
        sp.item_u32(it)
            .map_err(|err| ShellError::Item { what, err })
    };
    let (spec, settings) = (spec?, settings?);
    let (node, gtids) = (
        item(U32Item::NodeId, "this node's index")? as usize,
        gtids(sp)?,
    );
    let own = Own {
        job_id: shape.job_id,
        node,
        nodes: shape.nodes,
        tasks: shape.tasks,
        gtids: &gtids,
        hostname: None,
    };
    let het = het::components(shape, own)?;
    timing::phase("components");
    let topology = topology::applies(ffi::TOPOLOGY_ORDERS_BLOCK_STEPS, shape.nodes, het.is_some())
        .then(crate::spank::topology::node_ranks)
        .flatten();
    let vars = StepVars::read(sp)?;
    // A heterogeneous step's ports never come from the merged reservation (StepPlan::new).
    let reservation = Reservation::vouched(vars.resv_ports().filter(|_| het.is_none()), || {
        slurm::step_reserved_ports(shape.job_id, shape.step_id)
    })?;
    let mut plan = StepPlan::new(
        &spec,
        &settings,
        &StepInputs {
            topology: topology.as_ref(),
            het: het.as_ref(),
            job_id: shape.job_id,
            step_id: shape.step_id,
            resv_ports: reservation.ports.as_deref(),
            ..vars.inputs()
        },
    )?;
    timing::phase("plan");
    let step_gpus = env(gpus::VAR)?;
    let slurm_step_gpus = env(gpus::SLURM_STEP_GPUS)?;
    let facts = NodeFacts {
        node,
        gtids: &gtids,
        step_gpus: step_gpus.as_deref(),
        slurm_gave_gpus: slurm_step_gpus.is_some(),
    };
    let place = plan.place(het.as_ref(), &facts)?;
    // Once per node, and only where the node's GPUs are split among its tasks by affinity.
    let gpu_cpus = place
        .step_gpus()
        .filter(|_| settings.gpus_by_affinity())
        .map(|step| {
            gpu_affinity::node_gpu_cpus(hardware::node_gpus(), step, slurm_step_gpus.as_deref())
        });
    timing::phase("place");
    if plan.bind_jax_coordinator(place.node, resolver::resolve) {
        log::debug("jax: rank 0's coordinator binds rank 0's address alone");
    }
    let collectives_note =
        plan.find_collectives_interface(place.node, resolver::resolve, resolver::interfaces);
    timing::phase("addresses");
    // The variables tfcluster only defaults that the job sets itself: the same for every task.
    let job_sets = plan::DEFAULTED
        .into_iter()
        .filter(|name| sp.getenv(name).ok().flatten().is_some())
        .collect();
    let verbose = plan::reports_tasks(env("SRUN_DEBUG")?.as_deref());
    let oci = match ffi::CONTAINER_GETS_TASK_ENV {
        true => env(container::BUNDLE_VAR)?.and_then(NodeOci::of_node),
        false => None,
    };
    // Last, so that nothing after them can fail and leave the rules to the epilog.
    let uid = shape.uid;
    let jobs = het.map_or_else(|| vec![shape.job_id], |het| het.jobs);
    let name = shape.node.as_deref();
    let claim = claim(&plan, (place.node, name), &jobs, shape.step_id)?;
    timing::phase("claims");
    let firewall = firewall::install(
        &plan,
        (shape.job_id, &jobs),
        shape.step_id,
        uid,
        (place.node, name),
    )?;
    timing::phase("firewall");
    Ok(Node {
        renderers: plan.renderers(),
        oom_kills: oom::kills(),
        stopping: false,
        lost_workers: 0,
        claim: Some(claim),
        firewall,
        oci,
        reservation_note: reservation.note,
        collectives_note,
        job_sets,
        presets: Vec::new(),
        premade: Vec::new(),
        uid,
        gpu_cpus,
        name: shape.node.clone(),
        plan,
        place,
        verbose,
    })
}

/// This node's claim on the ports its tasks listen on, for the step's `jobs` ([`Claimant`]),
/// in the directory of the node as slurmstepd names it ([`Shape::node`]), never as the job's
/// environment does (the step's node list is the user's to set).
fn claim(
    plan: &StepPlan,
    (node, name): (usize, Option<&str>),
    jobs: &[u32],
    step_id: u32,
) -> Result<Claimed, ShellError> {
    let host = &plan.hosts[node];
    let own = name.unwrap_or(host);
    Claimant {
        node: own,
        jobs,
        step_id,
        ports: &plan.node_ports(node),
    }
    .claim()
    .map_err(|reason| ShellError::Ports {
        node: host.clone(),
        reason,
    })
}

/// slurmstepd, once per task after every task of the node has forked and before any runs its
/// program, at the first call: take the names `presets` made out of the step's environment
/// and free its strings (each task has its own copy), and start the workers' watcher's thread
/// ([`init_post_opt`] made it). Elsewhere (the extern step, a step without a plan) nothing to
/// do.
pub fn task_post_fork(sp: &Spank) -> c_int {
    let mut state = state();
    if let Some(Ok(node)) = &mut state.plan {
        // The first call: every task has its copy of the presets; the step keeps none.
        let presets = std::mem::take(&mut node.presets);
        task_env::unpreset(sp, &presets);
        task_env::free(std::mem::take(&mut node.premade));
    }
    if state.workers.as_ref().is_some_and(|w| !w.running()) {
        run_watcher(&mut state);
    }
    0
}

/// Starts the watcher's thread; a watcher whose thread cannot run is dropped, with a line that
/// says why: no thread, no mark.
fn run_watcher(state: &mut Step) {
    if let Some(Err(why)) = state.workers.as_mut().map(Watcher::run) {
        log::error(&why);
        state.workers = None;
    }
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
    let rank = node.place.rank(rank);
    let status = sp.task_exit_status().ok();
    let before = node.oom_kills;
    // Asked for a worker's failure alone: one more look at its port, whose connection may be
    // closing.
    let (watcher, lost_before) = (&state.workers, node.lost_workers);
    let seen = || WorkerSeen {
        reached: watcher.as_ref().is_some_and(|w| w.look_again(rank)),
        lost_before,
    };
    let Some(end) = node
        .plan
        .ending(rank, status, || oom::killed_since(before), seen)
    else {
        return 0;
    };
    if end.failure {
        log::error(&end.message);
    } else {
        log::user(&end.message);
    }
    if !end.stops {
        node.lost_workers += 1;
        return 0;
    }
    node.stopping = true;
    stop.after_return(status.is_some_and(|s| libc::WIFSIGNALED(s)));
    0
}

/// slurmstepd, before it exits (the node's last task may end before the stop is sent): wait
/// for the stop [`task_exit`] started, then remove the step's firewall and give back its
/// ports. Elsewhere nothing to do.
pub fn exit() -> c_int {
    super::extern_step::stop();
    // Taken out first, so that the thread is joined without the state's lock held.
    let watcher = state().workers.take();
    drop(watcher);
    stop::wait_for_the_stopper();
    timing::phase("watcher and stop");
    if let Some(Ok(node)) = &mut state().plan {
        if let Some(firewall) = &mut node.firewall {
            firewall::leave(firewall);
        }
        node.firewall = None;
        timing::phase("firewall");
        node.claim = None;
        timing::phase("claims");
    }
    0
}
