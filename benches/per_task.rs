//! What tfcluster costs per task, in process: `cargo bench --bench per_task` (or `make bench`).
//!
//! Steps of 4 to 6238 tasks (the largest whose TF_CONFIG fits Linux's 131072-byte limit with
//! these names), 8 tasks per node on nodes named `gpu-node0001`..., 4 GPUs per node. For each:
//! - **one task, cold**: everything one task would do alone: parse the step's variables, expand
//!   the host list, rebuild the layout, assign roles, ports and GPUs, render its TF_CONFIG;
//! - **plugin, per task**: what the plugin really spends per task: the step is planned once per
//!   node in slurmstepd (shared by the node's 8 tasks), then each task gets its environment;
//! - **with Apptainer's names**: the same for a task whose program is `apptainer`
//!   (`apptainer_env=auto`): each variable also under `APPTAINERENV_` and `SINGULARITYENV_`;
//! - **with JAX's, Keras's and Keras Tuner's**: the same with `keras=3` and `tuner=yes` (every
//!   variable of [`tfcluster::core::jax`] and [`tfcluster::core::tuner`] on top of TF_CONFIG);
//! - **workers, and with PyTorch's**: `worker:*` (the spec `torch=yes` needs), without and with
//!   `torch=yes` (every variable of [`tfcluster::core::torch`] on top of TF_CONFIG);
//! - **copy baseline**: copying a buffer as large as the TF_CONFIG, measured in the same run.
//!
//! Prints a table and, with `--json`, one JSON object per line for benches/run.sh.

mod common;
use common::measure;
use tfcluster::core::{NodeFacts, Place, Role, Settings, Spec, StepInputs, StepPlan};

const PER_NODE: u32 = 8;

struct Step {
    nodelist: String,
    tasks_per_node: String,
}

fn step(tasks: u32) -> Step {
    let nodes = tasks.div_ceil(PER_NODE);
    let last = tasks - (nodes - 1) * PER_NODE;
    let tasks_per_node = match (nodes, last) {
        (1, n) => n.to_string(),
        (n, l) if l == PER_NODE => format!("{PER_NODE}(x{n})"),
        (2, l) => format!("{PER_NODE},{l}"),
        (n, l) => format!("{PER_NODE}(x{}),{l}", n - 1),
    };
    Step {
        nodelist: format!("gpu-node[0001-{nodes:04}]"),
        tasks_per_node,
    }
}

fn inputs(s: &Step) -> StepInputs<'_> {
    StepInputs {
        nodelist: &s.nodelist,
        tasks_per_node: &s.tasks_per_node,
        distribution: Some("block"),
        job_id: 421337,
        step_id: 0,
        ..Default::default()
    }
}

/// Node `node`'s place in the plan, as slurmstepd finds it once per node.
fn place_of(plan: &StepPlan, node: usize, gpus: Option<&str>) -> Place {
    let facts = NodeFacts {
        node,
        gtids: plan.layout.node(node).unwrap(),
        step_gpus: gpus,
        slurm_gave_gpus: true,
    };
    plan.place(None, &facts).unwrap()
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let spec = Spec::parse(Some("chief:1,ps:2,worker:*")).unwrap();
    let admin = Settings::default();
    let keras3 = Settings::from_plugstack(&["keras=3", "tuner=yes"]).unwrap();
    let workers = Spec::parse(Some("worker:*")).unwrap();
    let torch = Settings::from_plugstack(&["torch=yes"]).unwrap();
    let gpus = Some("0,1,2,3,4,5,6,7");
    if !json {
        println!(
            "{:>6} {:>9} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16} {:>14} {:>10}",
            "tasks",
            "bytes",
            "one task cold",
            "plugin per task",
            "with apptainer",
            "keras=3,tuner",
            "worker:*",
            "worker:*,torch",
            "copy baseline",
            "ratio"
        );
    }
    // The largest step whose every TF_CONFIG fits, found by bisection.
    let fits = |n: u32| StepPlan::new(&spec, &admin, &inputs(&step(n))).is_ok();
    let (mut lo, mut hi) = (4096u32, 20000u32);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid
        } else {
            hi = mid - 1
        }
    }
    for tasks in [4, 64, 512, 4096, lo] {
        let s = step(tasks);
        // The rank in the middle of the step: a worker on a node in the middle.
        let node = (tasks / PER_NODE / 2) as usize;
        let cold = measure(|| {
            let plan = StepPlan::new(&spec, &admin, &inputs(&s)).unwrap();
            let place = place_of(&plan, node, gpus);
            let mut renderers = plan.renderers();
            let env = plan
                .task(&place, 0, gpus, None, &|_| false, None, &mut renderers)
                .unwrap();
            env.set.iter().map(|(_, v)| v.len()).sum::<usize>()
        });
        // As slurmstepd does it: the step planned once per node, with the node's buffer made
        // before the tasks fork, shared by the node's tasks; each task renders into it.
        let per_task_of = |spec: &Spec, settings: &Settings, program: Option<&str>| {
            let plan = StepPlan::new(spec, settings, &inputs(&s)).unwrap();
            let local = plan.layout.node(node).unwrap().len() as u32;
            let place = place_of(&plan, node, gpus);
            let mut renderers = plan.renderers();
            let render = measure(|| {
                let env = plan
                    .task(&place, 0, gpus, program, &|_| false, None, &mut renderers)
                    .unwrap();
                env.set.iter().map(|(_, v)| v.len()).sum::<usize>()
            });
            let plan_time = measure(|| {
                let plan = StepPlan::new(spec, settings, &inputs(&s)).unwrap();
                (place_of(&plan, node, gpus), plan.renderers())
            });
            plan_time / local + render
        };
        let per_task_with =
            |settings: &Settings, program: Option<&str>| per_task_of(&spec, settings, program);
        let per_task = per_task_with(&admin, None);
        let per_apptainer_task = per_task_with(&admin, Some("/usr/bin/apptainer"));
        // Every variable of keras=3 and tuner=yes too.
        let per_keras3_task = per_task_with(&keras3, None);
        let per_worker_task = per_task_of(&workers, &admin, None);
        let per_torch_task = per_task_of(&workers, &torch, None);
        let plan = StepPlan::new(&spec, &admin, &inputs(&s)).unwrap();
        let bytes = plan.tf_config(Role::Worker, 0).len();
        let source = vec![b'x'; bytes];
        let copy = measure(|| source.clone());
        let ratio = per_task.as_secs_f64() / copy.as_secs_f64();
        if json {
            println!(
                "{{\"tasks\":{tasks},\"bytes\":{bytes},\"cold_ns\":{},\"per_task_ns\":{},\"apptainer_ns\":{},\"keras3_ns\":{},\"workers_ns\":{},\"torch_ns\":{},\"copy_ns\":{},\"ratio\":{ratio:.2}}}",
                cold.as_nanos(),
                per_task.as_nanos(),
                per_apptainer_task.as_nanos(),
                per_keras3_task.as_nanos(),
                per_worker_task.as_nanos(),
                per_torch_task.as_nanos(),
                copy.as_nanos()
            );
        } else {
            println!(
                "{tasks:>6} {bytes:>9} {:>13.1} us {:>13.1} us {:>13.1} us {:>13.1} us {:>13.1} us {:>13.1} us {:>11.2} us {ratio:>9.1}x",
                cold.as_secs_f64() * 1e6,
                per_task.as_secs_f64() * 1e6,
                per_apptainer_task.as_secs_f64() * 1e6,
                per_keras3_task.as_secs_f64() * 1e6,
                per_worker_task.as_secs_f64() * 1e6,
                per_torch_task.as_secs_f64() * 1e6,
                copy.as_secs_f64() * 1e6,
            );
        }
    }
}
