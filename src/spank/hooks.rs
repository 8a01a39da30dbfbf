//! What each hook does, per context. The plugin's whole life in one job:
//!
//! | process (context)   | hook                         | work                                          |
//! |---------------------|------------------------------|-----------------------------------------------|
//! | srun, sbatch, salloc, slurmstepd | `init`          | read plugstack.conf settings, register `--tf-cluster` |
//! | same                | option callback              | parse the spec: a syntax error fails srun/sbatch before submission |
//! | srun                | `local_user_init`            | fit the spec to the step's task count: a mismatch fails srun before launch |
//! | slurmstepd (1/node) | `init_post_opt`              | plan the whole step once, check it against Slurm's own ids for this node, record the node's GPUs |
//! | task (1/task)       | `task_init`                  | pick this task's TF_CONFIG and GPUs from the plan, `spank_setenv` them |
//!
//! Without `--tf-cluster` every hook returns at once and nothing changes. Errors found in
//! slurmstepd are kept until `task_init` and reported there: a failing remote `init_post_opt`
//! makes srun report a cryptic launch failure (and may drain nodes), a failing `task_init`
//! names the task and keeps it from running with a wrong or missing TF_CONFIG.

use super::ffi;
use super::handle::{self, Context, Spank, U32Item};
use super::log;
use crate::core::ports::{self, PortPolicy};
use crate::core::{hostlist, Component, Error, GpuAction, Settings, Spec, StepInputs, StepPlan};
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

pub const OPTION_NAME: &str = "tf-cluster";
/// srun -> slurmstepd: every task's host in rank order, for `-m arbitrary` (SLURM_HOSTFILE).
/// Removed from each task's environment before exec.
const TASK_HOSTS_VAR: &str = "TFCLUSTER_TASK_HOSTS";
const OPTION_USAGE: &str =
    "[tfcluster] TF_CONFIG + GPU split for TensorFlow: SPEC=ROLE:COUNT,... e.g. chief:1,ps:2,worker:*";

/// Everything the plugin remembers inside one process (srun, or one slurmstepd and the task
/// children it forks, which inherit a copy).
#[derive(Default)]
struct State {
    /// The plugstack.conf settings, or why they are invalid.
    settings: Option<Result<Settings, Error>>,
    /// The `--tf-cluster` value, parsed, when the option was given (or why it does not parse).
    option: Option<Result<Spec, Error>>,
    /// srun: the option was given without an argument (`--tf-cluster`, or `--tf-cluster SPEC`
    /// by mistake, which makes SPEC the program).
    bare: bool,
    /// slurmstepd: the step's plan for this node, or the message to report in each task.
    plan: Option<Result<Node, String>>,
}

/// The plan plus this node's facts, prepared once before the tasks fork.
struct Node {
    plan: StepPlan,
    job_id: u32,
    step_id: u32,
    node: usize,
    step_gpus: Option<String>,
    /// srun ran with -v (`SRUN_DEBUG` above info): each task reports what it got.
    verbose: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    settings: None,
    option: None,
    bare: false,
    plan: None,
});

/// Locks the state, recovering from a poisoned lock (a panic in an earlier hook is already
/// reported; it must not make every later hook fail).
fn state() -> MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn settings(state: &State) -> Result<Settings, Error> {
    state
        .settings
        .clone()
        .unwrap_or_else(|| Ok(Settings::default()))
}

pub fn init(sp: &Spank, args: &[String]) -> c_int {
    let ctx = handle::context();
    let parsed = Settings::from_plugstack(args);
    if let Err(e) = &parsed {
        // slurmd logs it at start-up for the admin; users see it when they use the option.
        if ctx == Context::Slurmd {
            log::error(&e.to_string());
        }
    }
    state().settings = Some(parsed);
    if matches!(ctx, Context::Local | Context::Remote | Context::Allocator) {
        let cb: ffi::spank_opt_cb_f = Some(crate::option_callback);
        if let Err(e) = sp.register_option(OPTION_NAME, "SPEC", OPTION_USAGE, 2, cb) {
            // Not fatal: jobs without the option must keep running even if, say, another
            // plugin already owns --tf-cluster.
            log::error(&format!("cannot register --{OPTION_NAME}: {e}"));
        }
    }
    0
}

/// The option callback: in srun/sbatch/salloc a bad spec, or an empty one (`--tf-cluster=`),
/// fails the command ("Invalid --tf-cluster argument") before anything is submitted. In
/// slurmstepd (where it runs twice before 24.05, once after) it only records the latest value;
/// there an empty value means a bare `--tf-cluster`: all workers.
pub fn option(optarg: Option<String>, remote: bool) -> c_int {
    let mut state = state();
    let optarg = Spec::slurm_arg(optarg.as_deref());
    let spec = Spec::parse(optarg);
    if !remote {
        let checked = Spec::check_typed(optarg)
            .and(spec.clone())
            .and_then(|spec| {
                settings(&state)?
                    .with_overrides(&spec.overrides)
                    .map(|_| ())
            });
        if let Err(e) = checked {
            log::error(&e.to_string());
            return -1;
        }
        state.bare = optarg.is_none();
    }
    // In slurmstepd an error is kept and reported by each task (a failing remote callback is
    // only logged by slurmd, and the job would run as if the option were absent).
    state.option = Some(spec);
    0
}

/// srun: the step's task and node counts and its command are known here; reject what cannot
/// work before anything launches.
pub fn local_user_init(sp: &Spank) -> c_int {
    let (option, bare, settings) = {
        let state = state();
        (state.option.clone(), state.bare, settings(&state))
    };
    // The callback already refused a spec that does not parse.
    let Some(Ok(spec)) = option else {
        return 0;
    };
    match check_before_launch(sp, &spec, bare, settings) {
        Ok(()) => 0,
        Err(e) => {
            log::error(&e);
            -1
        }
    }
}

fn check_before_launch(
    sp: &Spank,
    spec: &Spec,
    bare: bool,
    settings: Result<Settings, Error>,
) -> Result<(), String> {
    if bare {
        if let Some(program) = sp.argv().ok().and_then(|argv| argv.into_iter().next()) {
            Spec::check_program(&program).map_err(|e| e.to_string())?;
        }
    }
    let (tasks, nodes) = match (
        sp.item_u32(U32Item::TotalTasks),
        sp.item_u32(U32Item::Nodes),
    ) {
        (Ok(tasks), Ok(nodes)) => (tasks, nodes.max(1)),
        (Err(e), _) | (_, Err(e)) => {
            log::debug(&format!(
                "task or node count not available in srun ({e}); checked on the nodes"
            ));
            return Ok(());
        }
    };
    let roles = spec.resolve(tasks).map_err(|e| e.to_string())?;
    let settings = settings
        .and_then(|s| s.with_overrides(&spec.overrides))
        .map_err(|e| e.to_string())?;
    if let PortPolicy::Base(base) = settings.ports() {
        ports::check_base(base, tasks.div_ceil(nodes) as usize).map_err(|e| e.to_string())?;
    }
    pass_hostfile_order(tasks)?;
    let text: Vec<String> = roles
        .slices
        .iter()
        .map(|s| format!("{}:{}", s.role, s.count))
        .collect();
    log::verbose(&format!("{tasks} tasks as {}", text.join(",")));
    Ok(())
}

/// srun, with `-m arbitrary`: the nodes cannot see the task order, which only the user's
/// SLURM_HOSTFILE holds; read it here and pass it on in the step's environment.
fn pass_hostfile_order(tasks: u32) -> Result<(), String> {
    let arbitrary = std::env::var("SLURM_DISTRIBUTION").is_ok_and(|d| d.starts_with("arbitrary"));
    let Some(path) = std::env::var_os("SLURM_HOSTFILE").filter(|_| arbitrary) else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read SLURM_HOSTFILE {}: {e}", path.to_string_lossy()))?;
    let hosts = hostlist::hostfile_task_hosts(&text, tasks).map_err(|e| e.to_string())?;
    handle::set_srun_env(TASK_HOSTS_VAR, &hosts.join(","))
        .map_err(|e| format!("cannot pass the task order to the nodes: {e}"))
}

/// slurmstepd, once per node before the tasks fork: plan the step.
pub fn init_post_opt(sp: &Spank) -> c_int {
    if handle::context() != Context::Remote {
        return 0;
    }
    let mut state = state();
    let Some(spec) = state.option.clone() else {
        return 0;
    };
    if !is_task_step(sp) {
        return 0;
    }
    let planned = plan_node(sp, spec, settings(&state));
    state.plan = Some(planned);
    0
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
) -> Result<Node, String> {
    let env = |name: &str| {
        sp.getenv(name)
            .map_err(|e| format!("cannot read {name} from the job environment: {e}"))
    };
    let required = |name: &str| {
        env(name)?.ok_or_else(|| format!("{name} is not set; is this an srun job step?"))
    };
    let item = |it, name: &str| {
        sp.item_u32(it)
            .map_err(|e| format!("cannot get {name}: {e}"))
    };
    let (het_size, step_nodes, step_tasks) = (
        env("SLURM_HET_SIZE")?,
        env("SLURM_STEP_NUM_NODES")?,
        env("SLURM_STEP_NUM_TASKS")?,
    );
    Component {
        nodes: item(U32Item::Nodes, "the step's node count")?,
        tasks: item(U32Item::TotalTasks, "the step's task count")?,
        step_nodes: step_nodes.as_deref(),
        step_tasks: step_tasks.as_deref(),
        het_size: het_size.as_deref(),
    }
    .check_whole_step()
    .map_err(|e| e.to_string())?;
    let spec = spec.map_err(|e| e.to_string())?;
    let settings = settings.map_err(|e| e.to_string())?;
    let (nodelist, tasks_per_node) = (
        required("SLURM_STEP_NODELIST")?,
        required("SLURM_STEP_TASKS_PER_NODE")?,
    );
    let (distribution, plane_size) = (env("SLURM_DISTRIBUTION")?, env("SLURM_DIST_PLANESIZE")?);
    let resv_ports = env("SLURM_STEP_RESV_PORTS")?;
    let task_hosts = env(TASK_HOSTS_VAR)?;
    let (job_id, step_id) = (
        item(U32Item::JobId, "the job id")?,
        item(U32Item::StepId, "the step id")?,
    );
    let inputs = StepInputs {
        nodelist: &nodelist,
        tasks_per_node: &tasks_per_node,
        distribution: distribution.as_deref(),
        plane_size: plane_size.as_deref(),
        resv_ports: resv_ports.as_deref(),
        task_hosts: task_hosts.as_deref(),
        job_id,
        step_id,
    };
    let plan = StepPlan::new(&spec, &settings, &inputs).map_err(|e| e.to_string())?;
    let node = item(U32Item::NodeId, "this node's index")? as usize;
    let local = item(U32Item::LocalTasks, "the local task count")?;
    let gtids = (0..local)
        .map(|i| {
            sp.local_to_global(i)
                .map_err(|e| format!("cannot get task {i}'s global id: {e}"))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    plan.check_node(node, &gtids).map_err(|e| e.to_string())?;
    let step_gpus = env("CUDA_VISIBLE_DEVICES")?;
    let verbose = env("SRUN_DEBUG")?
        .and_then(|v| v.parse::<u32>().ok())
        .is_some_and(|v| v > 3);
    Ok(Node {
        plan,
        job_id,
        step_id,
        node,
        step_gpus,
        verbose,
    })
}

/// Each task, just before `execve`: set TF_CONFIG and CUDA_VISIBLE_DEVICES.
pub fn task_init(sp: &Spank) -> c_int {
    let state = state();
    let Some(planned) = &state.plan else { return 0 };
    // srun's hand-over to the nodes is not for the program.
    let _ = sp.unsetenv(TASK_HOSTS_VAR);
    match apply(sp, planned) {
        Ok(()) => 0,
        Err(msg) => {
            // Never leave an inherited TF_CONFIG behind for a task we could not configure.
            let _ = sp.unsetenv("TF_CONFIG");
            // Slurm 26.05 no longer puts the node's name before lines forwarded from
            // slurmstepd, so the message names it.
            let node = sp
                .getenv("SLURMD_NODENAME")
                .ok()
                .flatten()
                .map(|n| format!("node {n}, "))
                .unwrap_or_default();
            let task = sp
                .task_id()
                .map(|t| format!("local task {t}"))
                .unwrap_or_default();
            log::error(&format!("{msg} [{node}{task}; TF_CONFIG not set]"));
            -1
        }
    }
}

fn apply(sp: &Spank, planned: &Result<Node, String>) -> Result<(), String> {
    let node = planned.as_ref().map_err(Clone::clone)?;
    let slot = sp
        .task_id()
        .map_err(|e| format!("cannot get the local task id: {e}"))? as usize;
    let task_gpus = sp
        .getenv("CUDA_VISIBLE_DEVICES")
        .map_err(|e| format!("cannot read CUDA_VISIBLE_DEVICES: {e}"))?;
    let env = node
        .plan
        .task(
            node.node,
            slot,
            node.step_gpus.as_deref(),
            task_gpus.as_deref(),
        )
        .map_err(|e| e.to_string())?;
    sp.setenv("TF_CONFIG", &env.tf_config)
        .map_err(|e| format!("cannot set TF_CONFIG: {e}"))?;
    let gpus = match &env.gpus {
        GpuAction::Leave => task_gpus.unwrap_or_else(|| "unset".into()),
        GpuAction::Set(value) => {
            sp.setenv("CUDA_VISIBLE_DEVICES", value)
                .map_err(|e| format!("cannot set CUDA_VISIBLE_DEVICES: {e}"))?;
            if value.is_empty() {
                "none".into()
            } else {
                value.clone()
            }
        }
    };
    if node.verbose {
        log::user(&format!(
            "rank {} is {}:{} at {}, GPUs {}",
            env.rank, env.role, env.index, env.endpoint, gpus
        ));
    }
    Ok(())
}

/// slurmstepd, each time one of its tasks ends: when it is the task that decides the job's
/// result (see [`StepPlan::decider`]), end the rest of the step through Slurm, on every node.
/// ps and worker servers never exit by themselves; without this the step would hold its nodes
/// until the time limit. From 23.11 the stopped tasks count as successful, so srun's exit status
/// is the chief's.
pub fn task_exit(sp: &Spank) -> c_int {
    let state = state();
    let Some(Ok(node)) = &state.plan else {
        return 0;
    };
    let Some(decider) = node.plan.decider() else {
        return 0;
    };
    if sp.item_u32(U32Item::TaskGlobalId) != Ok(decider.rank) {
        return 0;
    }
    let status = sp.task_exit_status().unwrap_or(0);
    log::user(&decider.exit_message(status));
    if let Err(e) = handle::kill_step(node.job_id, node.step_id, libc::SIGKILL) {
        log::error(&format!(
            "could not stop the step's other tasks: {e}; they run until they exit or the time limit"
        ));
    }
    0
}
