//! Real TensorFlow on the real test cluster, driven only by what tfcluster injects. The
//! programs in tests/tensorflow/ contain no Slurm code: they build everything from TF_CONFIG.
//! Needs the cluster and a TensorFlow virtualenv (TFC_PYTHON); tests/run.sh provides both.

mod common;
use common::cluster::{
    bundle, cluster_pgrep, cluster_sh, dir, end_line, ended_with_the_chief, epilogs_done,
    hold_oom_count, plugin, records, requeued_job, requeued_training_args, resumed_at, sh,
    stop_line, tool, trained_together, PlugStack, INTERRUPTED_AT,
};
use serde_json::{json, Value};
use std::collections::HashSet;
use tfcluster::core::ending::WorkerSeen;

fn python() -> String {
    std::env::var("TFC_PYTHON").expect("TFC_PYTHON: the virtualenv's python (tests/run.sh sets it)")
}

/// Runs a TensorFlow program as every task of a step; bounded in time, and a failing task
/// takes the step down rather than leaving its peers waiting.
fn tf_step(srun_args: &str, program: &str) -> (String, String) {
    tf_step_as("", srun_args, program)
}

/// [`tf_step`], with srun started by `runner` (e.g. `runuser -u USER --`).
fn tf_step_as(runner: &str, srun_args: &str, program: &str) -> (String, String) {
    let out = sh(&format!(
        "{runner} srun -t 5 {srun_args} {} {}",
        python(),
        tool(program)
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "srun {srun_args} {program} failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// MultiWorkerMirroredStrategy across nodes while the job's environment names a proxy that does
/// not answer, as many sites set one: tfcluster's no_grpc_proxy lets it train; without it
/// (grpc_proxy_bypass=no) gRPC goes through the dead proxy and training hangs.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn training_is_not_sent_through_a_dead_proxy() {
    let proxy = "--export=ALL,http_proxy=http://127.0.0.1:9,https_proxy=http://127.0.0.1:9";
    let (stdout, _) = tf_step(
        &format!("{proxy} -w n011,n012 -N2 -n2 --tf-cluster"),
        "mwms_train.py",
    );
    assert_eq!(records(&stdout, "RESULT").len(), 2, "{stdout}");
    // The same without the bypass, bounded: both tasks start training, and 40 s later they are
    // still waiting (`timeout` ends srun: 124), with no result.
    let out = sh(&format!(
        "timeout 40 srun {proxy} -w n011,n012 -N2 -n2 --tf-cluster=worker:*,grpc_proxy_bypass=no {} {}",
        python(),
        tool("mwms_train.py")
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(records(&stdout, "STARTED").len(), 2, "{stdout}\n{stderr}");
    assert!(records(&stdout, "RESULT").is_empty(), "{stdout}");
    assert_eq!(
        out.status.code(),
        Some(124),
        "expected a hang without the bypass:\n{stderr}"
    );
}

/// (what, srun arguments, roles that train)
#[rustfmt::skip]
const MWMS: &[(&str, &str, &[&str])] = &[
    ("one worker per node on 4 nodes",  "-N4 -n4 --tf-cluster",                                 &["worker"; 4]),
    ("two workers per node",            "-w n011,n012 -N2 -n4 --tf-cluster",                    &["worker"; 4]),
    ("a chief and workers",             "-w n011,n012 -N2 -n3 --tf-cluster=chief:1,worker:*",   &["chief", "worker", "worker"]),
];

#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn multi_worker_mirrored_strategy_trains_across_nodes() {
    for (what, args, roles) in MWMS {
        let (stdout, _) = tf_step(args, "mwms_train.py");
        trained_together(what, &stdout, roles);
    }
}

/// MultiWorkerMirroredStrategy inside Slurm's own container (`srun --container`, Debian's runc):
/// the image is another Debian than the node's (tests/common/cluster.rs `bundle`), with the
/// TensorFlow virtualenv bound in. From 23.02 every task trains in its container (PID 1 of its
/// own PID namespace) on the TF_CONFIG tfcluster set, and all end with the same weights; on
/// 22.05, where the container would get no TF_CONFIG, srun refuses the step before any task
/// starts.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn multi_worker_mirrored_strategy_trains_in_slurms_container() {
    let release = common::release::current();
    let venv = std::path::Path::new(&python())
        .parent()
        .and_then(|bin| bin.parent())
        .unwrap()
        .display()
        .to_string();
    let bundle = bundle("tensorflow", &[&venv]);
    let out = sh(&format!(
        "srun -t 5 -w n011,n012 -N2 -n3 --tf-cluster=chief:1,worker:* --container={bundle} \
         sh -c 'echo \"PID|$SLURM_PROCID|$$\"; exec {} {}'",
        python(),
        tool("mwms_train.py")
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !release.container_gets_task_env {
        assert!(
            stderr.contains(
                "error: tfcluster: --tf-cluster cannot reach tasks in Slurm's --container"
            ),
            "{stderr}"
        );
        assert!(
            !out.status.success() && !stdout.contains("STARTED"),
            "{stdout}"
        );
        return;
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let pids = records(&stdout, "PID");
    assert_eq!(pids.len(), 3, "{stdout}");
    assert!(
        pids.iter().all(|p| p[1] == "1"),
        "outside the container:\n{stdout}"
    );
    let results = records(&stdout, "RESULT");
    let mut roles: Vec<&str> = results.iter().map(|r| r[0]).collect();
    roles.sort();
    assert_eq!(roles, ["chief", "worker", "worker"], "{stdout}");
    let finals: HashSet<(&str, &str)> = results.iter().map(|r| (r[2], r[3])).collect();
    assert_eq!(finals.len(), 1, "the tasks disagree: {finals:?}");
}

/// ps_join.py's chief's one `RESULT` record (loss, steps, unix time), whose loss shows that
/// training converged.
fn chief_result<'a>(what: &str, stdout: &'a str, stderr: &str) -> Vec<&'a str> {
    let result = records(stdout, "RESULT");
    assert_eq!(
        result.len(),
        1,
        "{what}: the chief finished training\n{stdout}\n{stderr}"
    );
    let loss: f64 = result[0][0].parse().unwrap();
    assert!(
        loss < 0.5,
        "{what}: training did not converge (loss {loss})"
    );
    result[0].clone()
}

/// One step of [`PS`].
struct PsStep {
    what: &'static str,
    /// srun's arguments, `{p}` standing for the program where a heterogeneous job's first
    /// component needs it.
    args: &'static str,
    /// Every task's `role|index`.
    roles: &'static [&'static str],
    chief_exit: i32,
    /// srun makes a heterogeneous job.
    het_job: bool,
}

/// ParameterServerStrategy as TensorFlow documents it: servers join() forever, tfcluster ends the
/// step when the chief is done.
#[rustfmt::skip]
const PS: &[PsStep] = &[
    PsStep { what: "two parameter servers", args: "-w n011,n012,n9 -N3 -n5 --tf-cluster=chief:1,ps:2,worker:*",
        roles: &["chief|0", "ps|0", "ps|1", "worker|0", "worker|1"], chief_exit: 0, het_job: false },
    PsStep { what: "a chief that fails",    args: "-w n011,n012 -N2 -n4 --tf-cluster=chief:1,ps:1,worker:*",
        roles: &["chief|0", "ps|0", "worker|0", "worker|1"], chief_exit: 3, het_job: false },
    PsStep { what: "chief and ps on a CPU node, workers on GPU nodes (a heterogeneous job)",
        args: "-p cpu -w cpu1 -n3 --tf-cluster=chief:1,ps:2,worker:* {p} : -p gpu -w n011,n012 -N2 -n2 --gres=gpu:1",
        roles: &["chief|0", "ps|0", "ps|1", "worker|0", "worker|1"], chief_exit: 0, het_job: true },
];

#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn parameter_server_strategy_trains_and_the_step_ends_with_the_chief() {
    let _defaults = PlugStack::defaults();
    let release = common::release::current();
    for PsStep {
        what,
        args,
        roles,
        chief_exit: code,
        het_job,
    } in PS
    {
        let program = format!("{} {}", python(), tool("ps_join.py"));
        let out = sh(&format!(
            "srun -t 5 --export=ALL,TFC_CHIEF_EXIT={code} {} {program}; echo \"SRUN|$?|$(date +%s.%N)\"",
            args.replace("{p}", &program)
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let mut seen: Vec<String> = records(&stdout, "ROLE")
            .iter()
            .map(|r| r.join("|"))
            .collect();
        seen.sort();
        assert_eq!(seen, *roles, "{what}");
        let result = chief_result(what, &stdout, &stderr);
        // Before 23.11 srun may stop waiting for the stopped tasks first and exit with the
        // chief's own status (seen on 22.05 with the machine busy, for a chief that failed and
        // for one that succeeded).
        let statuses = if *het_job {
            release.het_job_stopped_statuses(*code)
        } else {
            release.failed_step_statuses(*code)
        };
        ended_with_the_chief(what, &stdout, &stderr, &statuses, result[2], "ps_join.py");
    }
}

/// `isolate=yes` (tests/isolation.rs) as a site turns it on, for a user who is not root:
/// MultiWorkerMirroredStrategy and ParameterServerStrategy train with every other user kept off
/// their servers, and the step still ends with the chief.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn training_runs_with_isolate_yes() {
    // As tests/isolation.rs `isolated`, with end_with_chief at its default.
    let _isolated = PlugStack::set(&format!(
        "required {} isolate=yes port_range=12000-32767",
        plugin()
    ));
    let owner = "runuser -u tfc-owner -- env HOME=/tmp";
    let (what, args, roles) = MWMS[2];
    let (stdout, _) = tf_step_as(owner, args, "mwms_train.py");
    trained_together(&format!("isolate=yes, {what}"), &stdout, roles);
    let PsStep { what, args, .. } = PS[0];
    let out = sh(&format!(
        "{owner} srun -t 5 {args} {} {}",
        python(),
        tool("ps_join.py")
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let what = format!("isolate=yes, {what}:\n{stdout}\n{stderr}");
    assert_eq!(
        records(&stdout, "RESULT").len(),
        1,
        "the chief finished training: {what}"
    );
    // As PS's rows in `parameter_server_strategy_trains_and_the_step_ends_with_the_chief`:
    // before 23.11 srun may also exit with the chief's own 0 (seen on 22.05 in CI, 2026-11-30).
    let statuses = common::release::current().failed_step_statuses(0);
    let status = out.status.code().unwrap_or(-1);
    assert!(
        statuses.contains(&status),
        "status {status}, not one of {statuses:?}: {what}"
    );
}

/// (srun arguments, rank and CUDA_VISIBLE_DEVICES each task's program sees, a line srun prints)
/// The second row: two tasks on one node and one on the other, 4 GPUs each.
/// MultiWorkerMirroredStrategy needs the same count on every worker, so every task sees 2 (the
/// lone task's other 2 stay unused), and srun says why.
#[rustfmt::skip]
const GPUS_SEEN: &[(&str, &[&str], Option<&str>)] = &[
    ("-w n011,n012 -N2 -n4 --gres=gpu:4 --tf-cluster", &["0 0,1", "1 2,3", "2 0,1", "3 2,3"], None),
    ("-w n011,n012 -N2 -n3 --gres=gpu:4 --tf-cluster", &["0 0,1", "1 2,3", "2 0,1"],
     Some("tfcluster: every GPU task gets 2 GPUs, the share of the busiest node (n011: 2 GPU tasks for 4 GPUs)")),
];

#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn the_program_sees_its_own_gpus() {
    for (args, want, line) in GPUS_SEEN {
        let (stdout, stderr) = tf_step(args, "gpus_seen.py");
        let mut got: Vec<String> = records(&stdout, "GPUS")
            .iter()
            .map(|r| format!("{} {}", r[0], r[1]))
            .collect();
        got.sort();
        assert_eq!(got, *want, "{args}");
        if let Some(line) = line {
            assert!(
                stderr.contains(line),
                "{args}: expected {line} in\n{stderr}"
            );
        }
    }
}

fn oracle(srun_args: &str) -> Vec<(String, Value, Value, Value, Value)> {
    let (stdout, _) = tf_step(
        &format!("--export=ALL,TFC_PORT_BASE=8888 {srun_args} --tf-cluster=chief:1,worker:*,port_base=8888"),
        "oracle.py",
    );
    let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    let mut rows: Vec<_> = records(&stdout, "ORACLE")
        .iter()
        .map(|r| {
            (
                r[0].parse::<u32>().unwrap(),
                r[1].to_string(),
                parse(r[2]),
                parse(r[3]),
                parse(r[4]),
                parse(r[5]),
            )
        })
        .collect();
    rows.sort_by_key(|r| r.0);
    rows.into_iter()
        .map(|(_, host, ours, theirs, our_task, their_task)| {
            (host, ours, theirs, our_task, their_task)
        })
        .collect()
}

/// The host a cluster spec says `task` ([type, index]) runs on.
fn host_of(cluster: &Value, task: &Value) -> String {
    let entry = cluster[task[0].as_str().unwrap()][task[1].as_u64().unwrap() as usize]
        .as_str()
        .unwrap();
    entry.rsplit_once(':').unwrap().0.to_string()
}

#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn tensorflows_resolver_agrees_on_block_layouts_over_sorted_names() {
    let rows = oracle("-w n011,n012 -N2 -n4");
    assert_eq!(rows.len(), 4);
    for (host, ours, theirs, our_task, their_task) in &rows {
        assert_eq!(ours, theirs, "on {host}");
        assert_eq!(our_task, their_task, "on {host}");
    }
    assert_eq!(
        rows[0].1,
        json!({"chief": ["n011:8888"], "worker": ["n011:8889", "n012:8888", "n012:8889"]})
    );
}

#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn tfcluster_is_right_where_tensorflows_resolver_is_wrong() {
    for (what, args) in [
        ("cyclic", "-w n011,n012 -N2 -n4 -m cyclic"),
        ("n9 before n10", "-w n9,n10 -N2 -n2"),
    ] {
        let rows = oracle(args);
        let mut tensorflow_wrong = 0;
        for (host, ours, theirs, our_task, their_task) in &rows {
            assert_eq!(
                host_of(ours, our_task),
                *host,
                "{what}: tfcluster must place the task where it runs"
            );
            if host_of(theirs, their_task) != *host {
                tensorflow_wrong += 1;
            }
        }
        assert!(
            tensorflow_wrong > 0,
            "{what}: expected TensorFlow's resolver to misplace some rank: {rows:?}"
        );
    }
}

/// An evaluator beside a training chief and workers, as TensorFlow documents it: the trainers
/// never list it (they train without waiting for it); it builds MultiWorkerMirroredStrategy on
/// itself (one replica: it finds its own role in its cluster) and runs SidecarEvaluator on the
/// chief's checkpoint, after the trainers may have exited.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn an_evaluator_runs_sidecar_evaluator_beside_training() {
    use std::os::unix::fs::PermissionsExt;
    let shared = common::cluster::dir().join("sidecar");
    let _ = std::fs::remove_dir_all(&shared);
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (stdout, _) = tf_step(
        "-w n011,n012 -N2 -n4 --tf-cluster=chief:1,evaluator:1,worker:*",
        &format!("sidecar.py {}", shared.display()),
    );
    let _ = std::fs::remove_dir_all(&shared);
    let trained = records(&stdout, "TRAINED");
    let mut roles: Vec<(&str, &str)> = trained.iter().map(|r| (r[0], r[1])).collect();
    roles.sort();
    assert_eq!(
        roles,
        [("chief", "0"), ("worker", "0"), ("worker", "1")],
        "{stdout}"
    );
    let weights: HashSet<&str> = trained.iter().map(|r| r[2]).collect();
    assert_eq!(weights.len(), 1, "the trainers agree: {stdout}");
    let trainers: Value = serde_json::from_str(trained[0][4]).unwrap();
    assert!(
        trainers.get("evaluator").is_none(),
        "trainers never list it"
    );

    let evaluated = records(&stdout, "EVALUATED");
    assert_eq!(evaluated.len(), 1, "{stdout}");
    let [_, index, replicas, evaluated_weights, loss, cluster] = evaluated[0][..] else {
        panic!("{stdout}")
    };
    assert_eq!((index, replicas), ("0", "1"), "a one-replica strategy");
    assert_eq!(
        Some(&evaluated_weights),
        weights.iter().next(),
        "it evaluated the weights the trainers trained, byte for byte"
    );
    // The same loss, summed in another order by TensorFlow's metric than by numpy.
    let (loss, trained_loss): (f64, f64) = (loss.parse().unwrap(), trained[0][3].parse().unwrap());
    assert!(
        (loss - trained_loss).abs() <= 1e-4 * trained_loss.abs().max(1.0),
        "it evaluated them: loss {loss}, the trainers' {trained_loss}"
    );
    // The chief has n011's first slot, the evaluator its second: the next port.
    let chief = trainers["chief"][0].as_str().unwrap();
    let port: u32 = chief.strip_prefix("n011:").unwrap().parse().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(cluster).unwrap(),
        json!({"evaluator": [format!("n011:{}", port + 1)]}),
        "its own address alone"
    );
}

/// DTensor's multi-client mesh from `dtensor=yes`: 4 clients on 2 nodes form one mesh of 8
/// devices and compute the same sum; without the setting each program is a mesh of its own.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn a_dtensor_mesh_spans_the_step() {
    // (--tf-cluster, what every client prints: clients, global devices, sum, expected sum)
    #[rustfmt::skip]
    let cases: &[(&str, [&str; 4])] = &[
        ("--tf-cluster=dtensor=yes", ["4", "8", "36.0", "36.0"]),
        ("--tf-cluster",             ["1", "2", "3.0", "3.0"]),
    ];
    for (option, want) in cases {
        let (stdout, _) = tf_step(&format!("-w n011,n012 -N2 -n4 {option}"), "dtensor_mesh.py");
        let rows = records(&stdout, "DTENSOR");
        let mut ids: Vec<&str> = rows.iter().map(|r| r[0]).collect();
        ids.sort();
        let want_ids: &[&str] = if want[0] == "4" {
            &["0", "1", "2", "3"]
        } else {
            &["0"; 4]
        };
        assert_eq!(ids, want_ids, "{option}: {stdout}");
        for r in &rows {
            assert_eq!(r[1..], want[..], "{option}: {stdout}");
        }
    }
}

/// One step of [`FAILS_AT_START`].
struct FailsAtStart {
    what: &'static str,
    spec: &'static str,
    /// The step's tasks per node on n[011-012,9-10].
    tasks_per_node: &'static str,
    /// The rank that exits 3 before importing TensorFlow.
    rank: u32,
    /// The others' program, in tests/cluster.
    program: &'static str,
}

/// A task that dies before TensorFlow starts (a broken node, a missing module): without
/// fail_fast MultiWorkerMirroredStrategy's coordination service waits an hour for it and
/// ParameterServerStrategy's chief never reaches its first step. srun shows the core's line for
/// that rank's exit.
#[rustfmt::skip]
const FAILS_AT_START: &[FailsAtStart] = &[
    FailsAtStart { what: "MultiWorkerMirroredStrategy", spec: "worker:*",              tasks_per_node: "1(x4)",   rank: 2, program: "mwms_train.py" },
    FailsAtStart { what: "ParameterServerStrategy",     spec: "chief:1,ps:1,worker:*", tasks_per_node: "2,1(x3)", rank: 3, program: "ps_join.py" },
];

#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn a_task_that_fails_at_start_ends_training() {
    let release = common::release::current();
    let _defaults = PlugStack::defaults();
    for FailsAtStart {
        what,
        spec,
        tasks_per_node,
        rank,
        program,
    } in FAILS_AT_START
    {
        let plan = common::plan(
            spec,
            &[],
            &common::step("n011,n012,n9,n10", tasks_per_node, None),
        );
        let line = stop_line(&plan, *rank, 3 << 8, false).expect("the step is stopped");
        let tasks = plan.layout.ranks.len();
        let args = format!("-w n011,n012,n9,n10 -N4 -n{tasks} --tf-cluster={spec}");
        let started = std::time::Instant::now();
        let out = sh(&format!(
            "srun -t 5 {args} sh -c '[ \"$SLURM_PROCID\" = {rank} ] && exit 3; exec {} {}'",
            python(),
            tool(program)
        ));
        let elapsed = started.elapsed().as_secs_f64();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let code = out.status.code().unwrap_or(-1);
        eprintln!("{what}: srun returned {elapsed:.1} s after the start, status {code}");
        assert!(
            release.printed(&stderr, &line),
            "{what}: {line:?} in\n{stderr}"
        );
        assert!(
            release.failed_step_statuses(3).contains(&code),
            "{what}: srun exited {code}\n{stderr}"
        );
        assert!(records(&stdout, "RESULT").is_empty(), "{what}: {stdout}");
        assert!(elapsed < 90.0, "{what}: the step ran {elapsed:.0} s");
        let left = cluster_pgrep(&format!("[{}]{}", &program[..1], &program[1..]));
        assert!(left.is_empty(), "{what}: tasks left behind: {left}");
    }
}

/// The step the tests of a lost server train in: a chief and a ps on n011, one worker on each
/// other node (spec, nodes, tasks per node), so that a worker's node holds that worker alone.
const PS_TRAINING: (&str, &str, &str) = ("chief:1,ps:1,worker:*", "n011,n012,n9,n10", "2,1(x3)");

/// One server of [`MID_TRAINING`], which fails (exits 3) once the chief has trained half of its
/// steps (ps_join.py's `TFC_FAIL`), in a step of a chief, a ps and three workers.
struct MidTraining {
    what: &'static str,
    /// The failing server, as ps_join.py's `TFC_FAIL` names it, and its global rank.
    fails: &'static str,
    rank: u32,
    /// The chief finishes training: the step survives the failure (`fail_fast=auto`).
    completes: bool,
}

/// ParameterServerStrategy's tolerance of a worker's failure, as TensorFlow designed it: its
/// `ClusterCoordinator` gives the lost worker's functions to the others, so the node, which saw
/// the chief's connection to the worker, leaves the step running; a parameter server's failure
/// still ends it.
#[rustfmt::skip]
const MID_TRAINING: &[MidTraining] = &[
    MidTraining { what: "a worker fails mid-training: training goes on", fails: "worker:1", rank: 3, completes: true },
    MidTraining { what: "a parameter server fails mid-training: the step ends", fails: "ps:0", rank: 1, completes: false },
];

#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn parameter_server_training_survives_a_workers_failure_and_not_a_ps() {
    let release = common::release::current();
    let _defaults = PlugStack::defaults();
    let (spec, nodes, tasks_per_node) = PS_TRAINING;
    let plan = common::plan(spec, &[], &common::step(nodes, tasks_per_node, None));
    let program = format!("{} {}", python(), tool("ps_join.py"));
    for MidTraining {
        what,
        fails,
        rank,
        completes,
    } in MID_TRAINING
    {
        let dir = dir().join(format!("mid-training-{}", fails.replace(':', "-")));
        let d = dir.display();
        let run = || {
            sh(&format!(
                "rm -rf {d}; mkdir -m 1777 {d}
srun -t 5 -w {nodes} -N4 -n5 --export=ALL,TFC_FAIL={fails},TFC_FAIL_DIR={d} --tf-cluster={spec} {program}
echo \"SRUN|$?|$(date +%s.%N)\""
            ))
        };
        let mut out = run();
        // The failure is the server's only once the chief has trained half of its steps (ps_join.py
        // writes `half`). Without `half`, TensorFlow ended the step by itself before that: once
        // (2026-11-28, 26.05) a worker answered the chief's first function "Unable to parse
        // request" and the chief exited 1 within a second of the servers' start. That says
        // nothing of the failure this row is about, so the row runs once more, saying why.
        if !dir.join("half").exists() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last: Vec<&str> = stderr.lines().rev().take(5).collect();
            eprintln!(
                "{what}: the chief did not reach half of its steps (TensorFlow ended the step by itself first), run again; its last lines: {last:?}"
            );
            out = run();
        }
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let statuses = release.failed_step_statuses(3);
        if *completes {
            let seen = WorkerSeen {
                reached: true,
                lost_before: 0,
            };
            let line = end_line(&plan, *rank, 3 << 8, false, seen).expect("a line");
            assert!(
                release.printed(&stderr, &line),
                "{what}: {line:?} in\n{stderr}"
            );
            let result = chief_result(what, &stdout, &stderr);
            // srun's status is Slurm's: the highest of its tasks', the failed worker's 3 here.
            ended_with_the_chief(what, &stdout, &stderr, &statuses, result[2], "ps_join.py");
        } else {
            let line = stop_line(&plan, *rank, 3 << 8, false).expect("the step is stopped");
            assert!(
                release.printed(&stderr, &line),
                "{what}: {line:?} in\n{stderr}"
            );
            assert!(records(&stdout, "RESULT").is_empty(), "{what}: {stdout}");
            let status: i32 = records(&stdout, "SRUN")[0][0].parse().unwrap();
            assert!(
                statuses.contains(&status),
                "{what}: srun exited {status}\n{stderr}"
            );
            let left = cluster_pgrep("[p]s_join.py");
            assert!(left.is_empty(), "{what}: tasks left behind: {left}");
        }
    }
}

/// With `srun --no-kill` (`-k`), ParameterServerStrategy's training outlives a worker's node.
/// Halfway through training, worker 1's node is lost: its slurmd, slurmstepd, tasks and munged
/// killed (the node's kernel, still up, resets the chief's connections to the worker), and
/// slurmctld told the node is down, as slurmctld finds by itself once `SlurmdTimeout` passes
/// (300 s by default). srun says "Node failure" and goes on; the chief finishes on the other two
/// workers, and the step ends with the chief (`end_with_chief`). The node is brought back after.
/// A node that goes silent instead (its link cut first, as when it loses power) left TensorFlow
/// 2.21's chief waiting on the lost worker past the 5-minute limit (tried once, 2026-11-27, 22.05).
///
/// Over a minute in full runs (83 and 90 s on 22.05, 27 s alone, 2026-11-27): one training,
/// then the node brought back, its slurmd and slurmctld restarted and every node idle again.
/// Within the line's 5 minutes, training has 180 s to reach its half and the step 90 s to end
/// after the node is lost; past either, the test prints the queue and the nodes, and cancels
/// the job (a CI run on 26.05 once ran into the limit with srun's lines unread, 2026-11-30).
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn parameter_server_training_survives_a_lost_worker_node_with_no_kill() {
    let release = common::release::current();
    let _defaults = PlugStack::defaults();
    let (spec, nodes, tasks_per_node) = PS_TRAINING;
    let plan = common::plan(spec, &[], &common::step(nodes, tasks_per_node, None));
    // Worker 1: rank 3.
    let node = plan.hosts[common::where_is(&plan, 3).0].clone();
    let program = format!("{} {}", python(), tool("ps_join.py"));
    let d = dir().join("lost-node");
    let d = d.display();
    let _back = NodeBack(node.clone());
    // The nodes free first: a job kept pending past the wait for training's half would have the
    // node it needs taken away.
    epilogs_done();
    let out = sh(&format!(
        "rm -rf {d}; mkdir -m 1777 {d}
srun -k -t 5 -J tfc-lost-node -w {nodes} -N4 -n5 --export=ALL,TFC_FAIL=lost,TFC_FAIL_DIR={d} --tf-cluster={spec} {program} >{d}/out 2>{d}/err &
step=$!
for i in $(seq 1800); do [ -e {d}/half ] && break; kill -0 $step 2>/dev/null || break; sleep 0.1; done
if [ -e {d}/half ]; then
    ip netns pids tfc-{node} | xargs -r kill -9
    scontrol update nodename={node} state=down reason=lost
    touch {d}/failed
    for i in $(seq 900); do kill -0 $step 2>/dev/null || break; sleep 0.1; done
fi
if kill -0 $step 2>/dev/null; then
    echo \"tests: srun still runs, $([ -e {d}/half ] && echo 90 s after the node was lost || echo and training never reached its half in 180 s); then:\" >&2
    squeue -o '%i %j %T %r %M %N' >&2; sinfo -N -o '%N %T %E' >&2; pgrep -af ps_join.py >&2
    scancel -n tfc-lost-node; sleep 5; kill -9 $step 2>/dev/null
fi
wait $step; echo \"SRUN|$?|$(date +%s.%N)\"
cat {d}/out; cat {d}/err >&2"
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let what = "a worker's node lost mid-training";
    assert!(
        stderr.contains(&format!("Node failure on {node}")),
        "{what}: srun says so\n{stderr}"
    );
    let result = chief_result(what, &stdout, &stderr);
    ended_with_the_chief(
        what,
        &stdout,
        &stderr,
        &release.lost_node_statuses(),
        result[2],
        "ps_join.py",
    );
}

/// Brings a node that a test took away back: slurmctld told it may run jobs, its slurmd (and
/// munged) started again, and slurmctld restarted. Without that restart, after a node was taken
/// out of a running job, 22.05's scheduler kept the next job that asked for those nodes pending
/// (`Resources`, every node idle) for minutes: seen twice in full runs, 3 minutes and over
/// 90 s, and ended at once by a restart of slurmctld (2026-11-27).
struct NodeBack(String);

impl Drop for NodeBack {
    fn drop(&mut self) {
        let node = &self.0;
        let cluster = cluster_sh();
        sh(&format!(
            "scontrol update nodename={node} state=resume; {cluster} restart-slurmd {node} >&2; {cluster} restart-slurmctld >&2"
        ));
    }
}

/// How the job is interrupted, how the batch script gets it requeued, and how each task may end:
/// (what, the command that interrupts job {job}, what the batch script does after srun, the
/// endings srun may report for a task).
#[rustfmt::skip]
const PREEMPTIONS: &[(&str, &str, &str, &[&str])] = &[
    // Preemption with PreemptMode=REQUEUE, and an admin's requeue: Slurm sends SIGTERM to the
    // whole job, SIGKILL after KillWait, and requeues it. A task that has saved but is still
    // shutting TensorFlow down when KillWait (5 s here) passes is killed: seen once on 22.05
    // with two lanes on 2 cores (CI, 2026-11-30); its checkpoint is what the resume reads.
    ("scontrol requeue", "scontrol requeue {job}", "exit $rc",
     &["Exited with exit code 42", "Killed"]),
    // --signal=TERM@T before the time limit, or a site's send_user_signal: the steps get
    // SIGTERM, the tasks save and exit 42, and the script requeues the job itself (or the
    // admin's RequeueExit=42 does). Nothing sends SIGKILL.
    ("SIGTERM to the steps, the script requeues", "scancel --signal=TERM {job}",
     "[ $rc -eq 42 ] && scontrol requeue $SLURM_JOB_ID; exit $rc",
     &["Exited with exit code 42"]),
];

/// The preemption recipe: a `--requeue` batch job training with MultiWorkerMirroredStrategy and
/// PreemptionCheckpointHandler is interrupted mid-training, every task checkpoints and exits 42
/// (fail_fast ignores TensorFlow's preemption exit, so no task is cut short mid-checkpoint; only
/// Slurm's own SIGKILL after KillWait may end one that is still exiting), the
/// job is requeued, resumes from the checkpoint, and ends with exactly the weights of a run that
/// was never interrupted.
///
/// Over a minute (65 s on 22.05, 60 s on 26.05, 2026-11-27): per way of interrupting, a job
/// that starts, checkpoints, is requeued and starts again, each start importing TensorFlow on
/// every task.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn preempted_training_resumes_after_requeue_with_the_same_weights() {
    let _defaults = PlugStack::defaults();
    // Slurm's SIGKILL after KillWait is no failure: the machine's OOM-kill count, held shared,
    // keeps another cluster's OOM row from making tfcluster blame the OOM killer for it (a CI
    // run on 22.05, 2026-11-30, printed "was killed by the OOM killer" here).
    let _count = hold_oom_count(false);
    let dir = common::cluster::dir();
    let steps = 40;
    let nodes = "-w n011,n012 -N2 -n2";
    let _ = std::fs::remove_dir_all(dir.join("ckpt-whole"));
    let whole = sh(&format!(
        "srun -t 5 {nodes} --tf-cluster {} {} {} {steps}",
        python(),
        tool("preempt_train.py"),
        dir.join("ckpt-whole").display()
    ));
    let whole_out = String::from_utf8_lossy(&whole.stdout);
    let reference: HashSet<String> = records(&whole_out, "RESULT")
        .iter()
        .map(|r| r[2].to_string())
        .collect();
    assert_eq!(reference.len(), 1, "one set of weights\n{whole_out}");
    for (n, (what, interrupt, after, endings)) in PREEMPTIONS.iter().enumerate() {
        let (ckpt, out, script) = (
            dir.join(format!("ckpt-{n}")),
            dir.join(format!("requeue-{n}.out")),
            dir.join(format!("requeue-{n}.sh")),
        );
        let _ = std::fs::remove_dir_all(&ckpt);
        let _ = std::fs::remove_file(&out);
        std::fs::write(
            &script,
            format!(
                "#!/bin/bash\nsrun --tf-cluster {} {} {} {}\nrc=$?\necho \"SRUN|${{SLURM_RESTART_COUNT:-0}}|$rc\"\n{after}\n",
                python(),
                tool("preempt_train.py"),
                ckpt.display(),
                requeued_training_args(steps)
            ),
        )
        .unwrap();
        let job = requeued_job(what, &script, nodes, &out, interrupt);
        let (text, daemons) = (&job.output, &job.daemons);
        let resumed = resumed_at(text);
        assert!(
            resumed.len() == 4
                && resumed[..2] == [0, 0]
                && resumed[2] > INTERRUPTED_AT
                && resumed[2] < steps
                && resumed[2] == resumed[3],
            "{what}: both tasks start at 0, then both resume past step {INTERRUPTED_AT}, before {steps}: {resumed:?}\n{text}\n{daemons}"
        );
        let weights: HashSet<String> = records(text, "RESULT")
            .iter()
            .map(|r| r[2].to_string())
            .collect();
        assert_eq!(
            weights, reference,
            "{what}: the weights of the uninterrupted run\n{text}\n{daemons}"
        );
        for task in ["task 0", "task 1"] {
            assert!(
                endings
                    .iter()
                    .any(|end| text.contains(&format!("{task}: {end}"))),
                "{what}: {task} saved and ended with one of {endings:?}\n{text}\n{daemons}"
            );
        }
        assert!(
            !text.contains("tfcluster: rank"),
            "{what}: nothing is a failure\n{text}\n{daemons}"
        );
        eprintln!(
            "{what}: resumed at step {} of {steps}; SRUN lines {:?}",
            resumed[2],
            records(text, "SRUN")
        );
    }
}
