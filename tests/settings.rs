//! Admin settings and per-job overrides: ports, addresses, GPU policy, rpc_layer.

#![allow(clippy::type_complexity)] // tables of cases

mod common;
use common::*;
use serde_json::json;
use tfcluster::core::ending::{Cause, End, WorkerSeen};
use tfcluster::core::ports::{PortPolicy, StepPorts};
use tfcluster::core::settings::KEYS;
use tfcluster::core::{GpuAction, NodeFacts, Settings};

/// One row of [`port_policies`]: the policy, `SLURM_STEP_RESV_PORTS`, the job and step ids and
/// the most tasks on a node, and the ports of slots 0, 1 and 2.
struct Ports {
    policy: PortPolicy,
    reserved: Option<&'static str>,
    job: u32,
    step: u32,
    most_local: usize,
    slots: [u32; 3],
}

#[rustfmt::skip]
#[test]
fn port_policies() {
    const RANGE: PortPolicy = PortPolicy::Range { lo: 20000, hi: 32767, block: 64 };
    let rows = [
        Ports { policy: PortPolicy::Base(8888), reserved: None,                      job: 7, step: 0, most_local: 3, slots: [8888, 8889, 8890] },
        Ports { policy: PortPolicy::Base(8888), reserved: Some("12000-12003"),       job: 7, step: 0, most_local: 3, slots: [8888, 8889, 8890] }, // port_base wins
        Ports { policy: RANGE,                  reserved: Some("12000-12001,12010"), job: 7, step: 0, most_local: 3, slots: [12000, 12001, 12010] },
        Ports { policy: RANGE,                  reserved: None,                      job: 0, step: 0, most_local: 3, slots: [20000, 20001, 20002] },
        Ports { policy: RANGE,                  reserved: None,                      job: 0, step: 1, most_local: 3, slots: [20064, 20065, 20066] },
    ];
    for row in rows {
        let ports = StepPorts::plan(&row.policy, row.reserved, row.job, row.step, row.most_local, "n1").unwrap();
        let got = [0, 1, 2].map(|slot| ports.of_slot(slot));
        assert_eq!(got, row.slots, "{:?} {:?} job {} step {}", row.policy, row.reserved, row.job, row.step);
    }
}

#[rustfmt::skip]
#[test]
fn port_words_combine_in_any_order() {
    let range = |lo, hi, block| PortPolicy::Range { lo, hi, block };
    let cases: &[(&[&str], PortPolicy)] = &[
        (&[],                                                   range(20000, 32767, 64)),
        (&["port_range=30000-30999"],                           range(30000, 30999, 64)),
        (&["port_block=16", "port_range=30000-30999"],          range(30000, 30999, 16)),
        (&["port_range=30000-30999", "port_block=16"],          range(30000, 30999, 16)),
        (&["port_base=9000", "port_range=30000-30999"],         PortPolicy::Base(9000)),
        (&["port_range=30000-30999", "port_base=9000"],         PortPolicy::Base(9000)),
    ];
    for (words, want) in cases {
        assert_eq!(Settings::from_plugstack(words).unwrap().ports(), *want, "{words:?}");
    }
    // A job's port_base wins over the admin's range; the admin's block survives a port_base.
    let admin = Settings::from_plugstack(&["port_base=9000", "port_block=16"]).unwrap();
    assert_eq!(admin.port_block, 16);
    let job = Settings::default().with_overrides(&[("port_base".into(), "7000".into())]).unwrap();
    assert_eq!(job.ports(), PortPolicy::Base(7000));
}

#[test]
fn steps_of_one_job_never_share_ports() {
    let range = PortPolicy::Range {
        lo: 20000,
        hi: 32767,
        block: 64,
    };
    for job in [1u32, 77, 4242, 999_999, u32::MAX] {
        let mut seen = std::collections::HashSet::new();
        for step in 0..100 {
            let ports = StepPorts::plan(&range, None, job, step, 8, "n1").unwrap();
            for slot in 0..8 {
                let port = ports.of_slot(slot);
                assert!(
                    (20000..=32767).contains(&port),
                    "job {job} step {step}: {port}"
                );
                assert!(
                    seen.insert(port),
                    "job {job} step {step} reuses port {port}"
                );
            }
        }
    }
}

#[test]
fn a_step_wider_than_the_block_takes_a_wider_block() {
    let range = PortPolicy::Range {
        lo: 20000,
        hi: 20999,
        block: 8,
    };
    let ports = StepPorts::plan(&range, None, 0, 3, 100, "n1").unwrap();
    assert_eq!(ports.of_slot(0), 20300);
    assert_eq!(ports.of_slot(99), 20399);
}

#[test]
fn address_template_and_rpc_layer() {
    let p = plan(
        "chief:1,worker:*",
        &[
            "address=%h-ib.example.org",
            "port_base=9000",
            "rpc_layer=grpc+verbs",
        ],
        &step("n[1-2]", "1(x2)", None),
    );
    assert_eq!(
        tf_config(&p, 1),
        json!({"cluster": {"chief": ["n1-ib.example.org:9000"], "worker": ["n2-ib.example.org:9000"]},
               "rpc_layer": "grpc+verbs", "task": {"type": "worker", "index": 0}})
    );
}

#[test]
fn per_job_overrides_win_over_the_admin() {
    let p = plan(
        "worker:*,port_base=7000,rpc_layer=grpc",
        &["port_base=9000"],
        &step("a", "2", None),
    );
    assert_eq!(
        tf_config(&p, 1)["cluster"]["worker"],
        json!(["a:7000", "a:7001"])
    );
    assert_eq!(tf_config(&p, 1)["rpc_layer"], "grpc");
}

#[rustfmt::skip]
#[test]
fn gpu_roles_keep_parameter_servers_off_gpus() {
    // chief, ps, worker, worker on one node with 4 GPUs; only chief and workers get GPUs.
    let p = plan("chief:1,ps:1,worker:*,gpu_roles=chief+worker", &[], &step("a", "4", None));
    let all = Some("0,1,2,3");
    let got: Vec<GpuAction> = (0..4).map(|r| gpus(&p, r, all, all)).collect();
    assert_eq!(got, [set("0"), set(""), set("1"), set("2")]);
    // gpus=keep leaves Slurm's value alone
    let p = plan("worker:*,gpus=keep", &[], &step("a", "2", None));
    assert_eq!(gpus(&p, 1, all, all), GpuAction::Leave);
    // gpu_roles=none hides GPUs from everyone
    let p = plan("worker:*", &["gpu_roles=none"], &step("a", "2", None));
    assert_eq!(gpus(&p, 1, all, all), set(""));
}

/// (spec, tasks per node, each node's CUDA_VISIBLE_DEVICES, every rank's GPUs)
#[rustfmt::skip]
const GPU_SHARES: &[(&str, &str, &[&str], &[&str])] = &[
    // All-reduce training (no ps): every worker gets the busiest node's share.
    ("worker:*",                          "3,1", &["0,1,2,3", "0,1,2,3"], &["0", "1", "2", "0"]),
    ("chief:1,worker:*",                  "2,1", &["0,1,2,3", "0,1,2,3"], &["0,1", "2,3", "0,1"]),
    ("worker:*",                          "2,2", &["0,1,2,3", "4,5,6,7"], &["0,1", "2,3", "4,5", "6,7"]),
    ("worker:*,gpu_roles=none",           "3,1", &["0,1,2,3", "0,1,2,3"], &["", "", "", ""]),
    // The evaluator trains nothing with the others, but takes a GPU share like any GPU task.
    ("chief:1,evaluator:1,worker:*",      "3,1", &["0,1,2,3", "0,1,2,3"], &["0", "1", "2", "0"]),
    // Opted out, or ParameterServerStrategy (ps): each node splits its own.
    ("worker:*,even_gpus=no",             "3,1", &["0,1,2,3", "0,1,2,3"], &["0", "1", "2", "0,1,2,3"]),
    ("chief:1,ps:1,worker:*",             "3,1", &["0,1,2,3", "0,1,2,3"], &["0", "1", "2", "0,1,2,3"]),
    ("chief:1,ps:1,worker:*,even_gpus=yes", "3,1", &["0,1,2,3", "0,1,2,3"], &["0", "1", "2", "0"]),
    // DTensor needs equal devices per client, with or without ps in the spec.
    ("chief:1,ps:1,worker:*,dtensor=yes", "3,1", &["0,1,2,3", "0,1,2,3"], &["0", "1", "2", "0"]),
    // Only GPU tasks count towards the busiest node: ps off GPUs, 2 GPU tasks on each node.
    ("chief:1,ps:1,worker:*,gpu_roles=chief+worker,even_gpus=yes", "3,2", &["0,1,2,3", "0,1,2,3"],
        &["0,1", "", "2,3", "0,1", "2,3"]),
];

#[test]
fn gpu_shares() {
    for (spec, counts, node_gpus, want) in GPU_SHARES {
        let p = plan(spec, &[], &step("a,b", counts, None));
        let got: Vec<GpuAction> = (0..p.tasks())
            .map(|r| {
                let g = Some(node_gpus[where_is(&p, r).0]);
                gpus(&p, r, g, g)
            })
            .collect();
        let want: Vec<GpuAction> = want.iter().map(|v| set(v)).collect();
        assert_eq!(got, want, "{spec} on {counts}");
    }
}

/// (spec, tasks per node, the line rank 0 prints about GPUs left unused on a node with 4)
#[rustfmt::skip]
const GPU_NOTES: &[(&str, &str, Option<&str>)] = &[
    ("worker:*",              "3,1", Some("every GPU task gets 1 GPU, the share of the busiest node (a: 3 GPU tasks for 4 GPUs), because all-reduce training needs the same count on every worker; nodes with fewer tasks leave GPUs unused. Put as many tasks on every node (--ntasks-per-node) to use them all, or set even_gpus=no")),
    ("worker:*",              "1,2", Some("every GPU task gets 2 GPUs, the share of the busiest node (b: 2 GPU tasks for 4 GPUs), because all-reduce training needs the same count on every worker; nodes with fewer tasks leave GPUs unused. Put as many tasks on every node (--ntasks-per-node) to use them all, or set even_gpus=no")),
    ("worker:*",              "2,2", None), // even already
    ("worker:*",              "4,4", None),
    ("worker:*,even_gpus=no", "3,1", None),
    ("worker:*,gpus=keep",    "3,1", None),
    ("chief:1,ps:1,worker:*", "3,1", None),
];

#[test]
fn why_some_gpus_stay_unused() {
    for (spec, counts, want) in GPU_NOTES {
        let p = plan(spec, &[], &step("a,b", counts, None));
        assert_eq!(
            p.gpu_note(Some("0,1,2,3")).as_deref(),
            *want,
            "{spec} on {counts}"
        );
    }
    // No GPUs on the node: nothing to say.
    let p = plan("worker:*", &[], &step("a,b", "3,1", None));
    assert_eq!(p.gpu_note(None), None);
}

/// (spec, plugstack words, the task that ends the step when it exits: (rank, message for exit
/// status 0) or None)
#[rustfmt::skip]
const ENDS: &[(&str, &[&str], Option<(u32, &str)>)] = &[
    ("chief:1,ps:2,worker:*",                    &[],                     Some((0, "chief exited 0; stopping the step's other 7 tasks"))),
    ("ps:1,worker:*",                            &[],                     Some((1, "worker 0 exited 0; stopping the step's other 7 tasks"))),
    ("master:1,ps:1,worker:*",                   &[],                     Some((0, "master exited 0; stopping the step's other 7 tasks"))),
    ("chief:1,evaluator:1,ps:1,worker:*",        &[],                     Some((0, "chief exited 0; stopping the step's other 7 tasks"))),
    ("chief:1,worker:*",                         &[],                     None), // MultiWorkerMirroredStrategy: every task exits by itself
    ("worker:*",                                 &[],                     None),
    ("chief:1,worker:*,end_with_chief=yes",      &[],                     Some((0, "chief exited 0; stopping the step's other 7 tasks"))),
    ("worker:*",                                 &["end_with_chief=yes"], Some((0, "worker 0 exited 0; stopping the step's other 7 tasks"))),
    ("chief:1,ps:2,worker:*,end_with_chief=no",  &[],                     None),
    ("chief:1,ps:2,worker:*",                    &["end_with_chief=no"],  None),
    ("chief:1,ps:2,worker:*,end_with_chief=auto", &["end_with_chief=no"], Some((0, "chief exited 0; stopping the step's other 7 tasks"))), // the job's word wins
];

#[test]
fn the_task_that_ends_the_step() {
    for (spec, admin, want) in ENDS {
        let plan = plan(spec, admin, &step("a,b", "4(x2)", None));
        let got = plan.decider().map(|d| (d.rank, d.exit_message(Some(0))));
        assert_eq!(
            got.as_ref().map(|(r, m)| (*r, m.as_str())),
            *want,
            "{spec} {admin:?}"
        );
    }
    // A one-task step has nothing to stop.
    assert_eq!(
        plan("chief:1", &["end_with_chief=yes"], &step("a", "1", None)).decider(),
        None
    );
}

/// (wait status, how the message says the task ended)
#[rustfmt::skip]
const STATUSES: &[(Option<i32>, &str)] = &[
    (Some(0),          "chief exited 0; stopping the step's other 1 task"),
    (Some(3 << 8),     "chief exited 3; stopping the step's other 1 task"),
    (Some(255 << 8),   "chief exited 255; stopping the step's other 1 task"),
    (Some(9),          "chief was killed by signal 9; stopping the step's other 1 task"),
    (Some(11 | 0x80),  "chief was killed by signal 11; stopping the step's other 1 task"), // core dumped
    (None,             "chief ended; stopping the step's other 1 task"), // Slurm gave no status
];

#[test]
fn what_the_user_is_told_when_the_chief_exits() {
    let plan = plan("chief:1,ps:1", &[], &step("a", "2", None));
    let decider = plan.decider().unwrap();
    for (status, want) in STATUSES {
        assert_eq!(decider.exit_message(*status), *want, "{status:?}");
    }
}

/// How a task's end counts (wait status, OOM kill seen, preemption_exit, what it is). A signal
/// someone sends (Slurm, srun, the user) or a shell's 128+N for one is not a failure.
#[rustfmt::skip]
const CAUSES: &[(i32, bool, u8, Cause)] = &[
    (0,            false, 42,  Cause::Success),
    (3 << 8,       false, 42,  Cause::Failed),
    (1 << 8,       false, 42,  Cause::Failed),
    (255 << 8,     false, 42,  Cause::Failed),       // exit(-1): not a signal
    (128 << 8,     false, 42,  Cause::Failed),
    (42 << 8,      false, 42,  Cause::Preempted),    // TensorFlow's PreemptionCheckpointHandler
    (42 << 8,      false, 7,   Cause::Failed),       // preemption_exit=7: 42 is a failure
    (7 << 8,       false, 7,   Cause::Preempted),
    (143 << 8,     false, 143, Cause::Preempted),    // exit_fn=sys.exit(143), as on GCP
    (15,           false, 42,  Cause::Sent),         // SIGTERM: preemption, time limit, scancel
    (143 << 8,     false, 42,  Cause::Sent),         // a shell whose program got SIGTERM
    (9,            false, 42,  Cause::Sent),         // SIGKILL: the step is being ended
    (137 << 8,     false, 42,  Cause::Sent),
    (9,            true,  42,  Cause::Failed),       // the OOM killer's SIGKILL
    (137 << 8,     true,  42,  Cause::Failed),       // a shell whose program the OOM killer took
    (15,           true,  42,  Cause::Sent),         // an OOM kill elsewhere does not matter
    (2,            false, 42,  Cause::Sent),         // SIGINT: srun's Ctrl-C
    (10,           false, 42,  Cause::Sent),         // SIGUSR1: --signal
    (11,           false, 42,  Cause::Failed),       // SIGSEGV
    (11 | 0x80,    false, 42,  Cause::Failed),       // SIGSEGV, core dumped
    (6,            false, 42,  Cause::Failed),       // SIGABRT
    (7,            false, 42,  Cause::Failed),       // SIGBUS
    (8,            false, 42,  Cause::Failed),       // SIGFPE
    (4,            false, 42,  Cause::Failed),       // SIGILL
    (139 << 8,     false, 42,  Cause::Failed),       // a shell whose program crashed
];

#[test]
fn what_a_task_end_counts_as() {
    for (status, oom, preemption_exit, want) in CAUSES {
        let got = End::from_wait_status(*status).cause(*preemption_exit, || *oom);
        assert_eq!(
            got, *want,
            "status {status:#x}, oom {oom}, preemption_exit {preemption_exit}"
        );
    }
}

/// How a task's end ends the step, or does not.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ended {
    /// A failure: the node's error line, srun's exit status is the task's.
    Failure,
    /// The decider's end: training is over.
    TrainingOver,
    /// A failure the step survives: the node's error line, and the step goes on.
    GoesOn,
}
use Ended::*;

/// One task's end ([`FAILURES`]), in a step on nodes a,b with 2 tasks each.
struct TaskEnd {
    /// The spec, with its overrides.
    spec: &'static str,
    /// The rank that ends, its wait status, and whether the node saw an OOM kill.
    rank: u32,
    status: i32,
    oom_killed: bool,
    /// A worker to which the node saw the chief's connection, and how many workers the node had
    /// lost before it (`fail_fast=auto` with ps); `None`: no connection seen.
    reached: Option<u32>,
    /// When the step is ended: whether as a failure or as the end of training, and the line
    /// srun prints.
    ends: Option<(Ended, &'static str)>,
}

#[rustfmt::skip]
const FAILURES: &[TaskEnd] = &[
    TaskEnd { spec: "worker:*",                          rank: 2, status: 3 << 8,    oom_killed: false, reached: None, ends: Some((Failure, "rank 2 (worker:2 on b) exited 3; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "worker:*",                          rank: 2, status: 0,         oom_killed: false, reached: None, ends: None },                 // success: MWMS tasks exit by themselves
    TaskEnd { spec: "worker:*",                          rank: 2, status: 42 << 8,   oom_killed: false, reached: None, ends: None },                 // preempted: the chief may still be saving
    TaskEnd { spec: "worker:*",                          rank: 2, status: 15,        oom_killed: false, reached: None, ends: None },                 // Slurm's SIGTERM
    TaskEnd { spec: "worker:*",                          rank: 3, status: 9,         oom_killed: false, reached: None, ends: None },                 // Slurm's SIGKILL
    TaskEnd { spec: "worker:*",                          rank: 3, status: 9,         oom_killed: true, reached: None, ends: Some((Failure, "rank 3 (worker:3 on b) was killed by the OOM killer (SIGKILL); stopping the step's other 3 tasks")) },
    TaskEnd { spec: "worker:*",                          rank: 3, status: 137 << 8,  oom_killed: true, reached: None, ends: Some((Failure, "rank 3 (worker:3 on b) exited 137 (a program it ran was killed by the OOM killer); stopping the step's other 3 tasks")) },
    TaskEnd { spec: "worker:*",                          rank: 1, status: 11 | 0x80, oom_killed: false, reached: None, ends: Some((Failure, "rank 1 (worker:1 on a) was killed by signal 11 (SIGSEGV); stopping the step's other 3 tasks")) },
    TaskEnd { spec: "chief:1,worker:*",                  rank: 0, status: 1 << 8,    oom_killed: false, reached: None, ends: Some((Failure, "rank 0 (chief:0 on a) exited 1; stopping the step's other 3 tasks")) }, // MWMS's chief fails
    TaskEnd { spec: "chief:1,worker:*",                  rank: 0, status: 0,         oom_killed: false, reached: None, ends: None },
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 2, status: 3 << 8,    oom_killed: false, reached: None, ends: Some((Failure, "rank 2 (worker:0 on b) exited 3; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 1, status: 1 << 8,    oom_killed: false, reached: None, ends: Some((Failure, "rank 1 (ps:0 on a) exited 1; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 0, status: 3 << 8,    oom_killed: false, reached: None, ends: Some((TrainingOver, "chief exited 3; stopping the step's other 3 tasks")) }, // the decider's own line
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 0, status: 15,        oom_killed: false, reached: None, ends: Some((TrainingOver, "chief was killed by signal 15; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "chief:1,evaluator:1,worker:*",      rank: 1, status: 1 << 8,    oom_killed: false, reached: None, ends: None },                 // an evaluator never ends training
    TaskEnd { spec: "chief:1,evaluator:1,worker:*",      rank: 1, status: 11,        oom_killed: false, reached: None, ends: None },
    TaskEnd { spec: "worker:*,fail_fast=no",             rank: 2, status: 3 << 8,    oom_killed: false, reached: None, ends: None },
    TaskEnd { spec: "chief:1,ps:1,worker:*,fail_fast=no", rank: 2, status: 3 << 8,   oom_killed: false, reached: None, ends: None },
    TaskEnd { spec: "chief:1,ps:1,worker:*,fail_fast=no", rank: 0, status: 3 << 8,   oom_killed: false, reached: None, ends: Some((TrainingOver, "chief exited 3; stopping the step's other 3 tasks")) }, // end_with_chief still
    TaskEnd { spec: "worker:*,preemption_exit=143",      rank: 2, status: 42 << 8,   oom_killed: false, reached: None, ends: Some((Failure, "rank 2 (worker:2 on b) exited 42; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "worker:*,preemption_exit=143",      rank: 2, status: 143 << 8,  oom_killed: false, reached: None, ends: None },
    // fail_fast=auto with ps: a worker the chief had reached fails, the step goes on, until
    // no worker is left by the node's count; MultiWorkerMirroredStrategy and fail_fast=yes as before.
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 2, status: 3 << 8,    oom_killed: false, reached: Some(0), ends: Some((GoesOn, "rank 2 (worker:0 on b) exited 3 after the chief had connected to it; the step goes on without it (ParameterServerStrategy gives its work to the other workers: 1 of the step's 2 workers left by b's count)")) },
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 3, status: 11,        oom_killed: false, reached: Some(0), ends: Some((GoesOn, "rank 3 (worker:1 on b) was killed by signal 11 (SIGSEGV) after the chief had connected to it; the step goes on without it (ParameterServerStrategy gives its work to the other workers: 1 of the step's 2 workers left by b's count)")) },
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 3, status: 3 << 8,    oom_killed: false, reached: Some(1), ends: Some((Failure, "rank 3 (worker:1 on b) exited 3 after the chief had connected to it, and no worker is left (b has lost all 2); stopping the step's other 3 tasks")) },
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 1, status: 1 << 8,    oom_killed: false, reached: Some(0), ends: Some((Failure, "rank 1 (ps:0 on a) exited 1; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "chief:1,ps:1,worker:*,fail_fast=yes", rank: 2, status: 3 << 8,  oom_killed: false, reached: Some(0), ends: Some((Failure, "rank 2 (worker:0 on b) exited 3; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "worker:*",                          rank: 2, status: 3 << 8,    oom_killed: false, reached: Some(0), ends: Some((Failure, "rank 2 (worker:2 on b) exited 3; stopping the step's other 3 tasks")) },
    TaskEnd { spec: "chief:1,ps:1,worker:*",             rank: 2, status: 15,        oom_killed: false, reached: Some(0), ends: None },                 // Slurm's SIGTERM is no failure
];

#[test]
fn which_task_end_ends_the_step() {
    for TaskEnd {
        spec,
        rank,
        status,
        oom_killed: oom,
        reached,
        ends: want,
    } in FAILURES
    {
        let plan = plan(spec, &[], &step("a,b", "2(x2)", None));
        let seen = || WorkerSeen {
            reached: reached.is_some(),
            lost_before: reached.unwrap_or(0),
        };
        let got = plan.ending(*rank, Some(*status), || *oom, seen);
        assert_eq!(
            got.as_ref().map(|e| (
                match (e.failure, e.stops) {
                    (true, true) => Failure,
                    (true, false) => GoesOn,
                    (false, _) => TrainingOver,
                },
                e.message.as_str()
            )),
            *want,
            "{spec}: rank {rank} status {status:#x} oom {oom}"
        );
    }
    // Site-wide off, and the job turning it back on.
    let failing = |spec: &str, admin: &[&str]| {
        plan(spec, admin, &step("a,b", "2(x2)", None))
            .ending(2, Some(3 << 8), || false, WorkerSeen::default)
            .is_some()
    };
    assert!(!failing("worker:*", &["fail_fast=no"]));
    assert!(failing("worker:*,fail_fast=yes", &["fail_fast=no"]));
    // A one-task step has nothing to stop; an unknown status ends nothing.
    assert!(plan("worker:*", &[], &step("a", "1", None))
        .ending(0, Some(3 << 8), || false, WorkerSeen::default)
        .is_none());
    assert!(plan("worker:*", &[], &step("a,b", "2(x2)", None))
        .ending(2, None, || false, WorkerSeen::default)
        .is_none());
    // The node's OOM count is read only for a SIGKILL.
    let p = plan("worker:*", &[], &step("a,b", "2(x2)", None));
    p.ending(
        2,
        Some(3 << 8),
        || panic!("read for an exit 3"),
        WorkerSeen::default,
    );
    p.ending(
        2,
        Some(15),
        || panic!("read for a SIGTERM"),
        WorkerSeen::default,
    );
    // What the node saw of a task is asked only for a worker's failure, with ps and
    // fail_fast=auto (it looks at the node's sockets once more).
    let unasked = || -> WorkerSeen { panic!("asked") };
    let ps = plan("chief:1,ps:1,worker:*", &[], &step("a,b", "2(x2)", None));
    ps.ending(1, Some(3 << 8), || false, unasked); // ps
    ps.ending(0, Some(3 << 8), || false, unasked); // the chief
    ps.ending(2, Some(0), || false, unasked); // a success
    p.ending(2, Some(3 << 8), || false, unasked); // no ps
    plan(
        "chief:1,ps:1,worker:*,fail_fast=yes",
        &[],
        &step("a,b", "2(x2)", None),
    )
    .ending(2, Some(3 << 8), || false, unasked);
}

/// `fail_fast=auto` with ps: the server ports the node watches are its workers' own, and
/// only where a worker's failure can be survived.
#[test]
fn which_ports_a_node_watches() {
    #[rustfmt::skip]
    let cases: &[(&str, usize, &[(u32, u16)])] = &[
        ("chief:1,ps:1,worker:*",               1, &[(2, 28854), (3, 28855)]),
        ("chief:1,ps:1,worker:*",               0, &[]),                       // the chief and ps
        ("chief:1,ps:1,worker:*,fail_fast=yes", 1, &[]),
        ("chief:1,ps:1,worker:*,fail_fast=no",  1, &[]),
        ("worker:*",                            1, &[]),                       // no ps: MultiWorkerMirroredStrategy
        ("ps:1,worker:*",                       0, &[(1, 28855)]),            // no chief: worker 0 decides
    ];
    for (spec, node, want) in cases {
        let plan = plan(spec, &[], &step("a,b", "2(x2)", None));
        let facts = NodeFacts {
            node: *node,
            gtids: &[2 * *node as u32, 2 * *node as u32 + 1],
            step_gpus: None,
            slurm_gave_gpus: false,
        };
        let place = plan.place(None, &facts).unwrap();
        assert_eq!(plan.watched_workers(&place), *want, "{spec}, node {node}");
    }
}

/// (the job's proxy variables, the task's no_grpc_proxy for cluster hosts n1, n2)
#[rustfmt::skip]
const PROXIES: &[(&[(&str, &str)], Option<&str>)] = &[
    (&[],                                                        None),                     // no proxy: nothing set
    (&[("no_proxy", "example.org")],                             None),
    (&[("http_proxy", "http://p:3128")],                         Some("n1,n2")),
    (&[("https_proxy", "http://p:3128")],                        Some("n1,n2")),
    (&[("grpc_proxy", "http://p:3128")],                         Some("n1,n2")),
    (&[("HTTP_PROXY", "http://p:3128")],                         Some("n1,n2")),            // upper case counts too
    (&[("HTTPS_PROXY", "http://p:3128")],                        Some("n1,n2")),
    (&[("http_proxy", "")],                                      None),                     // set but empty: no proxy
    (&[("http_proxy", "  ")],                                    None),
    (&[("ftp_proxy", "http://p:3128")],                          None),                     // gRPC does not read it
    (&[("http_proxy", "x"), ("no_proxy", "localhost,.site")],    Some("localhost,.site,n1,n2")), // no_proxy kept
    (&[("http_proxy", "x"), ("no_grpc_proxy", "10.0.0.0/8"), ("no_proxy", "localhost")],
                                                                 Some("10.0.0.0/8,n1,n2")),  // gRPC reads no_grpc_proxy first
    (&[("http_proxy", "x"), ("no_grpc_proxy", ""), ("no_proxy", "localhost")],
                                                                 Some("localhost,n1,n2")),   // an empty one does not count
    (&[("http_proxy", "x"), ("NO_PROXY", "localhost")],          Some("localhost,n1,n2")),   // upper case when no lower
    (&[("http_proxy", "x"), ("no_proxy", "a"), ("NO_PROXY", "b")], Some("a,n1,n2")),         // lower case first
    (&[("http_proxy", "x"), ("no_proxy", ""), ("NO_PROXY", "b")], Some("b,n1,n2")),
    (&[("http_proxy", "x"), ("no_proxy", "n2, localhost ,")],    Some("n2,localhost,n1")),   // no duplicates, blanks dropped
];

#[test]
fn grpc_bypasses_the_proxy_for_the_cluster() {
    use tfcluster::core::proxy::{no_grpc_proxy, ProxyEnv};
    for (vars, want) in PROXIES {
        let env = ProxyEnv::from_pairs(vars);
        assert_eq!(
            no_grpc_proxy(&env, &["n1", "n2", "n1"]).as_deref(),
            *want,
            "{vars:?}"
        );
    }
}

// ---- the settings' documentation is the table in the code ------------------------------------

fn repo_file(name: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

/// docs/admin-guide.md's configuration reference, as `KEYS` renders it.
fn settings_table() -> String {
    let mut table = String::from(
        "| key | default | allowed values | example | meaning |\n|---|---|---|---|---|\n",
    );
    for k in KEYS {
        table += &format!(
            "| `{}` | {} | {} | {} | {} |\n",
            k.name, k.default, k.values, k.example, k.meaning
        );
    }
    table
}

/// Each setting is documented once, beside the code that reads it (`KEYS`); the admin guide's table is
/// that, row by row, in the same order.
#[test]
fn readme_documents_every_setting_as_the_code_does() {
    let table = settings_table();
    assert!(
        repo_file("docs/admin-guide.md").contains(&table),
        "docs/admin-guide.md's configuration reference must be exactly:\n{table}"
    );
    let per_job: Vec<String> = KEYS
        .iter()
        .filter(|k| k.per_job)
        .map(|k| format!("`{}`", k.name))
        .collect();
    let line = format!(
        "| per-job settings | `--tf-cluster=chief:1,ps:2,worker:*,port_base=24000,gpu_roles=chief+worker` | {} |",
        per_job.join(", ")
    );
    assert!(
        repo_file("docs/admin-guide.md").lines().any(|l| l == line),
        "docs/admin-guide.md must list the per-job settings as:\n{line}"
    );
}

/// A documented default is the default: the word it makes changes nothing.
#[test]
fn each_documented_default_is_the_default() {
    for k in KEYS.iter().filter(|k| k.default != "unset") {
        let word = format!("{}={}", k.name, k.default.trim_matches('`'));
        assert_eq!(
            Settings::from_plugstack(&[word.as_str()]).as_ref(),
            Ok(&Settings::default()),
            "{word}"
        );
    }
}

/// plugstack.conf.example describes every setting, in the table's order, and no other.
#[test]
fn the_example_describes_every_setting() {
    let example = repo_file("plugstack.conf.example");
    let described: Vec<&str> = example
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .filter_map(|l| l.split_once('=').map(|(key, _)| key))
        .filter(|key| key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .collect();
    let keys: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
    assert_eq!(described, keys);
}

/// The man page's SETTINGS entries, as `KEYS` renders them in roff.
fn man_settings() -> String {
    // Markdown's `code` becomes plain text, and a [text](#section) link the admin guide's
    // section of that name.
    let roff = |text: &str| {
        let mut out = text.replace('`', "").replace('\\', "\\e");
        while let Some(open) = out.find("](") {
            let (Some(start), Some(len)) = (out[..open].rfind('['), out[open..].find(')')) else {
                break;
            };
            let close = open + len;
            out = format!(
                "{}the admin guide's {} section{}",
                &out[..start],
                &out[start + 1..open],
                &out[close + 1..]
            );
        }
        out
    };
    KEYS.iter()
        .map(|k| {
            format!(
                ".TP\n.B {}\n{}.\nDefault: {}. Values: {}. Set in {}.\n",
                k.name,
                roff(k.meaning),
                roff(k.default),
                roff(k.values),
                if k.per_job {
                    "plugstack.conf, or per job in --tf-cluster"
                } else {
                    "plugstack.conf only"
                },
            )
        })
        .collect()
}

/// spank-tfcluster(8) documents every setting as the code does.
#[test]
fn the_man_page_documents_every_setting() {
    let section = man_settings();
    assert!(
        repo_file("packaging/spank-tfcluster.8").contains(&section),
        "the man page's SETTINGS entries must be exactly:\n{section}"
    );
}
