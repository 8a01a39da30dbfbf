//! TensorFlow's tasks in containers, on the real test cluster: Slurm's own `--container` with
//! Debian's runc (the cluster's oci.conf) and a real OCI bundle whose root is another Debian
//! than the node's (tests/common/cluster.rs `bundle`). What each release does is the release
//! table's `container_gets_task_env`: from 23.02 every task inside gets exactly the TF_CONFIG
//! and CUDA_VISIBLE_DEVICES it gets on the node; on 22.05, which writes the container's
//! environment before any plugin runs, srun refuses the step before launch and says why.

mod common;
use common::cluster::{bundle, dir, parse, records, sh, summary, tool, without_ports};
use common::release;
use tfcluster::core::container::ContainerWarning;

/// How a step asks for its container.
#[derive(Clone, Copy)]
enum Via {
    /// `srun --container=BUNDLE`
    Option,
    /// `SRUN_CONTAINER=BUNDLE` in srun's environment.
    Environment,
}

/// (what, how the container is asked for, the step's srun arguments)
#[rustfmt::skip]
const CONTAINER_STEPS: &[(&str, Via, &str)] = &[
    ("a chief and workers, two per node, with GPUs", Via::Option,      "-w n011,n012 -N2 -n4 --gres=gpu:4 --tf-cluster=chief:1,worker:*"),
    ("one worker per node on four nodes",            Via::Option,      "-N4 -n4 --gres=gpu:2 --tf-cluster"),
    ("a ps and workers, block layout",               Via::Option,      "-w n011,n012 -N2 -n6 --gres=gpu:4 --tf-cluster=chief:1,ps:1,worker:*"),
    ("SRUN_CONTAINER",                               Via::Environment, "-w n011,n012 -N2 -n4 --gres=gpu:4 --tf-cluster=chief:1,worker:*"),
];

/// The srun command line of `args` in `bundle` the way `via` says, running `program`.
fn in_container(via: Via, bundle: &str, args: &str, program: &str) -> String {
    match via {
        Via::Option => format!("srun --container={bundle} {args} {program}"),
        Via::Environment => format!("SRUN_CONTAINER={bundle} srun {args} {program}"),
    }
}

/// Every task prints its PID (1 inside runc's PID namespace: it did run in the container), then
/// becomes tests/cluster/report.sh.
fn report_in_pid_namespace() -> String {
    format!(
        "sh -c 'echo \"PID|$SLURM_PROCID|$$\"; exec {}'",
        tool("report.sh")
    )
}

/// Each step of CONTAINER_STEPS, in the container and on the node: from 23.02, every task in
/// the container has exactly what the same task has without it (its role and index, the whole
/// cluster, its GPU slice), two tasks on one node included. On 22.05 srun refuses the step
/// before launch, naming the release: no task starts without its TF_CONFIG while srun exits 0.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn every_task_in_a_container_gets_what_it_gets_on_the_node() {
    let release = release::current();
    assert_eq!(
        tfcluster::spank::ffi::CONTAINER_GETS_TASK_ENV,
        release.container_gets_task_env,
        "build.rs and tests/common/release.rs disagree on Slurm {}",
        release.version
    );
    let bundle = bundle("report", &[]);
    let refusal = format!(
        "srun: error: tfcluster: --tf-cluster cannot reach tasks in Slurm's --container ({bundle}) on Slurm {}: ",
        release.version
    );
    for (what, via, args) in CONTAINER_STEPS {
        let out = sh(&in_container(
            *via,
            &bundle,
            args,
            &report_in_pid_namespace(),
        ));
        let inside = parse(out);
        let stdout = &inside.stdout;
        if !release.container_gets_task_env {
            assert!(
                inside.stderr.contains(&refusal),
                "{what}: no refusal\n{}",
                inside.stderr
            );
            assert_ne!(inside.code, 0, "{what}: srun succeeded");
            assert!(inside.tasks.is_empty(), "{what}: a task ran:\n{stdout}");
            continue;
        }
        let on_node = parse(sh(&format!("srun {args} {}", tool("report.sh"))));
        assert_eq!(
            summary(&inside, what),
            summary(&on_node, what),
            "{what}: in the container vs on the node"
        );
        // The same TF_CONFIG but for the ports, which Slurm reserves anew for every step.
        for (t, n) in inside.tasks.iter().zip(&on_node.tasks) {
            assert_eq!(
                without_ports(t.tf.as_ref()),
                without_ports(n.tf.as_ref()),
                "{what}: rank {}'s TF_CONFIG",
                t.rank
            );
        }
        let pids = records(stdout, "PID");
        assert_eq!(pids.len(), inside.tasks.len(), "{what}:\n{stdout}");
        assert!(
            pids.iter().all(|p| p[1] == "1"),
            "{what}: a task ran outside the container:\n{stdout}"
        );
    }
}

/// The negative control of the refusal: the same bundle without `--tf-cluster` runs in its
/// container on every release, 22.05 included (one task per node there), so what srun refuses
/// there is only what would train alone, and without the option the plugin changes nothing.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn without_the_option_a_container_step_runs_on_every_release() {
    let bundle = bundle("plain", &[]);
    let out = sh(&format!(
        "srun -N2 -n2 --container={bundle} sh -c 'echo \"PID|$$|${{TF_CONFIG-unset}}\"'"
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        records(&stdout, "PID"),
        vec![vec!["1", "unset"]; 2],
        "{stdout}\n{stderr}"
    );
}

/// A batch script of `sbatch --container` has SLURM_CONTAINER, but its steps run on the nodes
/// unless srun asks for a container too (srun's opt.c; slurmctld gives a job's container to its
/// batch step only). Such a step gets its TF_CONFIG on every release; where srun cannot tell
/// whether a container TF_CONFIG cannot reach is meant (22.05), it warns and goes on.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_job_containers_steps_run_on_the_nodes_with_a_warning_where_it_matters() {
    let release = release::current();
    let bundle = bundle("job", &[]);
    let out = sh(&format!(
        "SLURM_CONTAINER={bundle} srun -N2 -n2 --tf-cluster {}",
        report_in_pid_namespace()
    ));
    let run = parse(out);
    let stdout = &run.stdout;
    assert_eq!(summary(&run, "a job's container").len(), 2);
    let pids = records(stdout, "PID");
    assert_eq!(
        pids.len(),
        run.tasks.len(),
        "every task says its PID:\n{stdout}"
    );
    assert!(
        pids.iter().all(|p| p[1] != "1"),
        "a task ran in a container:\n{stdout}"
    );
    let warning = format!(
        "tfcluster: warning: SLURM_CONTAINER ({bundle}) came with srun's environment (a job or step started with --container); if this step runs in a container too (srun --container), its tasks get no TF_CONFIG on Slurm {} and train alone",
        release.version
    );
    assert_eq!(
        run.stderr.contains(&warning),
        !release.container_gets_task_env,
        "{}",
        run.stderr
    );
}

/// Whether srun's stderr has a node's `warning`, as the shell logs it.
fn warned(stderr: &str, warning: &ContainerWarning) -> bool {
    stderr.contains(&format!("tfcluster: warning: {warning}"))
}

/// The test cluster's oci.conf (slurmstepd reads it for every container step), written by a
/// test and put back as it was when dropped.
struct OciConf {
    path: std::path::PathBuf,
    original: String,
}

impl OciConf {
    fn cluster() -> OciConf {
        let path = common::cluster::dir().join("etc/oci.conf");
        let original = std::fs::read_to_string(&path).unwrap();
        OciConf { path, original }
    }

    fn set(&self, text: &str) {
        std::fs::write(&self.path, text).unwrap();
    }
}

impl Drop for OciConf {
    fn drop(&mut self) {
        std::fs::write(&self.path, &self.original).unwrap();
    }
}

/// (a site's oci.conf `EnvExclude`, the variables it removes from a task of the step below, in
/// the order tfcluster sets them). Slurm matches the pattern against each `NAME=value`.
#[rustfmt::skip]
const ENV_EXCLUDES: &[(&str, &[&str])] = &[
    ("^TF_CONFIG=",                         &["TF_CONFIG"]),
    ("^(TF_|CUDA_)",                        &["TF_CONFIG", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"]),
    ("^(SLURM_CONF|SLURM_CONF_SERVER)=",    &[]),
];

/// Where tfcluster cannot make its variables arrive, it says so: a node whose oci.conf has an
/// `EnvExclude` that matches TF_CONFIG or CUDA_VISIBLE_DEVICES warns on srun's stderr, naming
/// the pattern, and (the reason for the line) its tasks indeed start without them. A pattern
/// that matches none of them gives no line and changes nothing. From 23.02 (22.05 has no
/// EnvExclude, and refuses such steps anyway).
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn an_env_exclude_that_removes_tf_config_is_named_on_srun_stderr() {
    if !release::current().container_gets_task_env {
        return;
    }
    let conf = OciConf::cluster();
    let bundle = bundle("report", &[]);
    let args = "-w n011,n012 -N2 -n2 --gres=gpu:2 --tf-cluster=worker:*";
    for (pattern, removed) in ENV_EXCLUDES {
        conf.set(&format!("{}EnvExclude=\"{pattern}\"\n", conf.original));
        let out = parse(sh(&format!(
            "srun --container={bundle} {args} {}",
            tool("report.sh")
        )));
        assert_eq!(out.tasks.len(), 2, "{pattern}: {}", out.stderr);
        for node in ["n011", "n012"] {
            let warning = ContainerWarning::EnvExcluded {
                node: node.to_string(),
                pattern: pattern.to_string(),
                names: removed.join(", "),
                bundle: bundle.clone(),
            };
            assert_eq!(
                warned(&out.stderr, &warning),
                !removed.is_empty(),
                "{pattern}: {node}'s line in:\n{}",
                out.stderr
            );
        }
        for task in &out.tasks {
            assert_eq!(
                task.tf.is_none(),
                removed.contains(&"TF_CONFIG"),
                "{pattern}: rank {}'s TF_CONFIG",
                task.rank
            );
            assert_eq!(
                task.gpus == "-",
                removed.contains(&"CUDA_VISIBLE_DEVICES"),
                "{pattern}: rank {}'s GPUs {}",
                task.rank,
                task.gpus
            );
        }
    }
}

/// A site's oci.conf with `IgnoreFileConfigJson=true`, as in Slurm's own Singularity example:
/// its other lines (`{runtime}` stands for tests/cluster/oci_runtime.sh), and whether the
/// task's variables reach the program.
struct IgnoredConfigJson {
    settings: &'static str,
    arrive: bool,
}

#[rustfmt::skip]
const IGNORED_CONFIG_JSON: &[IgnoredConfigJson] = &[
    IgnoredConfigJson { settings: "RunTimeRun=\"{runtime} %@\"",                                         arrive: false },
    IgnoredConfigJson { settings: "CreateEnvFile=disabled\nRunTimeRun=\"{runtime} %@\"",                 arrive: false },
    IgnoredConfigJson { settings: "CreateEnvFile=newline\nRunTimeRun=\"{runtime} --env-file %e %@\"",    arrive: true  },
];

/// Where no config.json carries the task's environment and no `CreateEnvFile` holds it,
/// slurmstepd starts the runtime with its own environment: every task starts with none of the
/// step's variables (not even SLURM_PROCID), and each node says so on srun's stderr. With the
/// file, passed as `%e`, every task gets what it gets on the node, and no line. From 23.02
/// (22.05 has no IgnoreFileConfigJson, and refuses such steps anyway).
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_runtime_started_without_the_task_environment_is_named_on_srun_stderr() {
    if !release::current().container_gets_task_env {
        return;
    }
    let conf = OciConf::cluster();
    let bundle = bundle("report", &[]);
    let args = "-w n011,n012 -N2 -n4 --gres=gpu:4 --tf-cluster=chief:1,worker:*";
    let on_node = parse(sh(&format!("srun {args} {}", tool("report.sh"))));
    for row in IGNORED_CONFIG_JSON {
        let settings = row.settings.replace("{runtime}", &tool("oci_runtime.sh"));
        conf.set(&format!("IgnoreFileConfigJson=true\n{settings}\n"));
        let out = sh(&format!(
            "srun --container={bundle} {args} {}",
            tool("report.sh")
        ));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{settings}: {stderr}");
        for node in ["n011", "n012"] {
            let warning = ContainerWarning::TaskEnvLost {
                node: node.to_string(),
                bundle: bundle.clone(),
            };
            assert_eq!(
                warned(&stderr, &warning),
                !row.arrive,
                "{settings}: {node}'s line in:\n{stderr}"
            );
        }
        if row.arrive {
            let inside = parse(out);
            assert_eq!(
                summary(&inside, &settings),
                summary(&on_node, &settings),
                "{settings}: in the container vs on the node"
            );
            for (t, n) in inside.tasks.iter().zip(&on_node.tasks) {
                assert_eq!(
                    without_ports(t.tf.as_ref()),
                    without_ports(n.tf.as_ref()),
                    "{settings}: rank {}'s TF_CONFIG",
                    t.rank
                );
            }
            continue;
        }
        // Nothing of the step: no rank, no GPUs, no TF_CONFIG (tests/cluster/report.sh).
        let mut tasks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("TASK|")).collect();
        tasks.sort();
        assert_eq!(
            tasks,
            [
                "TASK||n011|-|-",
                "TASK||n011|-|-",
                "TASK||n012|-|-",
                "TASK||n012|-|-"
            ],
            "{settings}"
        );
    }
}

/// From the attacker's side, root looks at no file the job's `PATH` names: slurmstepd looks
/// for Apptainer there with the user's privileges (`user_init`). An `apptainer` in a directory
/// only root can enter gives the user's tasks no Apptainer names (root's own look found it,
/// and so told the user that a file they cannot see is there); the same file where the user
/// can look gives them. A root with Apptainer installed in the usual prefixes names it either
/// way. (what, the directory's mode, whether the task gets `APPTAINERENV_TF_CONFIG`)
#[rustfmt::skip]
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn root_looks_at_no_file_the_jobs_path_names() {
    // Under the cluster's directory, which every node sees (a node's /tmp is its own).
    let base = dir().join("path-lookup").display().to_string();
    let installed = sh("command -v apptainer").status.success();
    let rows: &[(&str, &str, bool)] = &[
        ("a directory only root can enter", "700", installed),
        ("a directory the user can enter",  "755", true),
    ];
    for (what, mode, named) in rows {
        sh(&format!(
            "mkdir -p {base}/bin && printf '#!/bin/sh\\n' >{base}/bin/apptainer && chmod 755 {base}/bin {base}/bin/apptainer && chmod {mode} {base}"
        ));
        let out = sh(&format!(
            "srun=$(command -v srun); runuser -u {OWNER} -- env PATH={base}/bin:$(dirname $srun):/usr/bin:/bin $srun -N1 -n1 -t 1 --tf-cluster='worker:*' printenv APPTAINERENV_TF_CONFIG"
        ));
        let _ = sh(&format!("rm -rf {base}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), *named, "{what}: {stderr}");
    }
}

const OWNER: &str = "tfc-owner";
