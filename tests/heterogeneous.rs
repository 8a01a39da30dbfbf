//! Heterogeneous jobs and steps (docs/user-guide.md, parameter servers on CPU nodes): one TF
//! cluster over every component, each node rebuilding it from the layouts slurmctld made
//! (src/core/het.rs). First the rules, as tables; then, on the test cluster's CPU-only nodes
//! `cpu1 cpu2` (partition `cpu`, no GRES) and its GPU nodes (partition `gpu`), the jobs and
//! steps as users write them, every task checked against where Slurm really ran it.

#![allow(clippy::type_complexity)] // tables of cases

mod common;
use common::cluster::{
    cluster_pgrep, dir, node_error, parse, sbatch, sh, sh_ok, stop_line, summary, tool, wait_for,
    PlugStack,
};
use common::release;
use common::{plan, step};
use tfcluster::core::het::{self, Answer, ComponentLayout, HetLayout, Own, StepKind};
use tfcluster::core::{Component, Error, NodeFacts, NodeGpus, Place, Role, Spec, StepInputs};

// ---- the rules ------------------------------------------------------------------------------

/// A component's layout: its node list and each node's task ids.
fn layout(node_list: &str, tids: &[&[u32]]) -> ComponentLayout {
    ComponentLayout {
        node_list: node_list.into(),
        tids: tids.iter().map(|t| t.to_vec()).collect(),
        tasks: tids.iter().map(|t| t.len() as u32).sum(),
    }
}

fn answer(component: u32, job_id: u32, layout: ComponentLayout) -> Answer {
    Answer {
        component,
        job_id,
        layout: Ok(layout),
    }
}

fn refused(component: u32, job_id: u32) -> Answer {
    Answer {
        component,
        job_id,
        layout: Err("Invalid job id specified".into()),
    }
}

/// What a slurmstepd's SPANK items and environment say, and how it must get the step's ranks.
#[rustfmt::skip]
#[test]
fn the_step_kind_comes_from_slurms_counts() {
    struct Row { what: &'static str, c: Component<'static>, kind: Result<StepKind, Error> }
    let rows = [
        Row { what: "a whole step",
              c: Component { nodes: 2, tasks: 4, step_nodes: Some("2"), step_tasks: Some("4"), het_size: None },
              kind: Ok(StepKind::Whole) },
        Row { what: "a whole step, counts not in the environment",
              c: Component { nodes: 1, tasks: 1, step_nodes: None, step_tasks: None, het_size: None },
              kind: Ok(StepKind::Whole) },
        Row { what: "a component of a heterogeneous step: fewer tasks than the step",
              c: Component { nodes: 1, tasks: 2, step_nodes: Some("2"), step_tasks: Some("4"), het_size: None },
              kind: Ok(StepKind::HetStep { step_tasks: 4 }) },
        Row { what: "a component of a heterogeneous step: same tasks, fewer nodes",
              c: Component { nodes: 1, tasks: 4, step_nodes: Some("2"), step_tasks: Some("4"), het_size: None },
              kind: Ok(StepKind::HetStep { step_tasks: 4 }) },
        Row { what: "a step of a heterogeneous job",
              c: Component { nodes: 1, tasks: 2, step_nodes: Some("2"), step_tasks: Some("4"), het_size: Some("2") },
              kind: Ok(StepKind::HetJob { size: 2, step_tasks: 4 }) },
        Row { what: "a step of one component of a heterogeneous job",
              c: Component { nodes: 1, tasks: 2, step_nodes: Some("1"), step_tasks: Some("2"), het_size: Some("3") },
              kind: Ok(StepKind::HetJob { size: 3, step_tasks: 2 }) },
        Row { what: "SLURM_HET_SIZE not a count",
              c: Component { nodes: 1, tasks: 2, step_nodes: Some("1"), step_tasks: Some("2"), het_size: Some("two") },
              kind: Err(Error::HetSize { value: "two".into() }) },
        Row { what: "SLURM_HET_SIZE 0",
              c: Component { nodes: 1, tasks: 2, step_nodes: Some("1"), step_tasks: Some("2"), het_size: Some("0") },
              kind: Err(Error::HetSize { value: "0".into() }) },
        Row { what: "a heterogeneous step without its task count",
              c: Component { nodes: 1, tasks: 2, step_nodes: Some("2"), step_tasks: None, het_size: None },
              kind: Err(Error::HetStepTasks) },
    ];
    for row in rows {
        assert_eq!(row.c.kind(), row.kind, "{}", row.what);
    }
}

#[rustfmt::skip]
#[test]
fn a_heterogeneous_jobs_component_ids_come_from_the_allocation() {
    // (what, the environment, the component count, the job ids or the error)
    let rows: [(&str, &[(&str, &str)], u32, Result<Vec<u32>, Error>); 4] = [
        ("salloc and sbatch set HET_GROUP", &[("SLURM_JOB_ID_HET_GROUP_0", "7"), ("SLURM_JOB_ID_HET_GROUP_1", "8")], 2, Ok(vec![7, 8])),
        ("srun's own het job sets only PACK_GROUP", &[("SLURM_JOB_ID_PACK_GROUP_0", "7"), ("SLURM_JOB_ID_PACK_GROUP_1", "8")], 2, Ok(vec![7, 8])),
        ("HET_GROUP wins", &[("SLURM_JOB_ID_HET_GROUP_0", "7"), ("SLURM_JOB_ID_PACK_GROUP_0", "9")], 1, Ok(vec![7])),
        ("a component missing", &[("SLURM_JOB_ID_HET_GROUP_0", "7")], 2, Err(Error::HetJobId { component: 1 })),
    ];
    for (what, vars, size, want) in rows {
        let env = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
        assert_eq!(het::job_ids(size, env), want, "{what}");
    }
}

/// One row of [`only_jobs_slurmctld_vouches_for_are_components`]: what the environment names,
/// what slurmctld's records say, and what the node may ask about and stop.
struct Vouch {
    what: &'static str,
    /// `SLURM_JOB_ID_HET_GROUP_0`, `_1`, ...
    named: &'static [&'static str],
    /// slurmctld's records: (job, user, heterogeneous job); a job not listed does not exist.
    records: &'static [(u32, u32, u32)],
    /// What the node asks slurmctld, in order.
    asked: &'static [u32],
    want: Result<Vec<u32>, Error>,
}

const USER: u32 = 1001;
const OTHER_USER: u32 = 1002;

fn not_vouched(job_id: u32, named: &str, leader: u32) -> Error {
    Error::HetJobNotVouched {
        job_id,
        named: named.into(),
        leader,
        reason: String::new(),
    }
}

/// The node's own job is 7 (`S_JOB_ID`), run by [`USER`] (`S_JOB_UID`): each named job must
/// be, by slurmctld's records, a component of the first's heterogeneous job and the user's;
/// anything else is refused before anything is asked about or stopped. The line is the same
/// whoever's the job is.
#[rustfmt::skip]
#[test]
fn only_jobs_slurmctld_vouches_for_are_components() {
    let rows = [
        Vouch { what: "salloc's het job: both components are the user's",
            named: &["7", "8"], records: &[(7, USER, 7), (8, USER, 7)],
            asked: &[7, 8], want: Ok(vec![7, 8]) },
        Vouch { what: "the node's job is the second component",
            named: &["6", "7"], records: &[(6, USER, 6), (7, USER, 6)],
            asked: &[6, 7], want: Ok(vec![6, 7]) },
        Vouch { what: "another user's job named as a component (srun --export)",
            named: &["7", "17"], records: &[(7, USER, 0), (17, OTHER_USER, 0)],
            asked: &[7], want: Err(not_vouched(7, "SLURM_JOB_ID_HET_GROUP_0", 7)) },
        Vouch { what: "another user's job named beside the user's own heterogeneous job",
            named: &["7", "8", "17"], records: &[(7, USER, 7), (8, USER, 7), (17, OTHER_USER, 0)],
            asked: &[7, 8, 17], want: Err(not_vouched(17, "SLURM_JOB_ID_HET_GROUP_2", 7)) },
        Vouch { what: "another user's heterogeneous job as the leader",
            named: &["16", "17"], records: &[(7, USER, 0), (16, OTHER_USER, 16), (17, OTHER_USER, 16)],
            asked: &[16], want: Err(not_vouched(16, "SLURM_JOB_ID_HET_GROUP_0", 16)) },
        Vouch { what: "the user's own plain job named as a component",
            named: &["7", "9"], records: &[(7, USER, 7), (9, USER, 0)],
            asked: &[7, 9], want: Err(not_vouched(9, "SLURM_JOB_ID_HET_GROUP_1", 7)) },
        Vouch { what: "the user's other heterogeneous job, without the node's own",
            named: &["20", "21"], records: &[(7, USER, 0), (20, USER, 20), (21, USER, 20)],
            asked: &[20, 21, 7], want: Err(not_vouched(7, "the step's own job", 20)) },
        Vouch { what: "a job slurmctld does not know",
            named: &["7", "999999"], records: &[(7, USER, 7)],
            asked: &[7, 999999], want: Err(not_vouched(999999, "SLURM_JOB_ID_HET_GROUP_1", 7)) },
        Vouch { what: "slurmctld does not answer: refused with its reason",
            named: &["7", "8"], records: &[(7, USER, 7)],
            asked: &[7, 8], want: Err(Error::HetJobNotVouched { job_id: 8, named: "SLURM_JOB_ID_HET_GROUP_1".into(), leader: 7,
                reason: " (slurmctld: Unable to contact slurm controller)".into() }) },
        Vouch { what: "a component id that is not a number asks nothing",
            named: &["7", "x"], records: &[(7, USER, 7)],
            asked: &[], want: Err(Error::HetJobId { component: 1 }) },
    ];
    for row in rows {
        let env = |name: &str| {
            let g: usize = name.strip_prefix("SLURM_JOB_ID_HET_GROUP_")?.parse().ok()?;
            row.named.get(g).map(|v| v.to_string())
        };
        let mut asked = Vec::new();
        let mut lookup = |job_id: u32| {
            asked.push(job_id);
            if job_id == 8 && row.what.starts_with("slurmctld does not answer") {
                return Err("Unable to contact slurm controller".to_string());
            }
            Ok(row.records.iter().find(|r| r.0 == job_id).map(|&(_, user_id, het_job_id)| {
                het::JobRecord { user_id, het_job_id }
            }))
        };
        let got = het::vouched_job_ids(row.named.len() as u32, env, 7, USER, &mut lookup);
        assert_eq!(got, row.want, "{}", row.what);
        assert_eq!(asked, row.asked, "{}: what the node asks slurmctld", row.what);
    }
}

/// One row of [`the_components_make_one_step`]: slurmctld's answers, the node that asks, and
/// the step it rebuilds (each rank's host, the node's first rank and its slots) or the error.
struct Rebuild {
    what: &'static str,
    answers: Vec<Answer>,
    step_tasks: u32,
    own: Own<'static>,
    want: Result<Rebuilt, Error>,
}

#[derive(Debug, PartialEq)]
struct Rebuilt {
    rank_hosts: Vec<&'static str>,
    own_offset: u32,
    own_host: &'static str,
    slots: Vec<usize>,
    jobs: Vec<u32>,
}

/// This node: job 7 unless said otherwise, one node and `gtids` there, its host name.
fn own(
    node: usize,
    nodes: u32,
    tasks: u32,
    gtids: &'static [u32],
    hostname: &'static str,
) -> Own<'static> {
    Own {
        job_id: 7,
        node,
        nodes,
        tasks,
        gtids,
        hostname: Some(hostname),
    }
}

#[rustfmt::skip]
#[test]
fn the_components_make_one_step() {
    let rows = vec![
        Rebuild { what: "ps on a CPU node, workers on two GPU nodes: the GPU node",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1, 2]])),
                          answer(1, 7, layout("n[011-012]", &[&[0, 1, 2], &[3]]))],
            step_tasks: 7, own: own(1, 2, 4, &[3], "n012"),
            want: Ok(Rebuilt { rank_hosts: vec!["cpu1", "cpu1", "cpu1", "n011", "n011", "n011", "n012"],
                               own_offset: 3, own_host: "n012", slots: vec![0], jobs: vec![7] }) },
        Rebuild { what: "the same step: the CPU node",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1, 2]])),
                          answer(1, 7, layout("n[011-012]", &[&[0, 1, 2], &[3]]))],
            step_tasks: 7, own: own(0, 1, 3, &[0, 1, 2], "cpu1"),
            want: Ok(Rebuilt { rank_hosts: vec!["cpu1", "cpu1", "cpu1", "n011", "n011", "n011", "n012"],
                               own_offset: 0, own_host: "cpu1", slots: vec![0, 1, 2], jobs: vec![7] }) },
        Rebuild { what: "a cyclic component: task ids are not in node order",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0]])),
                          answer(1, 7, layout("n9,n10", &[&[0, 2], &[1, 3]]))],
            step_tasks: 5, own: own(1, 2, 4, &[1, 3], "n10"),
            want: Ok(Rebuilt { rank_hosts: vec!["cpu1", "n9", "n10", "n9", "n10"],
                               own_offset: 1, own_host: "n10", slots: vec![0, 1], jobs: vec![7] }) },
        Rebuild { what: "a heterogeneous job: components are jobs of their own, told apart by job id",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1]])),
                          answer(1, 8, layout("n9", &[&[0, 1]]))],
            step_tasks: 4, own: Own { job_id: 8, ..own(0, 1, 2, &[0, 1], "whatever") },
            want: Ok(Rebuilt { rank_hosts: vec!["cpu1", "cpu1", "n9", "n9"],
                               own_offset: 2, own_host: "n9", slots: vec![0, 1], jobs: vec![7, 8] }) },
        Rebuild { what: "--het-group=0,2: the component not in the step is refused and skipped",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1]])), refused(1, 8),
                          answer(2, 9, layout("n9", &[&[0, 1]]))],
            step_tasks: 4, own: Own { job_id: 9, ..own(0, 1, 2, &[0, 1], "n9") },
            want: Ok(Rebuilt { rank_hosts: vec!["cpu1", "cpu1", "n9", "n9"],
                               own_offset: 2, own_host: "n9", slots: vec![0, 1], jobs: vec![7, 9] }) },
        Rebuild { what: "two components share a node: ports and slots count every rank on it",
            answers: vec![answer(0, 7, layout("n9", &[&[0]])),
                          answer(1, 8, layout("n9,n10", &[&[0, 1], &[2]]))],
            step_tasks: 4, own: Own { job_id: 8, ..own(0, 2, 3, &[0, 1], "n9") },
            want: Ok(Rebuilt { rank_hosts: vec!["n9", "n9", "n9", "n10"],
                               own_offset: 1, own_host: "n9", slots: vec![1, 2], jobs: vec![7, 8] }) },
        Rebuild { what: "components of equal shape: the host name decides",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1]])),
                          answer(1, 7, layout("cpu2", &[&[0, 1]]))],
            step_tasks: 4, own: own(0, 1, 2, &[0, 1], "cpu2"),
            want: Ok(Rebuilt { rank_hosts: vec!["cpu1", "cpu1", "cpu2", "cpu2"],
                               own_offset: 2, own_host: "cpu2", slots: vec![0, 1], jobs: vec![7] }) },
        Rebuild { what: "components of equal shape and a host name that is not the node's",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1]])),
                          answer(1, 7, layout("cpu2", &[&[0, 1]]))],
            step_tasks: 4, own: own(0, 1, 2, &[0, 1], "login3"),
            want: Err(Error::HetOwnComponent { host: "login3".into(), fitting: 2 }) },
        Rebuild { what: "no component has this node's tasks",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1]]))],
            step_tasks: 2, own: own(0, 1, 1, &[0], "cpu1"),
            want: Err(Error::HetOwnComponent { host: "cpu1".into(), fitting: 0 }) },
        Rebuild { what: "a component slurmctld refused holds tasks of the step",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1]])), refused(1, 7)],
            step_tasks: 4, own: own(0, 1, 2, &[0, 1], "cpu1"),
            want: Err(Error::HetLayoutsShort { found: 2, step_tasks: 4, refused: "1: Invalid job id specified".into() }) },
        Rebuild { what: "more tasks than the step (a job id that names another component)",
            answers: vec![answer(0, 7, layout("cpu1", &[&[0, 1]])), answer(1, 7, layout("cpu1", &[&[0, 1]]))],
            step_tasks: 3, own: own(0, 1, 2, &[0, 1], "cpu1"),
            want: Err(Error::HetLayoutsShort { found: 4, step_tasks: 3, refused: "none".into() }) },
        Rebuild { what: "a layout whose task ids repeat",
            answers: vec![answer(0, 7, ComponentLayout { node_list: "n9,n10".into(), tids: vec![vec![0], vec![0]], tasks: 2 })],
            step_tasks: 2, own: own(0, 2, 2, &[0], "n9"),
            want: Err(Error::HetLayout { component: 0, reason: "task id 0 is out of its 2 tasks or listed twice".into() }) },
        Rebuild { what: "a layout with fewer nodes than task lists",
            answers: vec![answer(0, 7, ComponentLayout { node_list: "n9".into(), tids: vec![vec![0], vec![1]], tasks: 2 })],
            step_tasks: 2, own: own(0, 1, 2, &[0], "n9"),
            want: Err(Error::HetLayout { component: 0, reason: "1 nodes (n9) but task ids for 2".into() }) },
    ];
    for row in rows {
        let got = HetLayout::new(&row.answers, row.step_tasks, row.own).and_then(|het| {
            let layout = het.layout()?;
            Ok(Rebuilt {
                rank_hosts: layout.ranks.iter().map(|p| leak(&het.hosts[p.node as usize])).collect(),
                own_offset: het.own_offset,
                own_host: leak(&het.hosts[het.own_node()]),
                slots: het.slots(&layout, row.own.gtids),
                jobs: het.jobs.clone(),
            })
        });
        assert_eq!(got, row.want, "{}", row.what);
    }
}

/// One row of [`each_component_is_asked_for_until_the_step_is_whole`]: the step's kind and
/// environment, what slurmctld answers for each (job, component), what the node asks, and the
/// step's hosts and jobs it rebuilds.
struct Probe {
    what: &'static str,
    kind: StepKind,
    /// The component jobs slurmctld vouched for ([`het::vouched_job_ids`]).
    jobs: &'static [u32],
    slurmctld: Vec<((u32, Option<u32>), ComponentLayout)>,
    asked: Vec<(u32, Option<u32>)>,
    want: Result<Option<(Vec<&'static str>, Vec<u32>)>, Error>,
}

#[rustfmt::skip]
#[test]
fn each_component_is_asked_for_until_the_step_is_whole() {
    let both = vec![((7, None), layout("cpu1", &[&[0, 1]])), ((8, None), layout("n9", &[&[0, 1]]))];
    let rows = vec![
        Probe { what: "a whole step asks nothing",
            kind: StepKind::Whole, jobs: &[], slurmctld: vec![],
            asked: vec![], want: Ok(None) },
        Probe { what: "a heterogeneous job: each component's job, once",
            kind: StepKind::HetJob { size: 2, step_tasks: 4 }, jobs: &[7, 8], slurmctld: both,
            asked: vec![(7, None), (8, None)], want: Ok(Some((vec!["cpu1", "n9"], vec![7, 8]))) },
        Probe { what: "--het-group=0,2: the component outside the step is refused and skipped",
            kind: StepKind::HetJob { size: 3, step_tasks: 4 }, jobs: &[7, 8, 9],
            slurmctld: vec![((7, None), layout("cpu1", &[&[0, 1]])), ((9, None), layout("n9", &[&[0, 1]]))],
            asked: vec![(7, None), (8, None), (9, None)], want: Ok(Some((vec!["cpu1", "n9"], vec![7, 9]))) },
        Probe { what: "a heterogeneous step: components of the node's job until the tasks add up",
            kind: StepKind::HetStep { step_tasks: 4 }, jobs: &[],
            slurmctld: vec![((7, Some(0)), layout("cpu1", &[&[0, 1]])), ((7, Some(1)), layout("n9", &[&[0, 1]])),
                            ((7, Some(2)), layout("n10", &[&[0]]))],
            asked: vec![(7, Some(0)), (7, Some(1))], want: Ok(Some((vec!["cpu1", "n9"], vec![7]))) },
        Probe { what: "a heterogeneous step: a refusal ends the asking",
            kind: StepKind::HetStep { step_tasks: 4 }, jobs: &[],
            slurmctld: vec![((7, Some(0)), layout("cpu1", &[&[0, 1]])), ((7, Some(2)), layout("n9", &[&[0, 1]]))],
            asked: vec![(7, Some(0)), (7, Some(1))],
            want: Err(Error::HetLayoutsShort { found: 2, step_tasks: 4, refused: "1: Invalid job id specified".into() }) },
        Probe { what: "components that never add up: at most MAX_COMPONENTS asks",
            kind: StepKind::HetStep { step_tasks: 4 }, jobs: &[],
            slurmctld: (0..het::MAX_COMPONENTS + 1).map(|c| ((7, Some(c)), layout("n9", &[&[]]))).collect(),
            asked: (0..het::MAX_COMPONENTS).map(|c| (7, Some(c))).collect(),
            want: Err(Error::HetLayoutsShort { found: 0, step_tasks: 4, refused: "none".into() }) },
    ];
    for row in rows {
        let mut asked = Vec::new();
        let mut ask = |job_id, component| {
            asked.push((job_id, component));
            let found = row.slurmctld.iter().find(|(key, _)| *key == (job_id, component));
            found.map(|(_, layout)| layout.clone()).ok_or_else(|| "Invalid job id specified".to_string())
        };
        let own = own(0, 1, 2, &[0, 1], "cpu1");
        let got = het::probe(&row.kind, own, row.jobs, &mut ask)
            .map(|het| het.map(|h| (h.hosts.iter().map(|h| leak(h)).collect(), h.jobs)));
        assert_eq!(got, row.want, "{}", row.what);
        assert_eq!(asked, row.asked, "{}: what the node asks", row.what);
    }
}

/// One row of [`a_nodes_place_comes_from_slurm_or_from_the_components`]: the step, what Slurm
/// says of the node, and its place, then the CUDA_VISIBLE_DEVICES tfcluster sets for its first
/// task (whose own list is the node's) and that task's `srun -v` line.
struct Placing {
    what: &'static str,
    /// The rebuilt heterogeneous step, or `None` for a whole step on `a,b` with `2(x2)`.
    het: Option<HetLayout>,
    facts: NodeFacts<'static>,
    want: Result<Place, Error>,
    first_task_gpus: Option<&'static str>,
    first_task_report: &'static str,
}

#[rustfmt::skip]
#[test]
fn a_nodes_place_comes_from_slurm_or_from_the_components() {
    let ps_on_cpu = |own| het_layout(vec![answer(0, 7, layout("cpu1", &[&[0, 1, 2]])),
                                          answer(1, 7, layout("n[011-012]", &[&[0, 1, 2], &[3]]))], 7, own);
    let sharing = het_layout(vec![answer(0, 7, layout("n9", &[&[0]])), answer(1, 8, layout("n9,n10", &[&[0, 1], &[2]]))],
                             4, Own { job_id: 8, ..own(0, 2, 3, &[0, 1], "n9") });
    let rows = vec![
        Placing { what: "a whole step: Slurm's node and ids, each task its local slot",
            het: None, facts: NodeFacts { node: 1, gtids: &[2, 3], step_gpus: Some("0,1"), slurm_gave_gpus: true },
            want: Ok(Place { node: 1, slots: vec![0, 1], rank_offset: 0, gpus: NodeGpus::Step(Some("0,1".into())) }),
            first_task_gpus: Some("0"), first_task_report: "rank 2 is worker:0 at b:" },
        Placing { what: "a whole step keeps a list Slurm did not give (no SLURM_STEP_GPUS)",
            het: None, facts: NodeFacts { node: 0, gtids: &[0, 1], step_gpus: Some("6,7"), slurm_gave_gpus: false },
            want: Ok(Place { node: 0, slots: vec![0, 1], rank_offset: 0, gpus: NodeGpus::Step(Some("6,7".into())) }),
            first_task_gpus: Some("6"), first_task_report: "rank 0 is chief:0 at a:" },
        Placing { what: "a whole step whose ids are not the plan's",
            het: None, facts: NodeFacts { node: 1, gtids: &[1, 3], ..Default::default() },
            want: Err(Error::LayoutMismatch { node: 1, host: "b".into(), expected: "2,3".into(), actual: "1,3".into() }),
            first_task_gpus: None, first_task_report: "" },
        Placing { what: "a node index outside the step",
            het: None, facts: NodeFacts { node: 2, gtids: &[], ..Default::default() },
            want: Err(Error::NodeOutOfRange { node: 2, nodes: 2 }),
            first_task_gpus: None, first_task_report: "" },
        Placing { what: "a heterogeneous GPU node: its place and ranks from the components",
            het: Some(ps_on_cpu(own(1, 2, 4, &[3], "n012"))),
            facts: NodeFacts { node: 1, gtids: &[3], step_gpus: Some("0"), slurm_gave_gpus: true },
            want: Ok(Place { node: 2, slots: vec![0], rank_offset: 3, gpus: NodeGpus::Step(Some("0".into())) }),
            first_task_gpus: Some("0"), first_task_report: "rank 6 is worker:4 at n012:" },
        Placing { what: "a heterogeneous CPU node that Slurm gave no GPU: its tasks see none",
            het: Some(ps_on_cpu(own(0, 1, 3, &[0, 1, 2], "cpu1"))),
            facts: NodeFacts { node: 0, gtids: &[0, 1, 2], step_gpus: Some("7"), slurm_gave_gpus: false },
            want: Ok(Place { node: 0, slots: vec![0, 1, 2], rank_offset: 0, gpus: NodeGpus::Hidden }),
            first_task_gpus: Some(""), first_task_report: "rank 0 is chief:0 at cpu1:" },
        Placing { what: "two components share a node: the second's tasks take the slots after the first's",
            het: Some(sharing), facts: NodeFacts { node: 0, gtids: &[0, 1], step_gpus: None, slurm_gave_gpus: false },
            want: Ok(Place { node: 0, slots: vec![1, 2], rank_offset: 1, gpus: NodeGpus::Hidden }),
            first_task_gpus: Some(""), first_task_report: "rank 1 is ps:0 at n9:" },
    ];
    for row in rows {
        let plan = match &row.het {
            Some(het) => plan("chief:1,ps:1,worker:*", &[], &StepInputs { het: Some(het), ..Default::default() }),
            None => plan("chief:1,ps:1,worker:*", &[], &step("a,b", "2(x2)", None)),
        };
        let place = plan.place(row.het.as_ref(), &row.facts);
        assert_eq!(place, row.want, "{}", row.what);
        let Ok(place) = place else { continue };
        let mut renderers = plan.renderers();
        let task_gpus = row.facts.step_gpus;
        let env = plan.task(&place, 0, task_gpus, None, &|_| false, None, &mut renderers).unwrap();
        assert_eq!(env.get("CUDA_VISIBLE_DEVICES"), row.first_task_gpus, "{}", row.what);
        let report = env.report(task_gpus);
        let gpus = match row.first_task_gpus {
            Some("") => "none",
            Some(gpus) => gpus,
            None => task_gpus.unwrap_or("unset"),
        };
        assert!(report.starts_with(row.first_task_report) && report.ends_with(&format!("GPUs {gpus}")),
                "{}: {report}", row.what);
    }
}

/// A heterogeneous job's components are jobs of their own, and each node plans with its own
/// job id: the ports follow the first component's, so every node hands out the same cluster.
#[test]
fn every_component_of_a_heterogeneous_job_picks_the_same_ports() {
    let answers = || {
        vec![
            answer(0, 7, layout("cpu1", &[&[0, 1]])),
            answer(1, 8, layout("n9", &[&[0, 1]])),
        ]
    };
    let cpu1 = het_layout(
        answers(),
        4,
        Own {
            job_id: 7,
            ..own(0, 1, 2, &[0, 1], "cpu1")
        },
    );
    let n9 = het_layout(
        answers(),
        4,
        Own {
            job_id: 8,
            ..own(0, 1, 2, &[0, 1], "n9")
        },
    );
    let step = |het, job_id| StepInputs {
        het: Some(het),
        job_id,
        step_id: 0,
        ..Default::default()
    };
    let on_cpu1 = plan("chief:1,ps:1,worker:*", &[], &step(&cpu1, 7));
    let on_n9 = plan("chief:1,ps:1,worker:*", &[], &step(&n9, 8));
    assert_eq!(
        on_cpu1.tf_config(Role::Chief, 0),
        on_n9.tf_config(Role::Chief, 0)
    );
}

/// A task on a node Slurm gave no GPU sees none also inside Apptainer, which may drop the host's
/// variables (`--cleanenv`) and keeps only its own names.
#[test]
fn a_component_without_gpus_hides_them_from_apptainer_too() {
    let cpu1 = het_layout(
        vec![
            answer(0, 7, layout("cpu1", &[&[0, 1]])),
            answer(1, 7, layout("n9", &[&[0, 1]])),
        ],
        4,
        own(0, 1, 2, &[0, 1], "cpu1"),
    );
    let step = StepInputs {
        het: Some(&cpu1),
        ..Default::default()
    };
    let plan = plan("chief:1,ps:1,worker:*", &["apptainer_env=always"], &step);
    let facts = NodeFacts {
        node: 0,
        gtids: &[0, 1],
        step_gpus: Some("7"),
        slurm_gave_gpus: false,
    };
    let place = plan.place(Some(&cpu1), &facts).unwrap();
    let mut renderers = plan.renderers();
    let env = plan
        .task(&place, 0, Some("7"), None, &|_| false, None, &mut renderers)
        .unwrap();
    for name in [
        "CUDA_VISIBLE_DEVICES",
        "APPTAINERENV_CUDA_VISIBLE_DEVICES",
        "SINGULARITYENV_CUDA_VISIBLE_DEVICES",
    ] {
        assert_eq!(env.get(name), Some(""), "{name}");
    }
}

fn het_layout(answers: Vec<Answer>, step_tasks: u32, own: Own) -> HetLayout {
    HetLayout::new(&answers, step_tasks, own).unwrap()
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

// ---- on the test cluster ----------------------------------------------------------------------

/// The task program: tests/cluster/report.sh, 1 s after the start. A component whose tasks have
/// all ended has no layout left at slurmctld, so a component that ended before another's nodes
/// started would stop the step (as a TensorFlow task does not: each waits for the others).
fn report() -> String {
    format!("bash -c 'sleep 1; exec {}'", tool("report.sh"))
}

/// (what, command with `{r}` for the task program, what each rank got: `role:index@node gpus`,
/// `none` for an empty CUDA_VISIBLE_DEVICES). Every command runs with CUDA_VISIBLE_DEVICES=7
/// in srun's environment, as on a GPU login node: the CPU components' tasks must not keep it.
#[rustfmt::skip]
const STEPS: &[(&str, &str, &[&str])] = &[
    ("salloc's het job: chief and ps on a CPU node, workers on two GPU nodes",
     "salloc -p cpu -w cpu1 -n3 : -p gpu -w n011,n012 -N2 --ntasks-per-node=2 --gres=gpu:4 \
      srun --het-group=0,1 --tf-cluster=chief:1,ps:2,worker:* {r}",
     &["chief:0@cpu1 none", "ps:0@cpu1 none", "ps:1@cpu1 none",
       "worker:0@n011 0,1", "worker:1@n011 2,3", "worker:2@n012 0,1", "worker:3@n012 2,3"]),
    ("srun's own het job (srun A : B outside an allocation)",
     "srun -p cpu -w cpu2 -n2 --tf-cluster=chief:1,ps:1,worker:* {r} : -p gpu -w n9 -n2 --gres=gpu:2 {r}",
     &["chief:0@cpu2 none", "ps:0@cpu2 none", "worker:0@n9 0", "worker:1@n9 1"]),
    ("a het step inside one allocation of CPU and GPU nodes",
     "salloc -p mixed -w cpu1,n9,n10 -N3 --exclusive \
      srun -N1 -n3 -w cpu1 --tf-cluster=chief:1,ps:2,worker:* {r} : -N2 -n4 -w n9,n10 --gres=gpu:2 {r}",
     &["chief:0@cpu1 none", "ps:0@cpu1 none", "ps:1@cpu1 none",
       "worker:0@n9 0", "worker:1@n9 1", "worker:2@n10 0", "worker:3@n10 1"]),
    ("--het-group=0,2 of three components",
     "salloc -p cpu -w cpu1 -n2 : -p cpu -w cpu2 -n1 : -p gpu -w n9 -n2 --gres=gpu:2 \
      srun --het-group=0,2 --tf-cluster=chief:1,ps:1,worker:* {r}",
     &["chief:0@cpu1 none", "ps:0@cpu1 none", "worker:0@n9 0", "worker:1@n9 1"]),
    ("a plain srun in a het allocation (component 0 alone)",
     "salloc -p cpu -w cpu1 -n2 : -p gpu -w n9 -n1 srun --tf-cluster=ps:1,worker:* {r}",
     &["ps:0@cpu1 none", "worker:0@cpu1 none"]),
    ("components of equal shape (one node, two tasks each): told apart by host name",
     "salloc -p cpu -w cpu1,cpu2 -N2 --exclusive srun -N1 -n2 -w cpu1 --tf-cluster=ps:1,worker:* {r} : -N1 -n2 -w cpu2 {r}",
     &["ps:0@cpu1 none", "worker:0@cpu1 none", "worker:1@cpu2 none", "worker:2@cpu2 none"]),
    ("a cyclic GPU component",
     "salloc -p cpu -w cpu1 -n1 : -p gpu -w n9,n10 -N2 --ntasks-per-node=2 --gres=gpu:2 \
      srun --het-group=0,1 -m cyclic --tf-cluster=chief:1,worker:* {r}",
     &["chief:0@cpu1 none", "worker:0@n9 0", "worker:1@n10 0", "worker:2@n9 1", "worker:3@n10 1"]),
];

fn with_inherited_gpus(command: &str) -> String {
    format!(
        "CUDA_VISIBLE_DEVICES=7 {}",
        command.replace("{r}", &report())
    )
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn every_component_gets_one_cluster_and_its_own_gpus() {
    for (what, command, want) in STEPS {
        let run = parse(sh(&with_inherited_gpus(command)));
        assert_eq!(
            summary(&run, what),
            *want,
            "{what}: {command}\n{}",
            run.stderr
        );
        assert!(
            !run.stderr.contains("tfcluster"),
            "{what}: nothing to say\n{}",
            run.stderr
        );
    }
}

/// `#SBATCH hetjob` separates the components of a batch script; the step takes both.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_batch_script_with_hetjob_components() {
    let script = dir().join("hetjob.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n#SBATCH -p cpu -w cpu1 -n2\n#SBATCH hetjob\n\
             #SBATCH -p gpu -w n011 -n2 --gres=gpu:4\n\
             srun --het-group=0,1 --tf-cluster=chief:1,ps:1,worker:* {}\n",
            report()
        ),
    )
    .unwrap();
    let run = sbatch("hetjob", &script.display().to_string());
    assert_eq!(
        summary(&run, "#SBATCH hetjob"),
        [
            "chief:0@cpu1 none",
            "ps:0@cpu1 none",
            "worker:0@n011 0,1",
            "worker:1@n011 2,3"
        ]
    );
}

/// A component job id slurmctld does not vouch for stops every component, with what happened,
/// before any node asks about it: here one that names no job.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_component_slurmctld_does_not_vouch_for_stops_the_whole_step() {
    let started = std::time::Instant::now();
    let run = parse(sh(&format!(
        "salloc -p cpu -w cpu1 -n2 : -p gpu -w n9 -n2 bash -c \
         'echo LEADER=$SLURM_JOB_ID_HET_GROUP_0 >&2; \
          SLURM_JOB_ID_HET_GROUP_1=999999 srun --het-group=0,1 --tf-cluster bash -c \"sleep 90; exec {}\"'",
        tool("report.sh")
    )));
    let elapsed = started.elapsed().as_secs_f64();
    let leader = leader_of(&run.stderr);
    let refused = Error::HetJobNotVouched {
        job_id: 999999,
        named: "SLURM_JOB_ID_HET_GROUP_1".into(),
        leader,
        reason: String::new(),
    };
    for node in ["cpu1", "n9"] {
        run.assert_refused("job id 999999", &node_error(node, &refused));
    }
    assert!(run.tasks.is_empty(), "{}", run.stdout);
    eprintln!("the step ended after {elapsed:.2} s");
    // Well before the tasks' 90 s: 0.5 to 1.3 s, but 20.5 to 31 s on 25.11, where the leader's
    // node signals its own step's tasks (build.rs, het_leader_signal) and slurmctld's signal
    // waits for that slurmstepd, still in the hook (2026-11-29, three runs).
    assert!(elapsed < 60.0, "the step ran {elapsed:.1} s");
}

/// The number a test's shell printed after `LEADER=`.
fn leader_of(stderr: &str) -> u32 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("LEADER="))
        .and_then(|id| id.trim().parse().ok())
        .unwrap_or_else(|| panic!("no LEADER= line in\n{stderr}"))
}

/// The job's owner, and another user (tests/cluster/cluster.sh makes both, on the host and in
/// every root).
const OWNER: &str = "tfc-owner";
const OTHER: &str = "tfc-other";

/// One row of [`a_forged_component_job_id_touches_no_other_users_job`]: how the user sends
/// Slurm's heterogeneous-job variables with a plain step of their own job. `{own}` is their
/// job, `{victim}` the other user's.
struct Forged {
    how: &'static str,
    /// What runs in the user's allocation before `--tf-cluster=worker:* ...`.
    srun: &'static str,
    /// The component the nodes refuse, and the job it names.
    refused: (&'static str, &'static str),
    /// srun itself may refuse the step before launch (22.05 does, for the variables in its
    /// own environment: "No directives to start application on any available hetjob
    /// components"); else the node refuses it with the plugin's line.
    srun_may_refuse: bool,
}

#[rustfmt::skip]
const FORGED: &[Forged] = &[
    Forged { how: "srun --export, the other user's job as component 1",
        srun: "srun --export=ALL,SLURM_HET_SIZE=2,SLURM_JOB_ID_HET_GROUP_0={own},SLURM_JOB_ID_HET_GROUP_1={victim}",
        refused: ("SLURM_JOB_ID_HET_GROUP_0", "{own}"), srun_may_refuse: false },
    Forged { how: "srun --export, the other user's job as the leader",
        srun: "srun --export=ALL,SLURM_HET_SIZE=2,SLURM_JOB_ID_HET_GROUP_0={victim},SLURM_JOB_ID_HET_GROUP_1={own}",
        refused: ("SLURM_JOB_ID_HET_GROUP_0", "{victim}"), srun_may_refuse: false },
    Forged { how: "exported in srun's own environment",
        srun: "SLURM_HET_SIZE=2 SLURM_JOB_ID_HET_GROUP_0={own} SLURM_JOB_ID_HET_GROUP_1={victim} srun",
        refused: ("SLURM_JOB_ID_HET_GROUP_0", "{own}"), srun_may_refuse: true },
];

/// From another user's side: a user who names another user's job as a component of their own
/// step (the heterogeneous-job variables are the user's to set) gets a line and no task, and
/// the other user's step with the same step id, on a node the user has no task on, runs on:
/// no node of the user's step asks slurmctld about that job or stops it. (Before 0.12.0 the
/// node asked for that job's layout, found it did not fit, and stopped it.)
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_forged_component_job_id_touches_no_other_users_job() {
    let release = release::current();
    // The other user's job, whose step 0 sleeps on cpu2.
    let victim = sh_ok(&format!(
        "runuser -u {OTHER} -- salloc --no-shell -p cpu -w cpu2 -n1 -t 5 2>&1 \
         | sed -n 's/.*Granted job allocation \\([0-9]*\\).*/\\1/p'"
    ));
    let victim = victim.trim().to_string();
    assert!(!victim.is_empty(), "the other user's job was not granted");
    let _cancel = Cancel(victim.clone());
    sh(&format!(
        "(setsid runuser -u {OTHER} -- srun --jobid={victim} -n1 sleep 299 >/dev/null 2>&1 </dev/null &)"
    ));
    let step = format!("{victim}.0");
    let running = || {
        sh_ok(&format!("squeue -h -s -j {victim} -o %i"))
            .lines()
            .any(|l| l.trim() == step)
    };
    wait_for("the other user's step", 60, running);
    for Forged {
        how,
        srun,
        refused: (named, job),
        srun_may_refuse,
    } in FORGED
    {
        let line = format!(
            "runuser -u {OWNER} -- salloc -p cpu -w cpu1 -n1 -t 2 bash -c \
             'echo LEADER=$SLURM_JOB_ID >&2; {} --tf-cluster=worker:* echo RAN'",
            srun.replace("{own}", "$SLURM_JOB_ID")
                .replace("{victim}", &victim)
        );
        let run = parse(sh(&line));
        let own = leader_of(&run.stderr).to_string();
        let what = format!("{how}: {line}\n{}", run.stderr);
        // First what matters most: the other user's step runs on.
        assert!(
            running(),
            "{what}: the other user's step {step} was stopped"
        );
        assert!(!run.stdout.contains("RAN"), "{what}: the user's task ran");
        let job_id = job.replace("{own}", &own).replace("{victim}", &victim);
        let error = Error::HetJobNotVouched {
            job_id: job_id.parse().unwrap(),
            named: named.to_string(),
            leader: job_id.parse().unwrap(),
            reason: String::new(),
        };
        let plugin_refused = release.printed(&run.stderr, &node_error("cpu1", &error));
        assert!(
            plugin_refused || *srun_may_refuse && run.code != 0,
            "{what}"
        );
        assert!(
            !run.stderr.contains("slurmctld gave"),
            "{what}: a node asked about the other job"
        );
    }
}

/// Cancels a job when dropped, whatever the test did.
struct Cancel(String);

impl Drop for Cancel {
    fn drop(&mut self) {
        sh(&format!("scancel {}", self.0));
    }
}

/// srun sees one component's counts, so a spec that does not fit the whole step is refused on
/// the nodes, with the message srun gives for a plain step, and no task gets a TF_CONFIG. A
/// node that plans only after the other component's task has failed finds that component gone
/// (slurmctld: invalid job id) and says so, pointing at the other's error (seen once on 26.05):
/// at least one node gives the spec's error, and each node one of the two.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_spec_that_does_not_fit_is_refused_on_every_node() {
    let release = release::current();
    let run = parse(sh(&format!(
        "srun -p cpu -w cpu1 -n1 --tf-cluster=ps:1,worker:5 {r} : -p gpu -w n9 -n1 {r}",
        r = report()
    )));
    let error = Spec::parse(Some("ps:1,worker:5"))
        .and_then(|spec| spec.resolve(2).map(|_| ()))
        .unwrap_err();
    let gone = |component: u32| Error::HetLayoutsShort {
        found: 1,
        step_tasks: 2,
        refused: format!("{component}: Invalid job id specified"),
    };
    let what = format!("ps:1,worker:5 over 1 + 1 tasks:\n{}", run.stderr);
    assert_ne!(run.code, 0, "{what}");
    assert!(run.tasks.iter().all(|t| t.tf.is_none()), "{what}");
    let mut spec_errors = 0;
    for (node, other) in [("cpu1", 1), ("n9", 0)] {
        let said = |e: &Error| release.printed(&run.stderr, &node_error(node, e));
        spec_errors += usize::from(said(&error));
        assert!(said(&error) || said(&gone(other)), "{node}: {what}");
    }
    assert!(spec_errors >= 1, "{what}");
}

/// Whether a row's step is a heterogeneous job's (components are jobs) or a heterogeneous step.
#[derive(Clone, Copy, PartialEq)]
enum Het {
    Job,
    Step,
}

/// One row of [`ENDINGS`].
struct Ending {
    what: &'static str,
    /// The command, with `{p}` for the program: tests/cluster/decider.sh, with `role`, `code`
    /// and how long the others sleep.
    command: &'static str,
    /// The role whose index 0 ends first, and its exit code.
    role: &'static str,
    code: i32,
    /// A heterogeneous job's step or a heterogeneous step.
    het: Het,
    /// The plan the nodes make, as a block step over the same hosts: its node list and task
    /// counts.
    plan: (&'static str, &'static str),
}

#[rustfmt::skip]
const ENDINGS: &[Ending] = &[
    Ending { what: "het job: the chief's exit ends every component",
        command: "salloc -p cpu -w cpu1 -n2 : -p gpu -w n9,n10 -N2 -n2 srun --het-group=0,1 --tf-cluster=chief:1,ps:1,worker:* {p}",
        role: "chief", code: 0, het: Het::Job, plan: ("cpu1,n9,n10", "2,1,1") },
    Ending { what: "het job: a failed worker ends every component",
        command: "salloc -p cpu -w cpu1 -n2 : -p gpu -w n9,n10 -N2 -n2 srun --het-group=0,1 --tf-cluster=chief:1,ps:1,worker:* {p}",
        role: "worker", code: 3, het: Het::Job, plan: ("cpu1,n9,n10", "2,1,1") },
    Ending { what: "het step: the chief's exit ends every component",
        command: "salloc -p mixed -w cpu1,n9 -N2 --exclusive srun -N1 -n2 -w cpu1 --tf-cluster=chief:1,ps:1,worker:* {p} : -N1 -n2 -w n9 {p}",
        role: "chief", code: 0, het: Het::Step, plan: ("cpu1,n9", "2,2") },
    Ending { what: "het step: a failed worker ends every component",
        command: "salloc -p mixed -w cpu1,n9 -N2 --exclusive srun -N1 -n2 -w cpu1 --tf-cluster=chief:1,ps:1,worker:* {p} : -N1 -n2 -w n9 {p}",
        role: "worker", code: 3, het: Het::Step, plan: ("cpu1,n9", "2,2") },
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn the_chief_or_a_failure_ends_every_component() {
    let release = release::current();
    let _defaults = PlugStack::defaults();
    for Ending {
        what,
        command,
        role,
        code,
        het,
        plan: (nodes, counts),
    } in ENDINGS
    {
        let program = format!("{} {role} {code} 299", tool("decider.sh"));
        let started = std::time::Instant::now();
        let out = sh(&command.replace("{p}", &program));
        let elapsed = started.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let plan = plan("chief:1,ps:1,worker:*", &[], &step(nodes, counts, None));
        let rank = (0..plan.tasks())
            .find(|&r| {
                plan.roles
                    .of_rank(r)
                    .is_some_and(|(r, i)| r.to_string() == *role && i == 0)
            })
            .unwrap();
        let line = stop_line(&plan, rank, code << 8, false).expect("the core stops the step");
        assert!(
            release.printed(&stderr, &line),
            "{what}: {line:?} in\n{stderr}"
        );
        let statuses = match (het, code) {
            (Het::Job, _) => release.het_job_stopped_statuses(*code),
            (Het::Step, 0) => vec![release.stopped_step_status(0)],
            (Het::Step, _) => release.failed_step_statuses(*code),
        };
        assert!(
            statuses.contains(&out.status.code().unwrap_or(-1)),
            "{what}: srun exited {:?}\n{stderr}",
            out.status.code()
        );
        eprintln!("{what}: the job ended {elapsed:.2} s after its start");
        assert!(elapsed < 60.0, "{what}: the step ran {elapsed:.1} s");
        assert!(
            !stderr.contains("could not stop"),
            "{what}: every stop reached its component\n{stderr}"
        );
        let left = cluster_pgrep("^sleep 299$");
        assert!(left.is_empty(), "{what}: tasks left behind: {left}");
    }
}
