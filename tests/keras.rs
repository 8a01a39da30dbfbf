//! Keras as users write it, with real TensorFlow on the real test cluster: programs in the
//! shapes of TensorFlow's own tutorials ("Multi-worker training with Keras", "Parameter server
//! training with ParameterServerStrategy"), with synthetic data and no Slurm code, on each
//! TensorFlow install of [`installs`]. Every step runs with `srun --export=NONE`, so
//! `TF_USE_LEGACY_KERAS` reaches the tasks only through tfcluster's `keras` setting.
//! Runs on the releases marked `keras` in tests/releases.tsv (TensorFlow 2.15 on those marked
//! `tensorflow-2.15` too).

mod common;
use common::cluster::{
    dir, ended_with_the_chief, records, requeued_job, requeued_training_args, resumed_at, sh, tool,
    trained_together, PlugStack, INTERRUPTED_AT,
};
use std::collections::HashSet;

/// One TensorFlow install: its version, its python, what `--tf-cluster` needs for Keras 2's
/// `model.fit`, and the Keras package `tf.keras` then is.
struct Install {
    tensorflow: &'static str,
    python: String,
    settings: &'static str,
    keras: &'static str,
}

/// The newest TensorFlow (TFC_PYTHON), whose `tf.keras` is Keras 3 unless `keras=2`, and
/// TensorFlow 2.15 (TFC_PYTHON_2_15, where tests/run.sh made it), the last whose `tf.keras` is
/// Keras 2 by itself.
fn installs() -> Vec<Install> {
    let newest = std::env::var("TFC_PYTHON").expect("TFC_PYTHON (tests/run.sh sets it)");
    let mut all = vec![Install {
        tensorflow: "2.21",
        python: newest,
        settings: ",keras=2",
        keras: "tf_keras 2.21.0",
    }];
    if let Some(python) = std::env::var("TFC_PYTHON_2_15")
        .ok()
        .filter(|p| !p.is_empty())
    {
        all.push(Install {
            tensorflow: "2.15",
            python,
            settings: "",
            keras: "keras 2.15.0",
        });
    }
    all
}

/// Runs `python program args` as every task of a step with `srun_args`: (success, stdout,
/// stderr).
fn run(srun_args: &str, python: &str, program: &str, args: &str) -> (bool, String, String) {
    let out = sh(&format!(
        "srun -t 5 --export=NONE {srun_args} {python} {} {args}",
        tool(program)
    ));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (what, srun arguments before the settings, the roles that train)
#[rustfmt::skip]
const FIT_STEPS: &[(&str, &str, &[&str])] = &[
    ("all workers",          "-w n011,n012 -N2 -n2 --tf-cluster=worker:*",         &["worker", "worker"]),
    ("a chief and workers",  "-w n011,n012 -N2 -n3 --tf-cluster=chief:1,worker:*", &["chief", "worker", "worker"]),
];

/// The Keras tutorial's MultiWorkerMirroredStrategy program: every task ends with the same
/// weights although each trained on its own data (only the all-reduce does that), with every
/// trainer counted in sync, in Keras 2.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn keras_fit_trains_with_multi_worker_mirrored_strategy() {
    let _defaults = PlugStack::defaults();
    for install in installs() {
        for (what, args, roles) in FIT_STEPS {
            let what = format!("TensorFlow {}, {what}", install.tensorflow);
            let (ok, stdout, stderr) = run(
                &format!("{args}{}", install.settings),
                &install.python,
                "keras_mwms.py",
                "",
            );
            assert!(ok, "{what}:\n{stdout}\n{stderr}");
            trained_together(&what, &stdout, roles);
            for r in &records(&stdout, "RESULT") {
                assert_eq!(r[6], roles.len().to_string(), "{what}: replicas in sync");
                assert_eq!(r[7], install.keras, "{what}: tf.keras");
            }
        }
    }
}

/// README's first job, exactly as written there: its batch script (`train.sh`) and its program
/// (`train.py`), the first `sh` and `python` blocks under "## A first job", submitted with
/// sbatch with the newest TensorFlow's `python` first on the `PATH`. Every one of the four
/// workers runs both epochs of `model.fit`, and the job completes.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn readmes_first_job_trains() {
    let _defaults = PlugStack::defaults();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("## A first job\n")
        .nth(1)
        .expect("README has A first job");
    let section = section.split("\n## ").next().unwrap();
    let block = |lang: &str| {
        let open = format!("```{lang}\n");
        let rest = &section[section.find(&open).expect(&open) + open.len()..];
        rest[..rest.find("```").unwrap()].to_string()
    };
    let work = dir().join("first-job");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("train.sh"), block("sh")).unwrap();
    std::fs::write(work.join("train.py"), block("python")).unwrap();
    let python = std::env::var("TFC_PYTHON").expect("TFC_PYTHON (tests/run.sh sets it)");
    let bin = std::path::Path::new(&python).parent().unwrap();
    let out = work.join("out");
    let submitted = sh(&format!(
        "cd {w} && PATH={bin}:$PATH sbatch --wait -t 5 -o {out} train.sh",
        w = work.display(),
        bin = bin.display(),
        out = out.display()
    ));
    let output = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        submitted.status.success(),
        "{output}\n{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    assert_eq!(output.matches("Epoch 2/2").count(), 4, "{output}");
}

/// The parameter-server tutorial's Keras path: model.fit with DatasetCreator, ModelCheckpoint
/// and BackupAndRestore on the chief, ps and workers serving; the model learns, and the step
/// ends when the chief returns.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn keras_fit_trains_with_parameter_server_strategy() {
    let _defaults = PlugStack::defaults();
    for install in installs() {
        let what = format!("TensorFlow {}", install.tensorflow);
        let work = dir().join(format!("keras-ps-{}", install.tensorflow));
        let _ = std::fs::remove_dir_all(&work);
        let out = sh(&format!(
            "srun -t 5 --export=NONE -w n011,n012,n9 -N3 -n4 --tf-cluster=chief:1,ps:1,worker:*{} \
             {} {} {}; echo \"SRUN|$?|$(date +%s.%N)\"",
            install.settings,
            install.python,
            tool("keras_ps.py"),
            work.display()
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let mut roles: Vec<String> = records(&stdout, "ROLE")
            .iter()
            .map(|r| r.join("|"))
            .collect();
        roles.sort();
        assert_eq!(
            roles,
            ["chief|0", "ps|0", "worker|0", "worker|1"],
            "{what}\n{stderr}"
        );
        let result = records(&stdout, "RESULT");
        assert_eq!(
            result.len(),
            1,
            "{what}: the chief finished\n{stdout}\n{stderr}"
        );
        let loss: f64 = result[0][0].parse().unwrap();
        assert!(loss < 0.01, "{what}: the model did not learn (loss {loss})");
        assert_eq!(result[0][1], install.keras, "{what}: tf.keras");
        assert!(
            work.join("ckpt").exists(),
            "{what}: ModelCheckpoint saved nothing"
        );
        // A ParameterServerStrategy chief's success: before 23.11 srun may exit with its 0 too.
        let statuses = common::release::current().failed_step_statuses(0);
        ended_with_the_chief(
            &what,
            &stdout,
            &stderr,
            &statuses,
            result[0][2],
            "keras_ps.py",
        );
    }
}

/// Keras 3's model.fit (TensorFlow 2.21 without `keras=2`), in each tutorial's shape: (the
/// program, srun arguments, Keras's error, how the line that names the failed task begins and
/// ends). Under MultiWorkerMirroredStrategy every worker fails; under ParameterServerStrategy the chief
/// cannot start (Keras 3 has no DatasetCreator) while ps and workers serve on.
#[rustfmt::skip]
const KERAS_3_FAILS: &[(&str, &str, &str, (&str, &str))] = &[
    ("keras_mwms.py", "-w n011,n012 -N2 -n2 --tf-cluster=worker:*",
     "ValueError: Attempt to convert a value (PerReplica:", ("rank ", " exited 1; stopping the step's other 1 task")),
    // The chief decides the step's end (end_with_chief, on with ps).
    ("keras_ps.py",   "-w n011,n012,n9 -N3 -n3 --tf-cluster=chief:1,ps:1,worker:*",
     "AttributeError: module 'keras.utils' has no attribute 'experimental'", ("chief exited 1", "; stopping the step's other 2 tasks")),
];

/// Each fails, and the step ends at once, with Keras's error and the failed task named.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn keras_3_fit_fails_and_the_step_ends_with_the_rank_named() {
    let _defaults = PlugStack::defaults();
    let newest = &installs()[0];
    for (program, args, error, (begins, ends)) in KERAS_3_FAILS {
        let started = std::time::Instant::now();
        let work = dir().join("keras-3").display().to_string();
        let (ok, stdout, stderr) = run(args, &newest.python, program, &work);
        let elapsed = started.elapsed().as_secs_f64();
        eprintln!("Keras 3, {program}: srun returned {elapsed:.1} s after the start");
        // srun's own abort limit (KillWait + 2 s, 7 s here) can pass before the tasks'
        // statuses arrive on a loaded machine: then srun says so and exits 0 (user guide).
        let srun_gave_up =
            stderr.contains("srun: error: Timed out waiting for job step to complete");
        assert!(
            !ok || srun_gave_up,
            "{program}: Keras 3's fit trained:\n{stdout}\n{stderr}"
        );
        assert!(
            stderr.contains(error),
            "{program}: Keras's error reaches srun's stderr:\n{stderr}"
        );
        let named = stderr
            .lines()
            .any(|l| l.contains(&format!("tfcluster: {begins}")) && l.contains(ends));
        assert!(named, "{program}: the failed task is named:\n{stderr}");
        assert!(records(&stdout, "RESULT").is_empty(), "{program}: {stdout}");
        assert!(elapsed < 90.0, "{program}: the step ran {elapsed:.0} s");
    }
}

/// Preemption with model.fit: a `--requeue` batch job training with BackupAndRestore (a backup
/// every 5 steps) is requeued mid-training (`scontrol requeue`: SIGTERM, which TensorFlow's
/// coordination service catches, then SIGKILL after KillWait), resumes from its last backup, and
/// ends with exactly the weights of a run that was never interrupted.
///
/// Over a minute (125 s on 22.05, 69 s on 26.05, 2026-11-27): per TensorFlow install, an
/// uninterrupted run, then a job that starts, is requeued (Slurm's requeue delay and KillWait)
/// and starts again, each start importing TensorFlow on every task; the weights are compared
/// only after a real requeue, which nothing shorter shows.
#[test]
#[ignore = "needs the test cluster and TensorFlow: run tests/run.sh"]
fn keras_fit_resumes_after_requeue_with_the_same_weights() {
    let _defaults = PlugStack::defaults();
    let (nodes, steps) = ("-w n011,n012 -N2 -n2", 80);
    for install in installs() {
        let what = format!("TensorFlow {}", install.tensorflow);
        let dir = dir();
        let (whole, backup) = (
            dir.join(format!("keras-whole-{}", install.tensorflow)),
            dir.join(format!("keras-backup-{}", install.tensorflow)),
        );
        let (out, script) = (
            dir.join(format!("keras-requeue-{}.out", install.tensorflow)),
            dir.join(format!("keras-requeue-{}.sh", install.tensorflow)),
        );
        for d in [&whole, &backup] {
            let _ = std::fs::remove_dir_all(d);
        }
        let _ = std::fs::remove_file(&out);
        let srun = |options: &str, backup: &std::path::Path, arguments: &str| {
            format!(
                "srun {options} --export=NONE --tf-cluster=worker:*{} {} {} {} {arguments}",
                install.settings,
                install.python,
                tool("keras_preempt.py"),
                backup.display()
            )
        };
        let reference = sh(&srun(&format!("-t 5 {nodes}"), &whole, &steps.to_string()));
        let reference_out = String::from_utf8_lossy(&reference.stdout);
        let weights = |text: &str| -> HashSet<String> {
            records(text, "RESULT")
                .iter()
                .map(|r| r[2].to_string())
                .collect()
        };
        assert_eq!(
            weights(&reference_out).len(),
            1,
            "{what}: one set of weights\n{reference_out}"
        );
        let script_line = srun("", &backup, &requeued_training_args(steps));
        std::fs::write(&script, format!("#!/bin/bash\n{script_line}\n")).unwrap();
        let job = requeued_job(&what, &script, nodes, &out, "scontrol requeue {job}");
        let (text, daemons) = (&job.output, &job.daemons);
        let resumed = resumed_at(text);
        assert!(
            resumed.len() == 4
                && resumed[..2] == [0, 0]
                && resumed[2] >= INTERRUPTED_AT
                && resumed[2] % 5 == 0
                && resumed[2] < steps
                && resumed[2] == resumed[3],
            "{what}: both tasks start at 0, then both resume at a backup from step {INTERRUPTED_AT}, before {steps}: {resumed:?}\n{text}\n{daemons}"
        );
        assert_eq!(
            weights(text),
            weights(&reference_out),
            "{what}: the weights of the uninterrupted run\n{text}\n{daemons}"
        );
        eprintln!("{what}: resumed at step {} of {steps}", resumed[2]);
    }
}
