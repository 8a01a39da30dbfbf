//! Helpers for the tests that run on the real test cluster (tests/cluster/cluster.sh).
#![allow(dead_code)]

use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;
use std::time::{Duration, Instant};
use tfcluster::core::ending::WorkerSeen;

/// The cluster's state directory (TFC_DIR, as for cluster.sh).
pub fn dir() -> PathBuf {
    PathBuf::from(std::env::var("TFC_DIR").unwrap_or_else(|_| "/tmp/tfcluster-cluster".into()))
}

/// The cluster runs with `SlurmdParameters=contain_spank` (TFC_SLURMD_PARAMETERS, as for
/// cluster.sh): slurmstepd runs `task_exit` in a child process of its own.
pub fn contain_spank() -> bool {
    std::env::var("TFC_SLURMD_PARAMETERS")
        .is_ok_and(|p| p.split(',').any(|word| word == "contain_spank"))
}

/// The command that runs tests/cluster/cluster.sh (`restart-slurmd`, `prolog-flags`, ...) on the
/// test's cluster.
pub fn cluster_sh() -> String {
    format!(
        "bash {}/tests/cluster/cluster.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The plugin the cluster loads (set by tests/run.sh).
pub fn plugin() -> String {
    std::env::var("TFC_PLUGIN")
        .expect("TFC_PLUGIN: the plugin the cluster loads (tests/run.sh sets it)")
}

/// A task program from tests/cluster or tests/tensorflow, copied where every user and every
/// node can read it (the checkout may be under a private home directory).
pub fn tool(name: &str) -> String {
    static COPY: Once = Once::new();
    let tools = dir().join("tools");
    COPY.call_once(|| {
        std::fs::create_dir_all(&tools).unwrap();
        for sub in [
            "tests/cluster",
            "tests/tensorflow",
            "tests/jax",
            "tests/torch",
        ] {
            let from = Path::new(env!("CARGO_MANIFEST_DIR")).join(sub);
            for entry in std::fs::read_dir(from).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "py" || e == "sh") {
                    std::fs::copy(&path, tools.join(path.file_name().unwrap())).unwrap();
                }
            }
        }
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&tools)
            .status()
            .unwrap();
        for script in ["report.sh", "decider.sh", "in_apptainer.sh"] {
            Command::new("chmod")
                .arg("a+x")
                .arg(tools.join(script))
                .status()
                .unwrap();
        }
    });
    tools.join(name).display().to_string()
}

/// The kernel's OOM-kill count (/proc/vmstat), which tfcluster reads to tell the OOM killer's
/// SIGKILL from Slurm's (src/spank/oom.rs), is one for the whole machine: every node of both of
/// the test command's clusters reads it. A step that makes the OOM killer act while the other
/// cluster's plugin judges a task Slurm killed makes that one blame the OOM killer too (seen in
/// CI, 2026-11-28: an abort's step on 23.02 printed a second stop line, for a task Slurm had
/// stopped, while 24.11 ran its OOM row). A test whose lines depend on the count holds this:
/// `exclusive` while its step makes the OOM killer act, shared while the plugin judges; the
/// lock is released when the value is dropped.
pub struct OomCount(std::fs::File);

/// Holds the machine's OOM-kill count ([`OomCount`]), waiting for the other cluster's hold.
pub fn hold_oom_count(exclusive: bool) -> OomCount {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/tfcluster-oom-count.lock")
        .unwrap();
    let how = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: flock on a descriptor this value owns; it is released when the file is closed.
    let held = unsafe { libc::flock(file.as_raw_fd(), how) };
    assert_eq!(held, 0, "flock /tmp/tfcluster-oom-count.lock");
    OomCount(file)
}

/// How long a line given to [`sh`] may run.
const SH_LIMIT: Duration = Duration::from_secs(300);

/// Runs a shell command line (bounded in time: [`SH_LIMIT`]) from a directory every user can
/// enter, inside the Debian root of the Slurm release under test when there is one (TFC_ROOT,
/// set by tests/release/run.sh): srun, sbatch, make and dpkg are that release's. A line that
/// runs into the limit gets, at the end of its stderr, the nodes that were out of service then
/// (`cluster.sh unwell`, which returns them to service): a job waiting for a drained node is
/// the usual reason, and the tests after it then find the node back.
pub fn sh(line: &str) -> Output {
    let started = Instant::now();
    let mut out = bounded(line);
    if started.elapsed() >= SH_LIMIT {
        // bounded, not sh: a cluster too slow to answer this within the limit ends here.
        let unwell = bounded(&format!("{} unwell", cluster_sh()));
        out.stderr.extend(
            format!(
                "\ntests: this line ran into its {} s limit; nodes out of service then (returned to it): {}\n",
                SH_LIMIT.as_secs(),
                String::from_utf8_lossy(&unwell.stdout).trim()
            )
            .bytes(),
        );
    }
    out
}

/// [`sh`] without the look at the nodes.
fn bounded(line: &str) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.arg(SH_LIMIT.as_secs().to_string());
    if let Ok(root) = std::env::var("TFC_ROOT") {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/release/root.sh");
        cmd.arg(script).args(["exec", &root]);
    }
    cmd.args(["bash", "-c", &format!("cd /tmp && {line}")])
        .current_dir("/tmp")
        .env_remove("TF_CONFIG")
        .output()
        .unwrap()
}

/// Runs `line` like [`sh`], which must succeed (its stderr is the failure message); its stdout.
pub fn sh_ok(line: &str) -> String {
    let out = sh(line);
    assert!(
        out.status.success(),
        "{line}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A shell function, `cluster_pgrep PATTERN`, for the lines given to [`sh`]: the PIDs of the
/// processes whose command line matches PATTERN (`pgrep -f`) in this cluster's nodes (the
/// network namespaces of the root's `ip netns list`) and beside the test (its own network
/// namespace), one per line. The machine's other processes are not this cluster's: the test
/// command runs two clusters at once (tests/release/lane.sh), whose job IDs and tasks are alike.
pub const CLUSTER_PGREP: &str = r#"cluster_pgrep() {
    { pgrep --ns $$ --nslist net -f "$1"
      for ns in $(ip netns list | cut -d' ' -f1); do
          p=$(ip netns pids "$ns" | head -n 1)
          [ -z "$p" ] || pgrep --ns "$p" --nslist net -f "$1"
      done; } | sort -un
}
"#;

/// The PIDs of this cluster's processes whose command line matches `pattern`
/// ([`CLUSTER_PGREP`]), one per line; empty when there is none.
pub fn cluster_pgrep(pattern: &str) -> String {
    sh_ok(&format!("{CLUSTER_PGREP}cluster_pgrep '{pattern}'"))
}

/// Whether srun stopped waiting for a step a node's refusal had cancelled (`stderr`: srun's):
/// after its abort limit (7 s) it prints this and Slurm's srun may exit 0 although no task ran
/// (26.05 with the machine busy, 2026-11-28, in each of the three tests of tests/ports.rs whose
/// step a node refuses). A refused step's status is checked only where srun waited (here,
/// [`Run::assert_refused`], and tests/ports.rs); docs/user-guide.md tells users the same.
pub fn srun_stopped_waiting(stderr: &str) -> bool {
    stderr.contains("srun: error: Timed out waiting for job step to complete")
}

/// Lines of `text` that start with `PREFIX|`, split on `|` (without the prefix).
pub fn records<'a>(text: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let prefix = format!("{prefix}|");
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|l| l.split('|').collect())
        .collect()
}

/// The plugstack.conf line the test cluster runs with: the plugin, with `end_with_chief=no`
/// (tasks that print what they got and exit would otherwise be cut short when the spec has
/// `ps`; `PlugStack::defaults()` is for the tests of that behaviour).
pub fn plugstack_line() -> String {
    format!("required {} {}", plugin(), CLUSTER_SETTINGS.join(" "))
}

/// The settings of the test cluster's plugstack.conf line ([`plugstack_line`]).
pub const CLUSTER_SETTINGS: &[&str] = &["end_with_chief=no"];

/// Replaces the cluster's plugstack.conf (srun and slurmstepd re-read it for every step) and
/// restores the test cluster's line when dropped.
pub struct PlugStack;

impl PlugStack {
    pub fn set(line: &str) -> PlugStack {
        std::fs::write(dir().join("etc/plugstack.conf"), format!("{line}\n")).unwrap();
        PlugStack
    }

    /// The plugin with `isolate=yes` (and the test cluster's other words). Its port_range
    /// covers the ports the test cluster's Slurm reserves for every step
    /// (MpiParams=ports=12000-12999, tests/cluster/cluster.sh), as a site's must.
    pub fn isolated(words: &str) -> PlugStack {
        PlugStack::isolated_as("required", words)
    }

    /// [`PlugStack::isolated`], with the plugin `required` or `optional`.
    pub fn isolated_as(kind: &str, words: &str) -> PlugStack {
        PlugStack::set(&format!(
            "{kind} {} end_with_chief=no isolate=yes port_range=12000-32767 {words}",
            plugin()
        ))
    }

    /// [`PlugStack::isolated`], after another plugin listed `required` (`so`).
    pub fn isolated_after(so: &str) -> PlugStack {
        PlugStack::set(&format!(
            "required {so}\nrequired {} end_with_chief=no isolate=yes port_range=12000-32767",
            plugin()
        ))
    }

    /// The plugin with every setting at the code's default (`required`; the packages add isolate=yes).
    pub fn defaults() -> PlugStack {
        PlugStack::set(&format!("required {}", plugin()))
    }
}

impl Drop for PlugStack {
    fn drop(&mut self) {
        std::fs::write(
            dir().join("etc/plugstack.conf"),
            format!("{}\n", plugstack_line()),
        )
        .unwrap();
    }
}

/// What one task reported (tests/cluster/report.sh): `TASK|rank|host|gpus|TF_CONFIG`.
#[derive(Debug)]
pub struct Task {
    pub rank: u32,
    pub host: String,
    /// `-` when CUDA_VISIBLE_DEVICES is unset, `none` when it is empty.
    pub gpus: String,
    pub tf: Option<Value>,
}

/// A finished srun or job: its exit status, stdout, stderr, and its tasks' reports by rank.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub tasks: Vec<Task>,
}

impl Run {
    /// The step was refused: srun failed (where it waited for the step: [`srun_stopped_waiting`]),
    /// printed `line` whole (as this release forwards a node's lines:
    /// [`super::release::Release::printed`]), and no task got a TF_CONFIG.
    pub fn assert_refused(&self, what: &str, line: &str) {
        let release = super::release::current();
        if !srun_stopped_waiting(&self.stderr) {
            assert_ne!(self.code, 0, "{what}: srun succeeded:\n{}", self.stderr);
        }
        assert!(
            release.printed(&self.stderr, line),
            "{what}: expected\n{}\ngot:\n{}",
            release.stepd(line),
            self.stderr
        );
        assert!(
            self.tasks.iter().all(|t| t.tf.is_none()),
            "{what}: a task got a TF_CONFIG"
        );
    }
}

/// The line srun prints when tfcluster refuses a step before launch: the core's message.
pub fn srun_error(message: impl std::fmt::Display) -> String {
    format!("srun: error: tfcluster: {message}")
}

/// The line a node prints when its local task 0 cannot start: the core's message, with the
/// node and task the shell adds ([`tfcluster::core::plan::task_error_line`]).
pub fn node_error(node: &str, message: impl std::fmt::Display) -> String {
    let line = tfcluster::core::plan::task_error_line(&message.to_string(), Some(node), Some(0));
    format!("slurmstepd-{node}: error: tfcluster: {line}")
}

/// The line srun shows when global rank `rank` of the step `plan` ends with wait status
/// `status` (`oom`: the node saw an OOM kill), or `None` when the step runs on: the core's
/// [`StepEnd`] for it, as the shell logs it (a failure as an error of the rank's node, the end of
/// training as a plain line).
///
/// [`StepEnd`]: tfcluster::core::ending::StepEnd
pub fn stop_line(
    plan: &tfcluster::core::StepPlan,
    rank: u32,
    status: i32,
    oom: bool,
) -> Option<String> {
    end_line(plan, rank, status, oom, WorkerSeen::default())
}

/// [`stop_line`] for a task of which the node saw `seen` (a worker the chief had reached: the
/// line of a failure the step survives, `fail_fast=auto` with ps).
pub fn end_line(
    plan: &tfcluster::core::StepPlan,
    rank: u32,
    status: i32,
    oom: bool,
    seen: WorkerSeen,
) -> Option<String> {
    let end = plan.ending(rank, Some(status), || oom, || seen)?;
    Some(if end.failure {
        let node = &plan.hosts[super::where_is(plan, rank).0];
        format!("slurmstepd-{node}: error: tfcluster: {}", end.message)
    } else {
        format!("tfcluster: {}", end.message)
    })
}

/// Runs `sbatch --wait -o FILE ARGS` and reads the tasks' lines from the job's output.
pub fn sbatch(name: &str, args: &str) -> Run {
    let out = dir().join(format!("{name}.out"));
    let run = sh(&format!("sbatch --wait -o {} {args}", out.display()));
    assert!(
        run.status.success(),
        "sbatch {args}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    parse(Output {
        stdout: std::fs::read(&out).unwrap(),
        ..run
    })
}

pub fn parse(out: Output) -> Run {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut tasks: Vec<Task> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("TASK|"))
        .map(|l| l.splitn(4, '|').collect::<Vec<_>>())
        .map(|f| Task {
            rank: f[0].parse().unwrap(),
            host: f[1].to_string(),
            gpus: match f[2] {
                "" => "none".into(),
                g => g.to_string(),
            },
            tf: (f[3] != "-").then(|| serde_json::from_str(f[3]).expect("TF_CONFIG is JSON")),
        })
        .collect();
    tasks.sort_by_key(|t| t.rank);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        tasks,
    }
}

/// One task as the invariant check sees it: where it ran and what its TF_CONFIG says.
pub struct Placed<'a> {
    pub rank: u32,
    pub host: &'a str,
    pub role: &'a str,
    pub index: u64,
    pub cluster: &'a Value,
}

/// What every step's TF_CONFIGs must meet, whatever the layout: the trainers share one cluster
/// (the evaluator has its own), every task finds itself in it at the host it runs on, and no
/// endpoint is used twice. Returns `role:index@host` per task, in the order given.
pub fn one_cluster<'a>(what: &str, tasks: impl IntoIterator<Item = Placed<'a>>) -> Vec<String> {
    let mut trainers: Option<&Value> = None;
    let mut endpoints = HashSet::new();
    let mut out = Vec::new();
    for t in tasks {
        if t.role != "evaluator" {
            match trainers {
                None => trainers = Some(t.cluster),
                Some(c) => assert!(
                    std::ptr::eq(c, t.cluster) || c == t.cluster,
                    "{what}: rank {} has another cluster: {} vs {}",
                    t.rank,
                    t.cluster,
                    c
                ),
            }
        }
        let own = t.cluster[t.role][t.index as usize]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: rank {} is not in its cluster", t.rank));
        let (host, _port) = own.rsplit_once(':').unwrap();
        assert_eq!(
            host, t.host,
            "{what}: rank {} finds itself at {own}",
            t.rank
        );
        assert!(
            endpoints.insert(own.to_string()),
            "{what}: {own} is used twice"
        );
        out.push(format!("{}:{}@{}", t.role, t.index, t.host));
    }
    out
}

/// `role:index@host gpus` per rank, after [`one_cluster`]'s checks; the step must have
/// succeeded and every task must have a TF_CONFIG.
pub fn summary(run: &Run, what: &str) -> Vec<String> {
    assert_eq!(run.code, 0, "{what}: srun failed:\n{}", run.stderr);
    assert!(
        !run.tasks.is_empty(),
        "{what}: no task reported:\n{}",
        run.stderr
    );
    let placed = run.tasks.iter().map(|t| {
        let tf =
            t.tf.as_ref()
                .unwrap_or_else(|| panic!("{what}: rank {} has no TF_CONFIG", t.rank));
        Placed {
            rank: t.rank,
            host: &t.host,
            role: tf["task"]["type"].as_str().unwrap(),
            index: tf["task"]["index"].as_u64().unwrap(),
            cluster: &tf["cluster"],
        }
    });
    one_cluster(what, placed)
        .into_iter()
        .zip(&run.tasks)
        .map(|(placed, t)| format!("{placed} {}", t.gpus))
        .collect()
}

/// The root file system of the tests' container images: the `bundle` root of
/// tests/release/root.sh (Debian 12 minbase with Python 3.11), on the host.
pub fn image_root() -> String {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/release/root.sh"))
        .args(["path", "bundle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "tests/release/root.sh path bundle");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A real OCI bundle for Slurm's `--container` (the cluster's oci.conf runs it with Debian's
/// runc): `runc spec`'s config.json and a `rootfs` made of hard links to the `bundle` root of
/// tests/release/root.sh (Debian 12 minbase with Python 3.11: an image's userland, not the
/// node's; read-only to the tasks). config.json binds in the node's /etc/hosts, /tmp (the task
/// programs) and `binds` (absolute paths, e.g. the TensorFlow virtualenv). Tasks share the node's network and host name, as
/// HPC runtimes do (TF_CONFIG names nodes and ports); runc gives each its own PID namespace,
/// where the task is PID 1. Returns the bundle's directory.
pub fn bundle(name: &str, binds: &[&str]) -> String {
    let root = image_root();
    let dir = dir().join("bundles").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let linked = Command::new("cp")
        .arg("-al")
        .arg(&root)
        .arg(dir.join("rootfs"))
        .status()
        .unwrap();
    assert!(linked.success(), "cp -al {root} {}/rootfs", dir.display());
    // Where Slurm binds each task's spool directory (/var/run/slurm, /var/run -> /run in the
    // image): made here, once. Otherwise the runc of each node's task makes it in the shared
    // rootfs, and two at once fail one task ("mkdirat .../rootfs/run/slurm: file exists").
    std::fs::create_dir_all(dir.join("rootfs/run/slurm")).unwrap();
    sh_ok(&format!("runc spec --bundle {}", dir.display()));
    let path = dir.join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["root"]["readonly"] = true.into();
    config["process"]["terminal"] = false.into();
    config.as_object_mut().unwrap().remove("hostname");
    config["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .retain(|ns| ns["type"] != "network" && ns["type"] != "uts");
    let mounts = config["mounts"].as_array_mut().unwrap();
    for (path, options) in [("/etc/hosts", ["bind", "ro"]), ("/tmp", ["rbind", "rw"])]
        .into_iter()
        .chain(binds.iter().map(|p| (*p, ["rbind", "ro"])))
    {
        mounts.push(serde_json::json!({
            "destination": path, "type": "bind", "source": path, "options": options,
        }));
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    dir.display().to_string()
}

/// A TF_CONFIG with every `host:port` cut to `host`.
pub fn without_ports(tf: Option<&Value>) -> Value {
    let mut tf = tf.expect("a TF_CONFIG").clone();
    for addresses in tf["cluster"].as_object_mut().unwrap().values_mut() {
        for a in addresses.as_array_mut().unwrap() {
            *a = a.as_str().unwrap().rsplit_once(':').unwrap().0.into();
        }
    }
    tf
}

/// The step at which `requeued_job` interrupts a job's first run: once its output has
/// `STEP|N`.
pub const INTERRUPTED_AT: u32 = 10;

/// The training's last two arguments in a requeued job's batch script, `STEPS SLOW_FROM`, as
/// shell words: in the first run each step from `INTERRUPTED_AT` on pauses 1 s instead of 0.2
/// (the training scripts' SLOW_FROM); once the job was requeued, none does. The first run is
/// interrupted there, and must not end before Slurm's signal reaches its tasks. With 0.2 s, the
/// 29 steps left of 40 gave the signal 6 s, and once, on 22.05 with Slurm being built beside
/// it, neither of the job's steps had Slurm's SIGCONT or SIGTERM by then (srun never said "got
/// SIGCONT", the batch script lived on): training ended without a checkpoint, and the requeued
/// job began again at step 0 (ci33, 2026-11-28). Now the signal has half a minute; one that
/// never comes still fails the test. Costs a second or two per requeued job.
pub fn requeued_training_args(steps: u32) -> String {
    format!("{steps} $(( ${{SLURM_RESTART_COUNT:-0}} > 0 ? {steps} : {INTERRUPTED_AT} ))")
}

/// What a requeued job left: its output, and what Slurm's daemons logged about it.
pub struct Requeued {
    /// The job's whole output, both runs.
    pub output: String,
    /// slurmctld's and each slurmd's lines about the job (`job_log`): a failure's evidence of
    /// when Slurm signalled which step.
    pub daemons: String,
}

/// Runs `script` as a `--requeue` batch job on `nodes`, output appended to `out`; once the
/// output has `STEP|INTERRUPTED_AT`, interrupts it with `interrupt` (`{job}` is the job id), lets the
/// requeued job start, and waits until it is COMPLETED, requeued once, with exit code 0.
pub fn requeued_job(
    what: &str,
    script: &Path,
    nodes: &str,
    out: &Path,
    interrupt: &str,
) -> Requeued {
    let job = sh_ok(&format!(
        "chmod 755 {s}; sbatch --parsable --requeue -t 10 {nodes} -o {o} --open-mode=append {s}",
        s = script.display(),
        o = out.display()
    ))
    .trim()
    .to_string();
    let output = || std::fs::read_to_string(out).unwrap_or_default();
    let evidence = || format!("{}\n{}", output(), job_log(&job));
    let interrupted_at = format!("STEP|{INTERRUPTED_AT}\n");
    assert!(
        within(120, || output().contains(&interrupted_at)),
        "{what}: no {interrupted_at} in 120 s\n{}",
        evidence()
    );
    sh_ok(&interrupt.replace("{job}", &job));
    // A requeued job may start again only after the launch credentials expire (about 2
    // minutes); the test lets it start as soon as it is pending, but not in the second of
    // the requeue: slurmd compares a credential's time with the revocation's in whole
    // seconds, so a start within it is refused ("Job credential revoked") and the job
    // fails (seen on 22.05 in 3 runs of 10). The start time is set again as long as the
    // job is pending, in case slurmctld sets its own once the job has finished completing.
    // Up to 180 s: the tasks checkpoint and exit, then the job completes before it is pending,
    // and on 22.05 with the machine busy (three lanes) that once took past 60 s (2026-11-28).
    assert!(
        within(180, || job_field(&job, "JobState") == "PENDING"),
        "{what}: not requeued (PENDING) in 180 s\n{}",
        evidence()
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut states: Vec<String> = Vec::new();
    let completed = within(180, || {
        let state = job_field(&job, "JobState");
        if state == "PENDING" {
            sh(&format!("scontrol update JobId={job} StartTime=now"));
        }
        let done = state == "COMPLETED";
        if states.last() != Some(&state) {
            states.push(state);
        }
        done
    });
    assert!(
        completed,
        "{what}: not COMPLETED after 180 s (states {states:?}):\n{}",
        evidence()
    );
    assert_eq!(job_field(&job, "Restarts"), "1", "{what}\n{}", evidence());
    assert_eq!(job_field(&job, "ExitCode"), "0:0", "{what}\n{}", evidence());
    Requeued {
        output: output(),
        daemons: job_log(&job),
    }
}

/// The lines of slurmctld's and every slurmd's log (the cluster's `log/*.log`) that name job
/// `job`: `JobId=N`, `StepId=N.`, `job N`, `JOB N`, or a slurmstepd's `[N.step]`, each followed
/// by no digit.
pub fn job_log(job: &str) -> String {
    let names = [
        format!("JobId={job}"),
        format!("StepId={job}"),
        format!("job {job}"),
        format!("JOB {job}"),
        format!("[{job}"),
    ];
    let names_job = |line: &str| {
        names.iter().any(|name| {
            line.match_indices(name.as_str())
                .any(|(at, _)| !line[at + name.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
    };
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir().join("log"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    let mut text = String::new();
    for log in logs {
        let lines = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = lines.lines().filter(|l| names_job(l)).collect();
        if !lines.is_empty() {
            text += &format!(
                "== {} about job {job}:\n{}\n",
                log.display(),
                lines.join("\n")
            );
        }
    }
    text
}

/// The first step of every `RESUMED|type|index|step` line of a requeued job's output, in order:
/// each task's start, then each task's resumption.
pub fn resumed_at(text: &str) -> Vec<u32> {
    records(text, "RESUMED")
        .iter()
        .map(|r| r[2].parse().unwrap())
        .collect()
}

pub fn wait_for(what: &str, seconds: u64, done: impl FnMut() -> bool) {
    assert!(within(seconds, done), "{what}: waited {seconds} s");
}

/// Waits until no job of this cluster is completing: each job's epilog has run on its nodes.
/// srun returns before that, and slurmd's epilog loads plugstack.conf afresh, so a test that
/// writes a line the epilog must not load (a plugin built for another release) waits first: an
/// epilog that cannot load a `required` plugin fails, and slurmctld drains its node.
pub fn epilogs_done() {
    wait_for("every job's epilog to end", 30, || {
        sh("squeue -h -t COMPLETING -o %i").stdout.is_empty()
    });
}

/// Whether `done` came true within `seconds`, asked every 0.5 s.
pub fn within(seconds: u64, mut done: impl FnMut() -> bool) -> bool {
    let started = std::time::Instant::now();
    while !done() {
        if started.elapsed().as_secs() >= seconds {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    true
}

/// One `Key=value` of `scontrol show job`.
pub fn job_field(job: &str, key: &str) -> String {
    let info =
        String::from_utf8_lossy(&sh(&format!("scontrol show job {job}")).stdout).into_owned();
    info.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")).map(str::to_string))
        .unwrap_or_default()
}

/// What every MultiWorkerMirroredStrategy step must show: each task reports, all end with the
/// same weights although each trained on its own data (only the all-reduce does that), each
/// with its own role in one cluster. `RESULT|type|index|loss|weights|data or alone|cluster|...`
/// (tests/tensorflow/mwms_train.py, keras_mwms.py).
pub fn trained_together(what: &str, stdout: &str, roles: &[&str]) {
    let results = records(stdout, "RESULT");
    assert_eq!(
        results.len(),
        roles.len(),
        "{what}: every task reports\n{stdout}"
    );
    // Every task ends with the same loss and weights ...
    let finals: HashSet<(&str, &str)> = results.iter().map(|r| (r[2], r[3])).collect();
    assert_eq!(finals.len(), 1, "{what}: tasks disagree: {finals:?}");
    // ... although each trained on its own data: alone, each would have learnt different weights.
    let alone: HashSet<&str> = results.iter().map(|r| r[4]).collect();
    assert_eq!(
        alone.len(),
        roles.len(),
        "{what}: the workers' data must differ"
    );
    // Each saw the whole cluster and its own role.
    let mut seen: Vec<&str> = results.iter().map(|r| r[0]).collect();
    seen.sort();
    assert_eq!(seen, roles, "{what}");
    let clusters: HashSet<&str> = results.iter().map(|r| r[5]).collect();
    assert_eq!(clusters.len(), 1, "{what}");
}

/// What a step that ends with its chief (end_with_chief) must show, from its output with a
/// `SRUN|<status>|<unix time>` line after srun: srun's status is one of `statuses` (the chief's
/// exit as this release reports a stopped step), srun returned within 120 s of `result_time`
/// (the chief's unix time when it was done), well before the 5-minute time limit the tests'
/// steps run with, which servers that join forever would otherwise reach (the bound is no
/// speed claim: with the machine busy the end once took 33 s, 2026-11-27, 22.05), and no task
/// of `program` is left on any node.
pub fn ended_with_the_chief(
    what: &str,
    stdout: &str,
    stderr: &str,
    statuses: &[i32],
    result_time: &str,
    program: &str,
) {
    let srun = &records(stdout, "SRUN")[0];
    let status = srun[0].parse::<i32>().unwrap();
    assert!(
        statuses.contains(&status),
        "{what}: srun's status {status}, not one of {statuses:?}\n{stderr}"
    );
    let delay = srun[1].parse::<f64>().unwrap() - result_time.parse::<f64>().unwrap();
    eprintln!("{what}: srun returned {delay:.2} s after the chief's result");
    assert!(
        delay < 120.0,
        "{what}: the step ran on {delay:.1} s after the chief was done"
    );
    let left = cluster_pgrep(&format!("[{}]{}", &program[..1], &program[1..]));
    assert!(left.is_empty(), "{what}: tasks left behind: {left}");
}
