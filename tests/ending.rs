//! End to end on a real Slurm cluster: when training ends, the step ends, and when a task fails,
//! the step ends at once (docs/user-guide.md, how a step ends). Which end stops the step, and the
//! line that says so, is the core's decision (tests/settings.rs tables it); here each expected
//! line is the core's for the same step, so what these tests check is what the shell and Slurm
//! make of it: srun's status, the line on srun's stderr, how soon srun returns, no task left.

mod common;
use common::cluster::{
    cluster_pgrep, dir, end_line, hold_oom_count, sh, stop_line, tool, PlugStack, CLUSTER_SETTINGS,
};
use common::release;
use common::{plan, step, tf_config};
use tfcluster::core::ending::WorkerSeen;
use tfcluster::core::error::OnError;
use tfcluster::core::{Error, StepPlan};
use tfcluster::spank::error::ShellError;

/// A block step of `per_node` tasks on each of the first `nodes` of the test cluster's nodes,
/// in Slurm's order.
struct Block {
    nodes: usize,
    per_node: u32,
}

impl Block {
    fn list(&self) -> String {
        ["n011", "n012", "n9", "n10"][..self.nodes].join(",")
    }

    /// srun's arguments for it.
    fn srun_args(&self) -> String {
        let tasks = self.nodes as u32 * self.per_node;
        format!("-w {} -N{} -n{tasks}", self.list(), self.nodes)
    }

    /// The plan every node makes for `--tf-cluster={spec}` on it, with the site's settings.
    fn plan(&self, spec: &str, site: &[&str]) -> StepPlan {
        let counts = format!("{}(x{})", self.per_node, self.nodes);
        plan(spec, site, &step(&self.list(), &counts, None))
    }
}

/// The global rank of `role:0` in the plan.
fn rank_of(plan: &StepPlan, role: &str) -> u32 {
    (0..plan.layout.ranks.len() as u32)
        .find(|&r| {
            let tf = tf_config(plan, r);
            tf["task"]["type"] == role && tf["task"]["index"] == 0
        })
        .unwrap_or_else(|| panic!("no {role}:0"))
}

/// A step on 2 nodes x 2 tasks whose `role`:0 exits first with `code`, with the plugin's
/// default settings: whether tfcluster stops the others.
struct EndOfTraining {
    what: &'static str,
    spec: &'static str,
    role: &'static str,
    code: i32,
    stops: bool,
}

#[rustfmt::skip]
const END_OF_TRAINING: &[EndOfTraining] = &[
    EndOfTraining { what: "ps: the chief's exit ends the step",      spec: "chief:1,ps:1,worker:*",                   role: "chief",  code: 0, stops: true },
    EndOfTraining { what: "a failing chief",                         spec: "chief:1,ps:1,worker:*",                   role: "chief",  code: 3, stops: true },
    EndOfTraining { what: "Estimator's master",                      spec: "master:1,ps:1,worker:*",                  role: "master", code: 0, stops: true },
    EndOfTraining { what: "no chief: worker 0 decides",              spec: "ps:1,worker:*",                           role: "worker", code: 0, stops: true },
    EndOfTraining { what: "the evaluator is stopped with the rest",  spec: "chief:1,evaluator:1,ps:1,worker:*",       role: "chief",  code: 0, stops: true },
    EndOfTraining { what: "end_with_chief=yes without ps",           spec: "chief:1,worker:*,end_with_chief=yes",     role: "chief",  code: 0, stops: true },
    EndOfTraining { what: "tuner=yes: the oracle's exit ends it",    spec: "chief:1,worker:*,tuner=yes",              role: "chief",  code: 0, stops: true },
    EndOfTraining { what: "end_with_chief=no: the step runs on",     spec: "chief:1,ps:1,worker:*,end_with_chief=no", role: "chief",  code: 0, stops: false },
    EndOfTraining { what: "MultiWorkerMirroredStrategy: unaffected", spec: "chief:1,worker:*",                        role: "chief",  code: 0, stops: false },
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn the_step_ends_when_the_chief_exits() {
    let release = release::current();
    let _defaults = PlugStack::defaults();
    let block = Block {
        nodes: 2,
        per_node: 2,
    };
    let args = block.srun_args();
    for EndOfTraining {
        what,
        spec,
        role,
        code,
        stops,
    } in END_OF_TRAINING
    {
        // The others would sleep 299 s when stopped, 3 s when left to end by themselves.
        let others = if *stops { 299 } else { 3 };
        let started = std::time::Instant::now();
        let out = sh(&format!(
            "srun {args} --tf-cluster={spec} {} {role} {code} {others}",
            tool("decider.sh")
        ));
        let elapsed = started.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let plan = block.plan(spec, &[]);
        let ending = stop_line(&plan, rank_of(&plan, role), code << 8, false);
        assert_eq!(ending.is_some(), *stops, "{what}: the core's decision");
        let want = if *stops {
            release.stopped_step_status(*code)
        } else {
            *code
        };
        assert_eq!(
            out.status.code(),
            Some(want),
            "{what}: srun {args}\n{stderr}"
        );
        if let Some(line) = ending {
            assert!(
                release.printed(&stderr, &line),
                "{what}: {line:?} in\n{stderr}"
            );
            eprintln!(
                "{what}: the step ended {:.2} s after the chief's exit",
                elapsed - 1.0
            );
            assert!(elapsed < 30.0, "{what}: the step ran {elapsed:.1} s");
            no_task_left(what);
        } else {
            assert!(
                !stderr.contains("stopping the step"),
                "{what}: nothing is stopped\n{stderr}"
            );
            assert!(
                elapsed >= 3.0,
                "{what}: the others were stopped ({elapsed:.1} s)"
            );
        }
    }
}

fn no_task_left(what: &str) {
    let left = cluster_pgrep("^sleep 299$");
    assert!(left.is_empty(), "{what}: tasks left behind: {left}");
}

/// srun's exit status in [`task_ends`].
#[derive(Debug, Clone, Copy)]
enum Srun {
    /// The step was stopped after a task failed this way (exit code, or 128+signal): that
    /// status from 23.11, that or 137 before ([`release::Release::failed_step_statuses`]).
    Failed(i32),
    /// Nothing was stopped: srun's own rule (the highest exit code, or 128+signal).
    Exactly(i32),
}

/// A step whose tasks end as tests/cluster/ending.sh makes them, on the test cluster's site
/// settings.
struct TaskEnd {
    what: &'static str,
    spec: &'static str,
    /// Nodes (in Slurm's order) and tasks on each.
    nodes: usize,
    tasks_per_node: u32,
    /// Each task's action (ending.sh's `role:index=ACTION`, `default=ACTION`).
    actions: &'static [&'static str],
    status: Srun,
    /// The task whose end stops the step: its global rank, its wait status, whether the OOM
    /// killer took it. The line srun shows is the core's for it, on that rank's node.
    stopped_by: Option<(u32, i32, bool)>,
    /// A failure the step survives (`fail_fast=auto` with ps: a worker the chief had connected
    /// to): its global rank and wait status. The line srun shows is the core's for it.
    survived: Option<(u32, i32)>,
    /// When nothing is stopped: the seconds srun waits for the slowest task.
    lasts: f64,
    /// The chief writes a file before it exits (what preemption must let it finish).
    saves: bool,
}

/// Which task's end ends the step (docs/user-guide.md's table, row by row). Tasks that are not
/// stopped end after 3 s; stopped ones would sleep 299 s.
fn task_ends() -> Vec<TaskEnd> {
    use Srun::*;
    #[rustfmt::skip]
    let rows = vec![
        TaskEnd { what: "every task succeeds", spec: "worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["default=exit 0"], status: Exactly(0), stopped_by: None, survived: None, lasts: 0.0, saves: false },
        TaskEnd { what: "a worker fails at start (MultiWorkerMirroredStrategy would wait an hour)", spec: "worker:*",
                  nodes: 4, tasks_per_node: 1, actions: &["worker:2=exit 3", "default=sleep 299"], status: Failed(3),
                  stopped_by: Some((2, 3 << 8, false)), survived: None, lasts: 0.0, saves: false },
        TaskEnd { what: "the chief fails (MultiWorkerMirroredStrategy)", spec: "chief:1,worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["chief:0=exit 1", "default=sleep 299"], status: Failed(1),
                  stopped_by: Some((0, 1 << 8, false)), survived: None, lasts: 0.0, saves: false },
        TaskEnd { what: "a ParameterServerStrategy worker fails before the chief has connected to it (the chief would never start)", spec: "chief:1,ps:1,worker:*",
                  nodes: 2, tasks_per_node: 2, actions: &["worker:1=exit 3", "default=sleep 299"], status: Failed(3),
                  stopped_by: Some((3, 3 << 8, false)), survived: None, lasts: 0.0, saves: false },
        TaskEnd { what: "a parameter server fails", spec: "chief:1,ps:1,worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["ps:0=exit 1", "default=sleep 299"], status: Failed(1),
                  stopped_by: Some((1, 1 << 8, false)), survived: None, lasts: 0.0, saves: false },
        TaskEnd { what: "a crash", spec: "worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["worker:3=signal SEGV", "default=sleep 299"], status: Failed(128 + 11),
                  stopped_by: Some((3, 11, false)), survived: None, lasts: 0.0, saves: false },
        TaskEnd { what: "an abort (a failed CHECK in TensorFlow's C++ code)", spec: "worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["worker:2=signal ABRT", "default=sleep 299"], status: Failed(128 + 6),
                  stopped_by: Some((2, 6, false)), survived: None, lasts: 0.0, saves: false },
        // One node: the test nodes share one kernel, whose OOM count every node would read (on
        // a real cluster each node counts its own).
        TaskEnd { what: "the OOM killer", spec: "worker:*", nodes: 1, tasks_per_node: 2,
                  actions: &["worker:1=oom {dir}", "default=sleep 299"], status: Failed(128 + 9),
                  stopped_by: Some((1, 9, true)), survived: None, lasts: 0.0, saves: false },
        TaskEnd { what: "a signal someone sent is not a failure", spec: "worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["worker:1=signal TERM", "default=sleep 3"], status: Exactly(128 + 15),
                  stopped_by: None, survived: None, lasts: 3.0, saves: false },
        TaskEnd { what: "preemption: every task exits 42 while the chief still saves", spec: "chief:1,worker:*",
                  nodes: 2, tasks_per_node: 2, actions: &["chief:0=save 4 {dir}/saved", "default=exit 42"],
                  status: Exactly(42), stopped_by: None, survived: None, lasts: 4.0, saves: true },
        TaskEnd { what: "the evaluator fails: training goes on", spec: "chief:1,evaluator:1,worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["evaluator:0=exit 1", "default=sleep 3"], status: Exactly(1), stopped_by: None, survived: None, lasts: 3.0, saves: false },
        TaskEnd { what: "fail_fast=no: Slurm's own behaviour", spec: "worker:*,fail_fast=no", nodes: 4, tasks_per_node: 1,
                  actions: &["worker:2=exit 3", "default=sleep 3"], status: Exactly(3), stopped_by: None, survived: None, lasts: 3.0, saves: false },
        TaskEnd { what: "a ParameterServerStrategy worker fails once the chief has connected to it: the step goes on",
                  spec: "chief:1,ps:1,worker:*", nodes: 2, tasks_per_node: 2,
                  actions: &["chief:0=connect worker:1 8", "worker:1=serve 3", "default=sleep 8"], status: Exactly(3),
                  stopped_by: None, survived: Some((3, 3 << 8)), lasts: 8.0, saves: false },
    ];
    rows
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn which_task_end_ends_the_step() {
    let release = release::current();
    let saved = dir().join("saved");
    for row in task_ends() {
        let what = row.what;
        let _ = std::fs::remove_file(&saved);
        let block = Block {
            nodes: row.nodes,
            per_node: row.tasks_per_node,
        };
        let args = block.srun_args();
        let actions: Vec<String> = row
            .actions
            .iter()
            .map(|a| format!("'{}'", a.replace("{dir}", &dir().display().to_string())))
            .collect();
        let oom_row = row.stopped_by.is_some_and(|(_, _, oom)| oom);
        let _count = hold_oom_count(oom_row);
        let started = std::time::Instant::now();
        let out = sh(&format!(
            "srun {args} --tf-cluster={} {} {}",
            row.spec,
            tool("ending.sh"),
            actions.join(" ")
        ));
        let elapsed = started.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code().unwrap_or(-1);
        match row.status {
            Srun::Failed(c) => assert!(
                release.failed_step_statuses(c).contains(&code),
                "{what}: srun {args} exited {code}\n{stderr}"
            ),
            Srun::Exactly(c) => assert_eq!(code, c, "{what}: srun {args}\n{stderr}"),
        }
        let reports = stderr.matches("tfcluster: rank ").count();
        assert_eq!(
            reports,
            usize::from(row.stopped_by.is_some()) + usize::from(row.survived.is_some()),
            "{what}: one line per stopped step and per survived failure\n{stderr}"
        );
        if let Some((rank, status)) = row.survived {
            let plan = block.plan(row.spec, CLUSTER_SETTINGS);
            let seen = WorkerSeen {
                reached: true,
                lost_before: 0,
            };
            let line = end_line(&plan, rank, status, false, seen)
                .unwrap_or_else(|| panic!("{what}: the core has a line for it"));
            assert!(
                release.printed(&stderr, &line),
                "{what}: {line:?} in\n{stderr}"
            );
        }
        if let Some((rank, status, oom)) = row.stopped_by {
            let plan = block.plan(row.spec, CLUSTER_SETTINGS);
            let line = stop_line(&plan, rank, status, oom)
                .unwrap_or_else(|| panic!("{what}: the core stops the step"));
            assert!(line.starts_with("slurmstepd-"), "{what}: a failure: {line}");
            assert!(
                release.printed(&stderr, &line),
                "{what}: {line:?} in\n{stderr}"
            );
            eprintln!(
                "{what}: srun returned {elapsed:.2} s after the start (the failure at 1 s), status {code}"
            );
            assert!(elapsed < 30.0, "{what}: the step ran {elapsed:.1} s");
            no_task_left(what);
        } else {
            // Nobody stopped: srun waited for the slowest task.
            assert!(
                elapsed >= row.lasts,
                "{what}: the others were stopped ({elapsed:.1} s)"
            );
        }
        assert_eq!(
            saved.exists(),
            row.saves,
            "{what}: whether the chief saved\n{stderr}"
        );
    }
    // This cluster's OOM cgroups (tests/cluster/ending.sh names them), once the killed task has
    // left them (an rmdir while it is still exiting fails, and the cgroup stays: the next run's
    // task of the same job ID was refused one, 2026-11-28).
    let _ = sh(&format!(
        "for cg in /sys/fs/cgroup/memory/tfc-oom-{lane}-* /sys/fs/cgroup/tfc-oom-{lane}-*; do
             [ -d \"$cg\" ] || continue
             for i in $(seq 50); do [ -n \"$(cat \"$cg/cgroup.procs\")\" ] || break; sleep 0.1; done
             rmdir \"$cg\"
         done 2>/dev/null",
        lane = common::cluster::dir()
            .file_name()
            .unwrap()
            .to_string_lossy()
    ));
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_batch_job_ends_with_the_chiefs_result() {
    let release = release::current();
    let _defaults = PlugStack::defaults();
    // Both jobs at once (sbatch --wait polls slurmctld every few seconds).
    let runs = std::thread::scope(|s| {
        [0, 3]
            .map(|code| {
                s.spawn(move || {
                    let out = dir().join(format!("chief-{code}.out"));
                    let run = sh(&format!(
                        "sbatch --wait --parsable -N2 -n4 -o {} --wrap 'srun --tf-cluster=chief:1,ps:1,worker:* {} chief {code} 299'",
                        out.display(),
                        tool("decider.sh")
                    ));
                    (code, run)
                })
            })
            .map(|h| h.join().unwrap())
    });
    for (code, run) in runs {
        let job = String::from_utf8_lossy(&run.stdout).trim().to_string();
        let want = release.stopped_step_status(code);
        assert_eq!(run.status.code(), Some(want), "sbatch --wait: job {job}");
        let info =
            String::from_utf8_lossy(&sh(&format!("scontrol show job {job}")).stdout).into_owned();
        let state = if want == 0 {
            "JobState=COMPLETED"
        } else {
            "JobState=FAILED"
        };
        assert!(info.contains(state), "job {job}: {state} in\n{info}");
        assert!(
            info.contains(&format!("ExitCode={want}:0")),
            "job {job}: ExitCode={want}:0 in\n{info}"
        );
    }
}

/// What an error does to the step beyond the task that meets it: one error of each kind.
struct Effect {
    error: ShellError,
    on_error: OnError,
}

fn effects() -> Vec<Effect> {
    let core = |e: Error| ShellError::Core(e);
    let host = || "n9".to_string();
    #[rustfmt::skip]
    let effects = vec![
        Effect { error: core(Error::LayoutMismatch { node: 0, host: host(), expected: "0,1".into(), actual: "0,2".into() }), on_error: OnError::StopNow },
        Effect { error: core(Error::TaskHostCount { host: host(), listed: 2, started: 1 }), on_error: OnError::StopNow },
        Effect { error: core(Error::HetSize { value: "0".into() }), on_error: OnError::StopNow },
        Effect { error: core(Error::HetStepTasks), on_error: OnError::StopNow },
        Effect { error: core(Error::HetJobId { component: 1 }), on_error: OnError::StopNow },
        Effect { error: core(Error::HetJobNotVouched { job_id: 17, named: "SLURM_JOB_ID_HET_GROUP_1".into(), leader: 16, reason: String::new() }), on_error: OnError::StopNow },
        Effect { error: core(Error::HetLayoutsShort { found: 2, step_tasks: 4, refused: "1: gone".into() }), on_error: OnError::StopNow },
        Effect { error: core(Error::HetLayout { component: 1, reason: "short".into() }), on_error: OnError::StopNow },
        Effect { error: core(Error::HetOwnComponent { host: host(), fitting: 2 }), on_error: OnError::StopNow },
        Effect { error: core(Error::NotEnoughGpus { host: host(), gpus: 1, tokens: "0".into(), tasks: 2 }), on_error: OnError::StopFromEachTask },
        Effect { error: core(Error::UnevenGpus { host: host(), gpus: 1, busiest: "n10".into(), tasks: 2 }), on_error: OnError::StopFromEachTask },
        Effect { error: ShellError::Isolation { node: host(), reason: "cannot load libnftables.so.1".into() }, on_error: OnError::StopFromFirstTask },
        Effect { error: ShellError::FromEnvironment { error: Box::new(ShellError::Isolation { node: host(), reason: "x".into() }) },
                 on_error: OnError::StopFromFirstTask },
        Effect { error: ShellError::Ports { node: host(), reason: "port 20000 is held".into() }, on_error: OnError::StopFromFirstTask },
        Effect { error: core(Error::CountMismatch { spec: "ps:1,worker:3".into(), requested: 4, tasks: 3 }), on_error: OnError::TaskOnly },
        Effect { error: core(Error::BadGpuList { value: "0,,1".into() }), on_error: OnError::TaskOnly },
        Effect { error: ShellError::Missing { name: "SLURM_STEP_NODELIST" }, on_error: OnError::TaskOnly },
    ];
    effects
}

#[test]
fn what_each_error_does_to_the_step() {
    for Effect { error, on_error } in effects() {
        assert_eq!(error.on_error(), on_error, "{error}");
    }
}
