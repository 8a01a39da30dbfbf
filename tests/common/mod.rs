//! Shared helpers for the table tests: build a step plan from plain strings, read a task's
//! TF_CONFIG as JSON.
#![allow(dead_code)]

pub mod cluster;
pub mod plugstack;
pub mod release;

use serde_json::Value;
use tfcluster::core::{GpuAction, NodeFacts, Place, Settings, Spec, StepInputs, StepPlan};

/// The text of a file of the repository (`path` relative to it).
pub fn repo_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// docs/admin-guide.md as [`doc_words`] gives it.
pub fn admin_guide_words() -> String {
    doc_words("docs/admin-guide.md")
}

/// A page of the docs (its path in the repository) with every run of white space made one
/// space, so that a quote is found wherever the page breaks its lines.
pub fn doc_words(page: &str) -> String {
    repo_file(page)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A step: node list, tasks per node, distribution (None = srun without -m).
pub fn step<'a>(
    nodelist: &'a str,
    tasks_per_node: &'a str,
    distribution: Option<&'a str>,
) -> StepInputs<'a> {
    StepInputs {
        nodelist,
        tasks_per_node,
        distribution,
        job_id: 1234,
        step_id: 0,
        ..Default::default()
    }
}

pub fn plan(spec: &str, admin: &[&str], step: &StepInputs) -> StepPlan {
    try_plan(spec, admin, step).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

pub fn try_plan(
    spec: &str,
    admin: &[&str],
    step: &StepInputs,
) -> tfcluster::core::Result<StepPlan> {
    let spec = Spec::parse(Some(spec))?;
    StepPlan::new(&spec, &Settings::from_plugstack(admin)?, step)
}

/// The global rank's (node, slot).
pub fn where_is(plan: &StepPlan, rank: u32) -> (usize, usize) {
    let p = plan.layout.ranks[rank as usize];
    (p.node as usize, p.slot as usize)
}

/// Node `node`'s place in a whole step's `plan`, with `step_gpus` its CUDA_VISIBLE_DEVICES:
/// Slurm's ids there are the plan's.
pub fn place(plan: &StepPlan, node: usize, step_gpus: Option<&str>) -> Place {
    let facts = NodeFacts {
        node,
        gtids: plan.layout.node(node).expect("a node of the plan"),
        step_gpus,
        slurm_gave_gpus: true,
    };
    plan.place(None, &facts)
        .expect("Slurm's ids are the plan's")
}

/// The whole environment of global rank `rank`, given the node's and the task's GPU lists,
/// as `NAME=value` lines (what `task_init` sets).
pub fn environment(
    plan: &StepPlan,
    rank: u32,
    step: Option<&str>,
    task: Option<&str>,
) -> Vec<String> {
    environment_running(plan, rank, step, task, None)
}

/// [`environment`] of a task whose program (argv\[0\]) is `program`.
pub fn environment_running(
    plan: &StepPlan,
    rank: u32,
    step: Option<&str>,
    task: Option<&str>,
    program: Option<&str>,
) -> Vec<String> {
    let (node, slot) = where_is(plan, rank);
    let mut renderers = plan.renderers();
    let env = plan
        .task(
            &place(plan, node, step),
            slot,
            task,
            program,
            &|_| false,
            None,
            &mut renderers,
        )
        .unwrap();
    env.set
        .iter()
        .map(|(name, value)| {
            let value = value.strip_suffix('\0').expect("every value ends in a NUL");
            assert!(!value.contains('\0'), "{name}: a NUL inside");
            format!("{name}={value}")
        })
        .collect()
}

/// TF_CONFIG of global rank `rank`, parsed.
pub fn tf_config(plan: &StepPlan, rank: u32) -> Value {
    let (node, slot) = where_is(plan, rank);
    let mut renderers = plan.renderers();
    let env = plan
        .task(
            &place(plan, node, None),
            slot,
            None,
            None,
            &|_| false,
            None,
            &mut renderers,
        )
        .unwrap();
    let text = plan.tf_config(env.role, env.index);
    // What slurmstepd hands the task: rendered in the node's buffer, the same text.
    assert_eq!(env.get("TF_CONFIG"), Some(text.as_str()));
    serde_json::from_str(&text).expect("valid JSON")
}

/// CUDA_VISIBLE_DEVICES of global rank `rank` given the node's and the task's lists.
pub fn gpus(plan: &StepPlan, rank: u32, step: Option<&str>, task: Option<&str>) -> GpuAction {
    let (node, slot) = where_is(plan, rank);
    let mut renderers = plan.renderers();
    plan.task(
        &place(plan, node, step),
        slot,
        task,
        None,
        &|_| false,
        None,
        &mut renderers,
    )
    .unwrap()
    .gpus
}

pub fn set(v: &str) -> GpuAction {
    GpuAction::Set(v.to_string())
}
