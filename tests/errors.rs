//! Every error the core can give, with its exact message: what is wrong and what to do.
//! These strings reach srun's stderr verbatim.

mod common;
use common::*;
use tfcluster::core::claims;
use tfcluster::core::hostlist;
use tfcluster::core::isolation;
use tfcluster::core::layout::{Distribution, Layout, TaskCounts};

fn hosts(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}
fn counts(counts: &[u32]) -> TaskCounts {
    TaskCounts::new(counts.to_vec()).unwrap()
}
use std::collections::HashSet;
use std::path::Path;
use tfcluster::core::het::{self, Answer, ComponentLayout, HetLayout, Own};
use tfcluster::core::ports::{parse_port_list, PortPolicy, StepPorts};
use tfcluster::core::topology::{self, ConfFile, NodeRanks, MAX_CONF_BYTES};
use tfcluster::core::StepInputs;
use tfcluster::core::{Component, ContainerStep, Error, NodeFacts, Result, Role, Settings, Spec};
use tfcluster::spank::error::ShellError;

/// A node (job 7, one node, tasks 0 and 1, host n2) rebuilding a heterogeneous step from
/// slurmctld's `answers` for components 0, 1, ...
fn het_err(
    answers: Vec<std::result::Result<ComponentLayout, String>>,
    step_tasks: u32,
) -> Result<()> {
    let answers: Vec<Answer> = (0..)
        .zip(answers)
        .map(|(component, layout)| Answer {
            component,
            job_id: 7,
            layout,
        })
        .collect();
    let own = Own {
        job_id: 7,
        node: 0,
        nodes: 1,
        tasks: 2,
        gtids: &[0, 1],
        hostname: Some("n2"),
    };
    HetLayout::new(&answers, step_tasks, own).map(|_| ())
}
fn spec(text: &str, tasks: u32) -> Result<()> {
    Spec::parse(Some(text))?.resolve(tasks).map(|_| ())
}
fn step_err(spec: &str, admin: &[&str], nodes: &str, tpn: &str, dist: Option<&str>) -> Result<()> {
    try_plan(spec, admin, &step(nodes, tpn, dist)).map(|_| ())
}
fn task_err(
    spec: &str,
    nodes: &str,
    tpn: &str,
    node: usize,
    slot: usize,
    gpus: Option<&str>,
) -> Result<()> {
    let plan = plan(spec, &[], &step(nodes, tpn, None));
    plan.task(
        &place(&plan, node, gpus),
        slot,
        gpus,
        None,
        &|_| false,
        None,
        &mut plan.renderers(),
    )
    .map(|_| ())
}

/// (what the core is given, the error it returns, exactly as srun's stderr shows it).
#[rustfmt::skip]
fn messages() -> Vec<(Result<()>, &'static str)> {
    let long_names = format!("{}[00001-10000]", "a-very-long-node-name-prefix");
    vec![
        (spec("ps", 2),
         "--tf-cluster: 'ps' is not ROLE:COUNT; write e.g. --tf-cluster=chief:1,ps:2,worker:*"),
        (Spec::check_typed(Some("")),
         "--tf-cluster= is empty (an unset shell variable, as in --tf-cluster=$ROLES?); give a spec such as --tf-cluster=chief:1,worker:*, or write --tf-cluster without '=' for all workers"),
        (Spec::check_program("ps:1,worker:3"),
         "--tf-cluster was given without '=', so 'ps:1,worker:3' became the program to run; did you mean --tf-cluster=ps:1,worker:3?"),
        (spec("boss:1,worker:*", 2),
         "--tf-cluster: unknown role 'boss'; allowed roles are chief, evaluator, master, ps, worker"),
        (spec("Worker:2", 2),
         "--tf-cluster: unknown role 'Worker'; allowed roles are chief, evaluator, master, ps, worker"),
        (spec("worker:0", 2),
         "--tf-cluster: count '0' for worker is not a number >= 1 or '*'"),
        (spec("worker:+2", 2),
         "--tf-cluster: count '+2' for worker is not a number >= 1 or '*'"),
        (spec("worker:1,worker:1", 2),
         "--tf-cluster: role worker is given twice; give each role once with its total count"),
        (spec("ps:*,worker:*", 2),
         "--tf-cluster: only one role may use '*' (all remaining tasks), but ps and worker both do"),
        (spec("chief:2,worker:*", 4),
         "--tf-cluster: chief:2 asks for 2 chief tasks; TensorFlow allows at most one chief"),
        (spec("evaluator:2,worker:*", 4),
         "--tf-cluster: evaluator:2 asks for 2 evaluator tasks; TensorFlow allows at most one evaluator"),
        (spec("chief:1,master:1,worker:*", 4),
         "--tf-cluster: chief and master cannot be used together (TensorFlow accepts one or the other); drop master:1 or chief:1"),
        (step_err("ps:1,worker:*,tuner=yes", &[], "a", "3", None),
         "--tf-cluster: tuner=yes makes the chief Keras Tuner's oracle, and the spec has no chief; add chief:1 (e.g. --tf-cluster=chief:1,worker:*,tuner=yes)"),
        (step_err("chief:1,ps:1,worker:*,torch=yes", &[], "a", "3", None),
         "--tf-cluster: torch=yes starts PyTorch, whose ranks are all workers, and the spec has chief, ps; write --tf-cluster='worker:*,torch=yes'"),
        (spec("ps:1,worker:3", 3),
         "--tf-cluster asks for 4 tasks (ps:1,worker:3) but the step has 3; change the counts, use '*' for one role, or run srun with -n 4"),
        (spec("chief:1,ps:2,worker:*", 3),
         "--tf-cluster: the fixed roles take 3 of the step's 3 tasks, leaving none for worker:*; run with more tasks (-n) or lower the fixed counts"),
        (spec("chief:1,evaluator:*", 3),
         "--tf-cluster: evaluator:* gives 2 of the step's 3 tasks to evaluator, but TensorFlow allows at most one evaluator; write evaluator:1 and give '*' to worker"),
        (spec("master:*,worker:2", 4),
         "--tf-cluster: master:* gives 2 of the step's 4 tasks to master, but TensorFlow allows at most one master; write master:1 and give '*' to worker"),
        (step_err("worker:*,ports=1", &[], "a", "1", None),
         "--tf-cluster: 'ports' is not a per-job setting; allowed: port_base, gpus, gpu_affinity, gpu_roles, rpc_layer, end_with_chief, fail_fast, preemption_exit, grpc_proxy_bypass, even_gpus, evaluator_cluster, dtensor, apptainer_env, keras, jax, torch, tuner, socket_ifname"),
        (step_err("worker:*", &[], "n[1-2", "1", None),
         "hostlist 'n[1-2': '[' without a matching ']'"),
        (step_err("worker:*", &[], "n*\0[1-2]", "1,1", None),
         "hostlist 'n*\0[1-2]': a host name holds a NUL byte"),
        (step_err("worker:*", &[], "", "1", None),
         "the step has no nodes (SLURM_STEP_NODELIST is empty)"),
        (step_err("worker:*", &[], "a,b", "2(x3", None),
         "SLURM_STEP_TASKS_PER_NODE '2(x3' is not a Slurm count list like '2(x3),1': a '(x' has no ')'"),
        (TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", "2(x0)").map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE '2(x0)' is not a Slurm count list like '2(x3),1': a repeat count is 0"),
        (TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", "two").map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE 'two' is not a Slurm count list like '2(x3),1': a count is not a number"),
        (TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", "2(xa)").map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE '2(xa)' is not a Slurm count list like '2(x3),1': the repeat count is not a number"),
        (TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", "1(x65537)").map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE '1(x65537)' is not a Slurm count list like '2(x3),1': more entries than Slurm allows nodes"),
        (step_err("worker:*", &[], "a,b", "65536,1", None),
         "SLURM_STEP_TASKS_PER_NODE '65536,1' adds up to more than 65536 tasks, more than any TF_CONFIG can list; run TensorFlow on fewer tasks"),
        (step_err("worker:*", &[], "a,b", "2", None),
         "the step lists 2 nodes (SLURM_STEP_NODELIST) but 1 task counts (SLURM_STEP_TASKS_PER_NODE); this step's environment is inconsistent"),
        (Component { het_size: Some("0"), step_tasks: Some("2"), ..Default::default() }.kind().map(|_| ()),
         "SLURM_HET_SIZE '0' is not a count of heterogeneous job components (1 to 128); this job's environment is inconsistent: run srun inside the allocation salloc or sbatch made, without setting SLURM_HET_SIZE"),
        (Component { nodes: 1, tasks: 2, step_nodes: Some("2"), ..Default::default() }.kind().map(|_| ()),
         "this heterogeneous step has no SLURM_STEP_NUM_TASKS, so its task count over all components is unknown here and no TF_CONFIG can be right; run the step with srun, which sets it"),
        (het::job_ids(2, |name| (name == "SLURM_JOB_ID_HET_GROUP_0").then(|| "7".into())).map(|_| ()),
         "SLURM_JOB_ID_HET_GROUP_1 is missing or not a job id, so component 1 of this heterogeneous job cannot be asked where its tasks run; run srun inside the allocation salloc or sbatch made (they set it)"),
        (Err(Error::HetJobNotVouched { job_id: 17, named: "SLURM_JOB_ID_HET_GROUP_1".into(), leader: 16, reason: String::new() }),
         "job 17 (SLURM_JOB_ID_HET_GROUP_1) is not a component of heterogeneous job 16 of this step's user in slurmctld's records, so tfcluster asks about and stops no job for this step and no TF_CONFIG can be right; SLURM_HET_SIZE and SLURM_JOB_ID_HET_GROUP_* are Slurm's own: run srun inside the allocation salloc or sbatch made, without setting or exporting them"),
        (het_err(vec![Err("Invalid job id specified".into())], 2),
         "slurmctld gave the layouts of components with 0 of the heterogeneous step's 2 tasks (components it refused: 0: Invalid job id specified), so where the other ranks run is unknown and no TF_CONFIG can be right; a component whose tasks had all ended before this node started has no layout left, so look for its error first; else run the step again, and if this persists ask the admin whether the nodes reach slurmctld"),
        (het_err(vec![Ok(ComponentLayout { node_list: "n1".into(), tids: vec![vec![0, 0]], tasks: 2 })], 2),
         "the layout slurmctld gave for component 0 of this heterogeneous step is inconsistent (task id 0 is out of its 2 tasks or listed twice), so no TF_CONFIG can be right; report this with the Slurm release"),
        (het_err(vec![Ok(ComponentLayout { node_list: "n1".into(), tids: vec![vec![1, 0]], tasks: 2 })], 2),
         "node n2 fits 0 components of this heterogeneous step as slurmctld laid them out, not one, so it cannot tell its tasks' ranks; give the components different node or task counts, or ask the admin to make each node's NodeName its host name"),
        (step_err("worker:*", &[], "a,b", "1(x2)", Some("arbitrary")),
         "-m arbitrary: the task order srun reads from SLURM_HOSTFILE did not reach this node (SLURM_TFCLUSTER_TASK_HOSTS is not in the step's environment); srun must load tfcluster too, the same version as the nodes (srun --help lists --tf-cluster)"),
        (Layout::build(&TaskCounts::new(vec![1, 1]).unwrap(), Distribution::Arbitrary).map(|_| ()),
         "distribution 'arbitrary' without SLURM_HOSTFILE (e.g. -m arbitrary -w LIST) places tasks in an order tfcluster cannot see; list the hosts in a file named by SLURM_HOSTFILE, or use -m block, cyclic or plane=N"),
        (hostlist::hostfile_task_hosts("n1\nn2\n", 3).map(|_| ()),
         "SLURM_HOSTFILE lists 2 hosts for 3 tasks; list one host per task"),
        (Layout::from_task_hosts(&hosts(&["a", "b"]), &counts(&[1, 1]), &hosts(&["a", "c"])).map(|_| ()),
         "SLURM_HOSTFILE puts task 1 on c, which is not one of the step's nodes (a,b)"),
        (Layout::from_task_hosts(&hosts(&["a", "b"]), &counts(&[1, 1]), &hosts(&["a", "a"])).map(|_| ()),
         "SLURM_HOSTFILE puts 2 tasks on a but Slurm started 1 there; refusing to hand out a wrong TF_CONFIG"),
        (Layout::from_task_hosts(&hosts(&["a", "b"]), &counts(&[2, 1]), &hosts(&["a", "b"])).map(|_| ()),
         "SLURM_HOSTFILE puts 1 tasks on a but Slurm started 2 there; refusing to hand out a wrong TF_CONFIG"),
        (Distribution::parse(Some("zigzag:block"), None).map(|_| ()),
         "unknown task distribution 'zigzag:block' (SLURM_DISTRIBUTION); use -m block, cyclic or plane=N"),
        (Distribution::parse(Some("plane"), None).map(|_| ()),
         "plane distribution needs a plane size >= 1, got SLURM_DIST_PLANESIZE=''; use -m plane=N"),
        (Distribution::parse(Some("plane"), Some("+2")).map(|_| ()),
         "plane distribution needs a plane size >= 1, got SLURM_DIST_PLANESIZE='+2'; use -m plane=N"),
        (Distribution::parse(Some("plane"), Some("0")).map(|_| ()),
         "plane distribution needs a plane size >= 1, got SLURM_DIST_PLANESIZE='0'; use -m plane=N"),
        (plan("worker:*", &[], &step("a,b", "2(x2)", None)).place(None, &NodeFacts { node: 1, gtids: &[1, 3], ..Default::default() }).map(|_| ()),
         "node 1 (b): Slurm placed global tasks [1,3] here but tfcluster computed [2,3], so no TF_CONFIG of this step can be right and the whole step is stopped; run srun with -m cyclic or -m plane=N (placements Slurm never reorders), or -m arbitrary with the hosts in rank order in a file named by SLURM_HOSTFILE, or ask the admin to add CR_NO_DIST_TOPO_BLOCK to SelectTypeParameters"),
        (NodeRanks::read("topology/torus3d", None).map(|_| ()),
         "Slurm places a block-distributed step's tasks in the topology's node order (TopologyPlugin=topology/torus3d), which tfcluster cannot read here: tfcluster reads only topology/tree and topology/block; run srun with -m cyclic or -m plane=N (placements Slurm never reorders), or -m arbitrary with the hosts in rank order in a file named by SLURM_HOSTFILE, or ask the admin to add CR_NO_DIST_TOPO_BLOCK to SelectTypeParameters"),
        (NodeRanks::read("topology/tree", None).map(|_| ()),
         "Slurm places a block-distributed step's tasks in the topology's node order (TopologyPlugin=topology/tree), which tfcluster cannot read here: topology.conf cannot be read; run srun with -m cyclic or -m plane=N (placements Slurm never reorders), or -m arbitrary with the hosts in rank order in a file named by SLURM_HOSTFILE, or ask the admin to add CR_NO_DIST_TOPO_BLOCK to SelectTypeParameters"),
        (NodeRanks::read("topology/tree", Some("SwitchName=s1 Nodes=a")).unwrap().order(&hosts(&["a", "b"])).map(|_| ()),
         "Slurm places a block-distributed step's tasks in the topology's node order (TopologyPlugin=topology/tree), which tfcluster cannot read here: topology.conf does not place node b; run srun with -m cyclic or -m plane=N (placements Slurm never reorders), or -m arbitrary with the hosts in rank order in a file named by SLURM_HOSTFILE, or ask the admin to add CR_NO_DIST_TOPO_BLOCK to SelectTypeParameters"),
        (plan("worker:*", &[], &step("a,b", "2(x2)", None)).place(None, &NodeFacts { node: 2, gtids: &[], ..Default::default() }).map(|_| ()),
         "node index 2 is outside the step's 2 nodes"),
        (task_err("worker:*", "a", "2", 0, 2, None),
         "local task 2 is outside node 0's 2 tasks"),
        (StepPorts::plan(&PortPolicy::Range { lo: 20000, hi: 32767, block: 64 }, Some("12000"), 1, 0, 2, "n9").map(|_| ()),
         "node n9 runs 2 tasks but SLURM_STEP_RESV_PORTS reserved only 1 ports; use srun --resv-ports=2 or more"),
        (parse_port_list("12000-99999").map(|_| ()),
         "SLURM_STEP_RESV_PORTS '12000-99999' is not a list of distinct ports 1-65535 like 12000-12003,12010; run srun with --resv-ports=0 to let tfcluster choose the ports"),
        (step_err("worker:*", &["port_base=65535"], "a", "2", None),
         "port 65535 + 2 tasks on one node goes past 65535; choose a lower port_base"),
        (step_err("worker:*", &["port_range=30000-30003"], "a", "8", None),
         "a node runs 8 tasks but the port range 30000-30003 has room for 4; the admin should widen port_range in plugstack.conf, or give port_base=N"),
        (task_err("worker:*", "n9", "3", 0, 0, Some("0,1")),
         "node n9 has 2 GPU(s) (0,1) for 3 GPU tasks; ask for at least 3 GPUs per node (--gres=gpu:3), fewer tasks per node, or keep some roles off GPUs (gpu_roles=)"),
        (task_err("worker:*", "a,b", "3,1", 1, 0, Some("0,1")),
         "node b has 2 GPU(s), fewer than the 3 GPU tasks of the busiest node a: even_gpus gives every GPU task the same count and takes every node to have as many GPUs; ask for GPUs per node (--gres=gpu:N or --gpus-per-node=N, not --gpus=N), or set even_gpus=no"),
        (step_err("worker:*,dtensor=yes", &[], &long_names, "1(x10000)", None),
         "SINGULARITYENV_DTENSOR_JOBS for 10000 tasks would be 400028 bytes, over Linux's limit of 131072 bytes for one environment variable; use fewer tasks or shorter node addresses (or apptainer_env=no, without Apptainer's copies of each variable)"),
        (step_err("worker:*,dtensor=yes,apptainer_env=no", &[], &long_names, "1(x10000)", None),
         "DTENSOR_JOBS for 10000 tasks would be 400013 bytes, over Linux's limit of 131072 bytes for one environment variable; use fewer tasks or shorter node addresses"),
        (step_err("worker:*", &[], "n[2,2]", "3,2", None),
         "SLURM_STEP_NODELIST 'n[2,2]' names node n2 twice, which Slurm never does; do not set SLURM_STEP_NODELIST in the job's environment"),
        (task_err("worker:*", "n9", "2", 0, 0, Some("2,1,2,3")),
         "CUDA_VISIBLE_DEVICES '2,1,2,3' lists GPU 2 twice; fix the GRES configuration or the job's environment"),
        (parse_port_list("10,22,2050,22").map(|_| ()),
         "SLURM_STEP_RESV_PORTS '10,22,2050,22' is not a list of distinct ports 1-65535 like 12000-12003,12010; run srun with --resv-ports=0 to let tfcluster choose the ports"),
        (task_err("worker:*", "n9", "2", 0, 0, Some("0,,1")),
         "CUDA_VISIBLE_DEVICES '0,,1' has an empty entry; fix the GRES configuration or the job's environment"),
        (step_err("worker:*", &[], &long_names, "1(x10000)", None),
         "SINGULARITYENV_TF_CONFIG for 10000 tasks would be 420088 bytes, over Linux's limit of 131072 bytes for one environment variable; use fewer tasks or shorter node addresses (or apptainer_env=no, without Apptainer's copies of each variable)"),
        (step_err("worker:*,apptainer_env=no", &[], &long_names, "1(x10000)", None),
         "TF_CONFIG for 10000 tasks would be 420073 bytes, over Linux's limit of 131072 bytes for one environment variable; use fewer tasks or shorter node addresses"),
        (Settings::from_plugstack(&["port_bsae=9000"]).map(|_| ()),
         "plugstack.conf: unknown tfcluster setting 'port_bsae'; known: port_base, port_range, port_block, address, gpus, gpu_affinity, gpu_roles, rpc_layer, end_with_chief, fail_fast, preemption_exit, grpc_proxy_bypass, even_gpus, evaluator_cluster, dtensor, apptainer_env, keras, jax, torch, tuner, socket_ifname, timing, isolate"),
        (Settings::from_plugstack(&["verbose"]).map(|_| ()),
         "plugstack.conf: unknown tfcluster setting 'verbose'; known: port_base, port_range, port_block, address, gpus, gpu_affinity, gpu_roles, rpc_layer, end_with_chief, fail_fast, preemption_exit, grpc_proxy_bypass, even_gpus, evaluator_cluster, dtensor, apptainer_env, keras, jax, torch, tuner, socket_ifname, timing, isolate"),
        (Settings::from_plugstack(&["port_base=http"]).map(|_| ()),
         "plugstack.conf: port_base='http' is invalid: expected a port number 1-65535"),
        (Settings::from_plugstack(&["port_range=3000-2000"]).map(|_| ()),
         "plugstack.conf: port_range='3000-2000' is invalid: expected LO-HI with 1 <= LO <= HI <= 65535"),
        (Settings::from_plugstack(&["port_block=0"]).map(|_| ()),
         "plugstack.conf: port_block='0' is invalid: expected a number of ports 1-65535"),
        (Settings::from_plugstack(&["address=ib-node"]).map(|_| ()),
         "plugstack.conf: address='ib-node' is invalid: expected a template with %h for the node name, e.g. %h-ib"),
        (Settings::from_plugstack(&["gpus=all"]).map(|_| ()),
         "plugstack.conf: gpus='all' is invalid: expected split or keep"),
        (Settings::from_plugstack(&["gpu_roles=chief,worker"]).map(|_| ()),
         "plugstack.conf: gpu_roles='chief,worker' is invalid: expected all, none, or roles joined by + (e.g. chief+worker)"),
        (Settings::from_plugstack(&["rpc_layer=grpc verbs"]).map(|_| ()),
         "plugstack.conf: rpc_layer='grpc verbs' is invalid: expected a protocol name such as grpc or grpc+verbs"),
        (Settings::from_plugstack(&["grpc_proxy_bypass=auto"]).map(|_| ()),
         "plugstack.conf: grpc_proxy_bypass='auto' is invalid: expected yes or no"),
        (Settings::from_plugstack(&["end_with_chief=always"]).map(|_| ()),
         "plugstack.conf: end_with_chief='always' is invalid: expected auto, yes or no"),
        (Settings::from_plugstack(&["fail_fast=sometimes"]).map(|_| ()),
         "plugstack.conf: fail_fast='sometimes' is invalid: expected auto, yes or no"),
        (Settings::from_plugstack(&["preemption_exit=0"]).map(|_| ()),
         "plugstack.conf: preemption_exit='0' is invalid: expected an exit code 1-255"),
        (Settings::from_plugstack(&["preemption_exit=256"]).map(|_| ()),
         "plugstack.conf: preemption_exit='256' is invalid: expected an exit code 1-255"),
        (container(Some("/scratch/tf-bundle"), None, None, false).check().map(|_| ()),
         "--tf-cluster cannot reach tasks in Slurm's --container (/scratch/tf-bundle) on Slurm 22.05: this release writes the container's environment before plugins run, so every task would start without TF_CONFIG, CUDA_VISIBLE_DEVICES and SLURM_PROCID and train alone; run the container inside the task instead (srun --tf-cluster apptainer exec IMAGE python train.py), or use Slurm 23.02 or later"),
        (Settings::from_plugstack(&["isolate=on"]).map(|_| ()),
         "plugstack.conf: isolate='on' is invalid: expected yes or no"),
        (step_err("worker:*,isolate=no", &["isolate=yes"], "a", "1", None),
         "--tf-cluster: 'isolate' is not a per-job setting; allowed: port_base, gpus, gpu_affinity, gpu_roles, rpc_layer, end_with_chief, fail_fast, preemption_exit, grpc_proxy_bypass, even_gpus, evaluator_cluster, dtensor, apptainer_env, keras, jax, torch, tuner, socket_ifname"),
        (plan("worker:*", &["isolate=yes"], &step("n9,n10", "1,1", None))
            .firewall(7, 0, 1000, 0, |a| if a == "n10" { Err("Name or service not known".into()) } else { Ok(vec![[10, 0, 0, 9].into()]) })
            .map(|_| ()),
         "node address 'n10' does not resolve (Name or service not known); ask the admin to make every node's address (the address= setting) resolve on every node"),
        (plan("worker:*", &["isolate=yes"], &step("n9", "1", None)).firewall(7, 0, 1000, 0, |_| Ok(vec![])).map(|_| ()),
         "node address 'n9' does not resolve (it resolves to no address); ask the admin to make every node's address (the address= setting) resolve on every node"),
        (plan("worker:*,port_base=22", &["isolate=yes"], &step("n9", "2", None)).firewall(7, 0, 1000, 0, |_| Ok(vec![[10, 0, 0, 9].into()])).map(|_| ()),
         "isolate=yes: port 22 is outside the site's port_range 20000-32767, the only ports tfcluster's firewall covers (so that no step can close another service's port); drop port_base, or pick one whose ports (port_base up to port_base + the busiest node's tasks - 1) all lie in 20000-32767"),
        (isolation::tables::check_tables(&[20000, 20001], &[("tfcluster_57_0", vec![20001])]),
         "port 20001 is already a port of another step here (nftables table inet tfcluster_57_0): the two steps' ports overlap, and the rules of one would act on the other's connections; drop port_base (or pick another), or run the step again (tfcluster's own ports follow the job and step ids); a site avoids this altogether with Slurm's port reservation (MpiParams=ports=, docs/admin-guide.md)"),
        (tfcluster::core::ports::Reservation::vouched(Some("12000"), || Err("Unable to contact slurm controller".into())).map(|_| ()),
         "slurmctld did not say which ports it reserved for this step (Unable to contact slurm controller), so this node cannot tell whether SLURM_STEP_RESV_PORTS is Slurm's, and its ports could differ from the other nodes'; run the step again, and if this persists ask the admin whether the nodes reach slurmctld"),
        (isolation::tables::check_table_count(&[("tfcluster_8_0", 8); 32], 1001, |_| Some(1001)),
         "your steps already hold 32 tfcluster tables on this node, the most one user's steps may hold (32): every table slows each packet of the node; end some of your steps here, or run fewer at once, then run the step again"),
        (isolation::tables::check_table_count(&[("tfcluster_8_0", 8); 128], 1001, |_| None),
         "the node's steps already hold 128 tfcluster tables on this node, the most a node holds (128): every table slows each packet of the node; run the step again once steps here have ended; if this persists, ask the admin to look at the node's tables (nft list tables)"),
        (isolation::rules::check_syncookies(ConfFile::Text("2\n".into())),
         "net.ipv4.tcp_syncookies is 2 here: the kernel answers every connection attempt with a SYN cookie, which has no owner, so the firewall would drop the handshakes of the owner's own tasks; set it to 1, the kernel's default (cookies only while a listener's queue is full): sysctl -w net.ipv4.tcp_syncookies=1, and the same in /etc/sysctl.d"),
        (isolation::rules::check_syncookies(ConfFile::Unreadable("Permission denied".into())),
         "cannot tell whether the kernel answers connection attempts with SYN cookies (cannot read /proc/sys/net/ipv4/tcp_syncookies: Permission denied); with cookies always on the firewall would drop the owner's own handshakes; check sysctl net.ipv4.tcp_syncookies (0 or 1 works with isolate=yes)"),
        (claims::check_free(&[20000, 20001], &[12], &[claims::Claim { job_id: 57, step_id: 3, owner: claims::Owner { pid: 4242, start: 9 }, ports: vec![20001] }], &[]),
         "port 20001 is already a port of job 57's step 3, which runs here: the two steps' ports met, and one step's server could not listen on it; drop port_base (or pick another), or run the step again (tfcluster's own ports follow the job and step ids); a site avoids this altogether with Slurm's port reservation (MpiParams=ports=, docs/admin-guide.md)"),
        (claims::check_free(&[20000], &[12], &[], &[claims::Listener { port: 20000, uid: 61002 }]),
         "port 20000 is already in use here (a socket of uid 61002 holds it, listening or connected): the step's server could not listen on it, and its peers could connect to that program; drop port_base (or pick another), or run the step again (tfcluster's own ports follow the job and step ids); a site avoids this altogether with Slurm's port reservation (MpiParams=ports=, docs/admin-guide.md)"),
        (step_err("worker:*,port_base=0", &[], "a", "1", None),
         "--tf-cluster: port_base='0' is invalid: expected a port number 1-65535"),
    ]
}

#[test]
fn every_error_message() {
    for (result, message) in &messages() {
        match result {
            Err(e) => assert_eq!(e.to_string(), *message),
            Ok(()) => panic!("expected the error: {message}"),
        }
    }
}

#[test]
fn every_variant_has_a_row() {
    let covered: HashSet<&str> = messages()
        .iter()
        .filter_map(|(result, _)| result.as_ref().err().map(variant))
        .collect();
    let missing: Vec<&&str> = VARIANTS.iter().filter(|v| !covered.contains(*v)).collect();
    assert!(missing.is_empty(), "no row in messages() for {missing:?}");
}

/// A step as srun sees it on a release that writes the container's environment before plugins
/// run (22.05) or not: SRUN_CONTAINER, SLURM_CONTAINER, whether srun started with it.
fn container<'a>(
    requested: Option<&'a str>,
    bundle: Option<&'a str>,
    inherited: Option<bool>,
    gets_task_env: bool,
) -> ContainerStep<'a> {
    ContainerStep {
        requested,
        bundle,
        inherited,
        release: "22.05",
        gets_task_env,
    }
}

/// What srun does with a step and its container. A step runs in a container when srun has
/// --container (it then exports SLURM_CONTAINER, unless that was set) or SRUN_CONTAINER; a
/// SLURM_CONTAINER srun started with is a job's or an outer step's, and says nothing sure.
#[derive(Debug, PartialEq)]
enum Verdict {
    Launch,
    Warn,
    Refuse,
}

/// (SRUN_CONTAINER, SLURM_CONTAINER, srun started with SLURM_CONTAINER, the release hands the
/// container the task's environment, what srun does)
type ContainerCase = (
    Option<&'static str>,
    Option<&'static str>,
    Option<bool>,
    bool,
    Verdict,
);

#[rustfmt::skip]
const CONTAINER_STEPS: &[ContainerCase] = &[
    (None,        None,        None,        false, Verdict::Launch),  // no container
    (None,        Some("/b"),  Some(false), false, Verdict::Refuse),  // srun --container=/b
    (Some("/b"),  Some("/b"),  Some(false), false, Verdict::Refuse),  // SRUN_CONTAINER=/b srun
    (Some("/b"),  Some("/j"),  Some(true),  false, Verdict::Refuse),  // the same, in a job with a container
    (None,        Some("/j"),  Some(true),  false, Verdict::Warn),    // srun in a batch script of sbatch --container=/j
    (None,        Some("/j"),  None,        false, Verdict::Warn),    // srun's environment cannot be read
    (None,        Some(""),    Some(false), false, Verdict::Launch),  // --container= (empty)
    (Some(""),    None,        Some(false), false, Verdict::Launch),  // SRUN_CONTAINER= (empty)
    (None,        Some("/b"),  Some(false), true,  Verdict::Launch),  // 23.02 and later: TF_CONFIG arrives
    (Some("/b"),  Some("/b"),  Some(false), true,  Verdict::Launch),
    (None,        Some("/j"),  Some(true),  true,  Verdict::Launch),
];

#[test]
fn only_container_steps_slurm_cannot_reach_are_refused() {
    for (requested, bundle, inherited, gets_task_env, verdict) in CONTAINER_STEPS {
        let step = container(*requested, *bundle, *inherited, *gets_task_env);
        let got = match step.check() {
            Ok(None) => Verdict::Launch,
            Ok(Some(_)) => Verdict::Warn,
            Err(_) => Verdict::Refuse,
        };
        assert_eq!(got, *verdict, "{step:?}");
    }
    assert_eq!(
        container(None, Some("/scratch/job-bundle"), Some(true), false)
            .check()
            .unwrap()
            .unwrap()
            .to_string(),
        "SLURM_CONTAINER (/scratch/job-bundle) came with srun's environment (a job or step started with --container); if this step runs in a container too (srun --container), its tasks get no TF_CONFIG on Slurm 22.05 and train alone: run the container inside the task instead (srun --tf-cluster apptainer exec IMAGE python train.py), or use Slurm 23.02 or later"
    );
    // An absurd value is cut in the message, at a character boundary.
    let long = format!("/{}", "é".repeat(10_000));
    let message = container(None, Some(&long), Some(false), false)
        .check()
        .unwrap_err()
        .to_string();
    assert!(
        message.len() < 5000 && message.contains("é..."),
        "{}",
        message.len()
    );
}

/// Every variant of an error type, once: `$name` (the variant's name) fails to compile when a
/// variant is added, and the `every_..._has_a_row` tests fail until a table of this file gives
/// it a row.
macro_rules! variants {
    ($name:ident, $list:ident, $type:ident: $($v:ident),* $(,)?) => {
        fn $name(e: &$type) -> &'static str {
            match e {
                $($type::$v { .. } => stringify!($v),)*
            }
        }
        const $list: &[&str] = &[$(stringify!($v)),*];
    };
}
#[rustfmt::skip]
variants!(variant, VARIANTS, Error:
    SpecSyntax, EmptySpec, SpecAsProgram, UnknownRole, BadCount, DuplicateRole, SeveralWildcards,
    SingletonRole, ChiefAndMaster, TunerWithoutChief, TorchRoles, UnknownOverride, CountMismatch, NothingLeftForWildcard,
    SingletonWildcard, Hostlist, CountList, HetSize, HetStepTasks, HetJobId, HetJobNotVouched, HetLayoutsShort,
    HetLayout, HetOwnComponent, NodeCountMismatch,
    TooManyTasks, NoNodes, NodeListedTwice, ArbitraryDistribution, ContainerTooOld,
    TaskOrderMissing, HostfileTooShort, TaskHostNotInStep, TaskHostCount, UnknownDistribution,
    BadPlaneSize, LayoutMismatch, TopologyUnreadable, NodeOutOfRange, SlotOutOfRange,
    NotEnoughReservedPorts, ReservedPortList, ReservationUnchecked, PortOverflow, PortRangeTooSmall, NotEnoughGpus,
    UnevenGpus, EnvTooLarge, BadGpuList, AddressUnresolved, PortOutsideIsolatedRange, PortInOtherTable, TooManyTables,
    SynCookiesAlways, SynCookiesUnknown,
    PortClaimed, PortListened, RepeatedGpu,
    UnknownSetting, BadSetting,
);

/// Every count and list slurmstepd reads from the environment or a configuration file is
/// bounded before anything is allocated from it: (what, the input over its limit, the error).
/// A count list that adds up to 4 000 000 000 tasks once made slurmstepd allocate 32 GB and
/// abort (`-m arbitrary` built its layout before any check).
#[rustfmt::skip]
#[test]
fn every_input_over_its_limit_is_refused() {
    let arbitrary = StepInputs { task_hosts: Some("a"), ..step("a", "4000000000", Some("arbitrary")) };
    let topology = Ok(NodeRanks::read("topology/tree", Some("SwitchName=s Nodes=a,b")).unwrap());
    let ranked = StepInputs { topology: Some(&topology), ..step("a,b", "4000000000,1", None) };
    let huge = "x".repeat(MAX_CONF_BYTES + 1);
    let files = |name: &str| -> ConfFile {
        match name {
            "/big/slurm.conf" => ConfFile::Text(huge.clone()),
            "/loop/slurm.conf" => ConfFile::Text("Include slurm.conf\nTopologyPlugin=topology/tree".into()),
            "/nodes/slurm.conf" => ConfFile::Text("TopologyPlugin=topology/tree".into()),
            "/nodes/topology.conf" => ConfFile::Text("SwitchName=s1 Nodes=a[1-40000]\nSwitchName=s2 Nodes=b[1-40000]".into()),
            _ => ConfFile::Missing,
        }
    };
    let ranks = |conf: &str| {
        topology::node_ranks(Path::new(conf), |p| files(p.to_str().unwrap())).unwrap().map(|_| ())
    };
    let cases: Vec<(&str, Result<()>, String)> = vec![
        ("tasks, block", step_err("worker:*", &[], "a", "4000000000", None),
         "SLURM_STEP_TASKS_PER_NODE '4000000000' adds up to more than 65536 tasks, more than any TF_CONFIG can list; run TensorFlow on fewer tasks".into()),
        ("tasks, arbitrary", try_plan("worker:*", &[], &arbitrary).map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE '4000000000' adds up to more than 65536 tasks, more than any TF_CONFIG can list; run TensorFlow on fewer tasks".into()),
        ("tasks, topology order", try_plan("worker:*", &[], &ranked).map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE '4000000000,1' adds up to more than 65536 tasks, more than any TF_CONFIG can list; run TensorFlow on fewer tasks".into()),
        ("tasks, repeated", TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", "2(x40000)").map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE '2(x40000)' adds up to more than 65536 tasks, more than any TF_CONFIG can list; run TensorFlow on fewer tasks".into()),
        ("tasks, a heterogeneous step", het_err(vec![Ok(ComponentLayout { node_list: "n1".into(), tids: vec![], tasks: 4_000_000_000 })], 4_000_000_000),
         "SLURM_STEP_NUM_TASKS '4000000000' adds up to more than 65536 tasks, more than any TF_CONFIG can list; run TensorFlow on fewer tasks".into()),
        ("nodes in the count list", TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", "0(x65537)").map(|_| ()),
         "SLURM_STEP_TASKS_PER_NODE '0(x65537)' is not a Slurm count list like '2(x3),1': more entries than Slurm allows nodes".into()),
        ("hosts in the node list", step_err("worker:*", &[], "n[1-65537]", "1", None),
         "hostlist 'n[1-65537]': range '1-65537' has more than 65536 values".into()),
        ("hosts in a whole list", hostlist::expand("a[1-40000],b[1-40000]").map(|_| ()),
         "hostlist 'a[1-40000],b[1-40000]': expands to more than 65536 hosts".into()),
        ("the task order, passed", try_plan("worker:*", &[], &StepInputs { task_hosts: Some("a[1-65537]"), ..step("a", "1", Some("arbitrary")) }).map(|_| ()),
         "hostlist 'a[1-65537]': range '1-65537' has more than 65536 values".into()),
        ("a configuration file", ranks("/big/slurm.conf"),
         format!("Slurm places a block-distributed step's tasks in the topology's node order (TopologyPlugin=unknown), which tfcluster cannot read here: /big/slurm.conf is larger than {MAX_CONF_BYTES} bytes; {PLACEMENT}")),
        ("Include lines", ranks("/loop/slurm.conf"),
         format!("Slurm places a block-distributed step's tasks in the topology's node order (TopologyPlugin=unknown), which tfcluster cannot read here: /loop/slurm.conf includes more than 64 files; {PLACEMENT}")),
        ("nodes in topology.conf", ranks("/nodes/slurm.conf"),
         format!("Slurm places a block-distributed step's tasks in the topology's node order (TopologyPlugin=topology/tree), which tfcluster cannot read here: topology.conf lists more than 65536 nodes; {PLACEMENT}")),
    ];
    for (what, got, want) in &cases {
        assert_eq!(got.as_ref().map_err(ToString::to_string), Err(want.clone()), "{what}");
    }
}

const PLACEMENT: &str = "run srun with -m cyclic or -m plane=N (placements Slurm never reorders), or -m arbitrary with the hosts in rank order in a file named by SLURM_HOSTFILE, or ask the admin to add CR_NO_DIST_TOPO_BLOCK to SelectTypeParameters";

/// The size check covers the longest TF_CONFIG of any role, under the longest name a task gets
/// it by: (settings, the name whose string is padded to exactly the limit for the chief, the
/// message for the last ps, one byte longer).
#[rustfmt::skip]
const AT_THE_LIMIT: &[(&str, &str, &str)] = &[
    (",apptainer_env=no", "TF_CONFIG",
     "TF_CONFIG for 12000 tasks would be 131073 bytes, over Linux's limit of 131072 bytes for one environment variable; use fewer tasks or shorter node addresses"),
    ("", "SINGULARITYENV_TF_CONFIG",
     "SINGULARITYENV_TF_CONFIG for 12000 tasks would be 131073 bytes, over Linux's limit of 131072 bytes for one environment variable; use fewer tasks or shorter node addresses (or apptainer_env=no, without Apptainer's copies of each variable)"),
];

#[test]
fn the_size_check_covers_the_longest_task_of_any_role() {
    // "chief" + index 0 renders 1 byte shorter than "ps" + index 11998. Pad rpc_layer until the
    // chief's string is exactly at the limit: the plan must still fail, for the last ps.
    let one_node = step("a", "12000", None);
    for (settings, name, want) in AT_THE_LIMIT {
        let short = plan(
            &format!("chief:1,ps:*,port_base=1000,rpc_layer=x{settings}"),
            &[],
            &one_node,
        );
        let chief = name.len() + 1 + short.tf_config(Role::Chief, 0).len() + 1;
        let rpc = "x".repeat(1 + 131072 - chief); // the chief's string: exactly 131072 bytes
        let err = try_plan(
            &format!("chief:1,ps:*,port_base=1000,rpc_layer={rpc}{settings}"),
            &[],
            &one_node,
        )
        .expect_err("the last ps does not fit");
        assert_eq!(err.to_string(), *want, "{name}");
    }
}

/// The SPANK shell's own errors (srun's and slurmstepd's side), as users see them.
#[rustfmt::skip]
#[test]
fn every_shell_error_message() {
    use ShellError::*;
    use tfcluster::spank::handle::SpankError;
    let cases: Vec<(ShellError, &str)> = vec![
        (Core(Error::NoNodes), "the step has no nodes (SLURM_STEP_NODELIST is empty)"),
        (Env { name: "SLURM_DISTRIBUTION", err: SpankError(3005) },
         "cannot read SLURM_DISTRIBUTION from the job environment: ESPANK_NOSPACE (3005)"),
        (Missing { name: "SLURM_STEP_NODELIST" },
         "SLURM_STEP_NODELIST is not set; is this an srun job step?"),
        (Item { what: "the job id", err: SpankError(3009) },
         "cannot get the job id from Slurm: ESPANK_NOT_AVAIL (3009)"),
        (GlobalId { task: 2, err: SpankError(3001) },
         "cannot get the global id of local task 2 from Slurm: ESPANK_BAD_ARG (3001)"),
        (SetEnv { name: "TF_CONFIG", err: SpankError(42) },
         "cannot set TF_CONFIG for the task: SPANK error 42"),
        (Hostfile { path: "hosts".into(), reason: "No such file or directory (os error 2)".into() },
         "cannot read SLURM_HOSTFILE hosts: No such file or directory (os error 2)"),
        (PassOrder { reason: "Invalid argument (os error 22)".into() },
         "cannot pass the task order to the nodes: Invalid argument (os error 22)"),
        (Isolation { node: "n9".into(), reason: "cannot load libnftables.so.1: libnftables.so.1: cannot open shared object file: No such file or directory".into() },
         "isolate=yes: node n9 cannot install the step's firewall: cannot load libnftables.so.1: libnftables.so.1: cannot open shared object file: No such file or directory; the step is stopped, so that no TensorFlow server of it runs open to other users"),
        (Ports { node: "n9".into(), reason: "cannot make /run/tfcluster/claims/n9: Read-only file system (os error 30)".into() },
         "node n9 cannot give the step its ports: cannot make /run/tfcluster/claims/n9: Read-only file system (os error 30); no task of the step runs on this node, and the step is stopped on every node (when the reason is the node's files, ask the admin to let slurmstepd write /run/tfcluster)"),
        (FromEnvironment { error: Box::new(Core(Error::NoNodes)) },
         "the step has no nodes (SLURM_STEP_NODELIST is empty); this --tf-cluster came from the job's environment (#SBATCH --tf-cluster, or SLURM_SPANK__SLURM_SPANK_OPTION_tfcluster_tf_cluster), which srun applies to every step: a step that is not TensorFlow's opts out with srun --tf-cluster=off"),
        (Kill { reason: "Access/permission denied".into() },
         "could not stop the step's other tasks (Access/permission denied); they run until they exit or reach the time limit"),
    ];
    for (error, message) in &cases {
        assert_eq!(error.to_string(), *message);
    }
    let covered: HashSet<&str> = cases.iter().map(|(e, _)| shell_variant(e)).collect();
    let missing: Vec<&&str> = SHELL_VARIANTS.iter().filter(|v| !covered.contains(*v)).collect();
    assert!(missing.is_empty(), "no row for {missing:?}");
}

#[rustfmt::skip]
variants!(shell_variant, SHELL_VARIANTS, ShellError:
    Core, Env, Missing, Item, GlobalId, SetEnv, Hostfile, PassOrder, Ports, Isolation, FromEnvironment, Kill,
);
