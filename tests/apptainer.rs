//! TensorFlow's tasks in Apptainer, on the real test cluster: `srun --tf-cluster apptainer exec
//! IMAGE PROGRAM` with Debian's apptainer, on sandbox images `apptainer build --sandbox` makes
//! offline (`Bootstrap: scratch`, the root copied in by `%setup`): one plain, one whose
//! `%environment` defines TF_CONFIG and CUDA_VISIBLE_DEVICES, as an image built for one
//! machine may. Apptainer passes the task's environment in by default, but `--cleanenv` and
//! `--containall` drop it and an image's own definitions win over it; tfcluster's
//! `apptainer_env` (by default) also sets each variable under Apptainer's own names in every
//! task, which win in every case, however the task starts apptainer.
//! Runs on the releases marked `apptainer` in tests/releases.tsv (Debian packages apptainer
//! from forky on); the task runs apptainer as root here, which needs `--userns` on these
//! machines (they withhold a capability apptainer's setuid-less root mode asks for).

mod common;
use common::cluster::{dir, image_root, one_cluster, sh, sh_ok, tool, without_ports, Placed};
use serde_json::Value;
use std::collections::BTreeMap;
use tfcluster::core::container::Runtimes;
use tfcluster::spank::runtimes::program_at;

/// Which runtimes a node has, from the job's `PATH` and the usual prefixes: (what, PATH, the
/// node's executables as (path, the file name its links lead to), found).
#[rustfmt::skip]
#[test]
fn the_runtimes_a_node_has() {
    const APPTAINER: Runtimes = Runtimes { apptainer: true, singularity: false };
    const SINGULARITY_CE: Runtimes = Runtimes { apptainer: false, singularity: true };
    type Case = (&'static str, Option<&'static str>, &'static [(&'static str, &'static str)], Runtimes);
    let cases: &[Case] = &[
        ("none anywhere",                          Some("/usr/bin:/bin"),            &[],                                                      Runtimes::NONE),
        ("Debian's apptainer, with its link",      Some("/usr/bin:/bin"),            &[("/usr/bin/apptainer", "apptainer"), ("/usr/bin/singularity", "apptainer")], APPTAINER),
        ("SingularityCE from source",              Some("/usr/bin"),                 &[("/usr/local/bin/singularity", "singularity")],        SINGULARITY_CE),
        ("a module's PATH entry",                  Some("/sw/apptainer/1.3/bin:/usr/bin"), &[("/sw/apptainer/1.3/bin/apptainer", "apptainer")], APPTAINER),
        ("no PATH (srun --export=NONE)",           None,                             &[("/usr/bin/apptainer", "apptainer")],                  APPTAINER),
        ("/opt, not in PATH",                      Some("/usr/bin"),                 &[("/opt/apptainer/bin/apptainer", "apptainer")],        APPTAINER),
        ("both runtimes",                          Some("/usr/bin"),                 &[("/usr/bin/apptainer", "apptainer"), ("/opt/singularity/bin/singularity", "singularity")], Runtimes::BOTH),
        ("a versioned apptainer behind the link",  Some("/usr/bin"),                 &[("/usr/bin/singularity", "apptainer-1.4")],            APPTAINER),
        ("a relative PATH entry is not looked in", Some("bin:.:/usr/bin"),           &[("bin/apptainer", "apptainer")],                       Runtimes::NONE),
        ("elsewhere, not in PATH",                 Some("/usr/bin"),                 &[("/sw/apptainer/bin/apptainer", "apptainer")],         Runtimes::NONE),
    ];
    for (what, path, files, found) in cases {
        let program_at = |p: &str| files.iter().find(|(f, _)| *f == p).map(|(_, real)| real.to_string());
        assert_eq!(Runtimes::find(*path, program_at), *found, "{what}");
    }
}

/// The user guide lists the prefixes a node looks in, as `RUNTIME_DIRS` has them.
#[test]
fn the_user_guide_names_every_runtime_prefix() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/user-guide.md"),
    )
    .unwrap()
    .replace('\n', " ");
    let listed = tfcluster::core::container::RUNTIME_DIRS
        .iter()
        .map(|d| format!("`{d}`"))
        .collect::<Vec<_>>();
    let sentence = format!(
        "{} and {}",
        listed[..listed.len() - 1].join(", "),
        listed[listed.len() - 1]
    );
    assert!(
        guide.contains(&sentence),
        "docs/user-guide.md must list {sentence}"
    );
}

/// The file look on this machine: a link to an executable is its target's name; a file that
/// is not executable, or is missing, is nothing.
#[test]
fn the_file_look_follows_links_to_executables() {
    use std::os::unix::fs::PermissionsExt;
    let d = std::env::temp_dir().join(format!("tfc-runtimes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let apptainer = d.join("apptainer");
    std::fs::write(&apptainer, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&apptainer, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&apptainer, d.join("singularity")).unwrap();
    std::fs::write(d.join("plain"), "").unwrap();
    let at = |name: &str| program_at(d.join(name).to_str().unwrap());
    assert_eq!(at("apptainer").as_deref(), Some("apptainer"));
    assert_eq!(at("singularity").as_deref(), Some("apptainer"));
    assert_eq!(at("plain"), None);
    assert_eq!(at("missing"), None);
    std::fs::remove_dir_all(&d).unwrap();
}

/// What a task inside sees, compared with what the same task gets on the node.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sees {
    /// Its own TF_CONFIG and GPU slice.
    Own,
    /// Neither (the runtime dropped them).
    Nothing,
    /// The image's `%environment` values.
    Image,
}

/// How the task starts the container.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// `apptainer exec ...` is the task's program.
    Program,
    /// A wrapper script (tests/cluster/in_apptainer.sh) that prepares, then runs apptainer.
    Script,
    /// `bash -c "apptainer exec ..."`.
    BashC,
    /// A shell that runs the wrapper script: `bash -c "sh -c 'in_apptainer.sh ...'"`.
    Nested,
}

impl Start {
    /// The task's command line that runs `apptainer exec {rest}`.
    fn command(self, rest: &str) -> String {
        let script = tool("in_apptainer.sh");
        match self {
            Start::Program => format!("apptainer exec {rest}"),
            Start::Script => format!("{script} {rest}"),
            Start::BashC => format!("bash -c \"apptainer exec {rest}\""),
            Start::Nested => format!("bash -c \"sh -c '{script} {rest}'\""),
        }
    }
}

/// One step of [`APPTAINER_STEPS`].
struct ApptainerStep {
    /// How the task starts apptainer.
    start: Start,
    /// Apptainer's options.
    options: &'static str,
    /// The image: `plain`, or `defines` (its own TF_CONFIG and CUDA_VISIBLE_DEVICES).
    image: &'static str,
    /// The `--tf-cluster` settings after the spec.
    settings: &'static str,
    /// What every task sees.
    sees: Sees,
}

/// Every start form, with every option, in both images, sees its own values under the default
/// `apptainer_env=yes`.
#[rustfmt::skip]
const APPTAINER_STEPS: &[ApptainerStep] = &[
    ApptainerStep { start: Start::Program, options: "",               image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Program, options: "--cleanenv",     image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Program, options: "--containall",   image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Program, options: "",               image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Program, options: "--cleanenv",     image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Program, options: "--containall",   image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Script,  options: "",               image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Script,  options: "--cleanenv",     image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Script,  options: "--containall",   image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Script,  options: "",               image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Script,  options: "--cleanenv",     image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Script,  options: "--containall",   image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::BashC,   options: "",               image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::BashC,   options: "--cleanenv",     image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::BashC,   options: "--containall",   image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::BashC,   options: "",               image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::BashC,   options: "--cleanenv",     image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::BashC,   options: "--containall",   image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Nested,  options: "",               image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Nested,  options: "--cleanenv",     image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Nested,  options: "--containall",   image: "plain",   settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Nested,  options: "",               image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Nested,  options: "--cleanenv",     image: "defines", settings: "",                   sees: Sees::Own },
    ApptainerStep { start: Start::Nested,  options: "--containall",   image: "defines", settings: "",                   sees: Sees::Own },
    // A site's opt-outs: auto sets the names only when apptainer is the program; no never.
    ApptainerStep { start: Start::Script,  options: "--cleanenv",     image: "plain",   settings: ",apptainer_env=auto", sees: Sees::Nothing },
    ApptainerStep { start: Start::Program, options: "--cleanenv",     image: "plain",   settings: ",apptainer_env=auto", sees: Sees::Own },
    ApptainerStep { start: Start::Program, options: "--cleanenv",     image: "plain",   settings: ",apptainer_env=no",   sees: Sees::Nothing },
    ApptainerStep { start: Start::Program, options: "",               image: "defines", settings: ",apptainer_env=no",   sees: Sees::Image },
];

/// The image's own values (its `%environment`).
const IMAGE_TF_CONFIG: &str =
    r#"{"cluster":{"worker":["image:1"]},"task":{"type":"worker","index":0}}"#;
const IMAGE_GPUS: &str = "7";

/// Builds the two sandbox images (once per run) from the `bundle` root of tests/release/root.sh;
/// returns their folder.
fn images() -> String {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let images = dir().join("images");
    BUILT.call_once(|| {
        let _ = std::fs::remove_dir_all(&images);
        std::fs::create_dir_all(&images).unwrap();
        // The image's root, as hard links where the root of the release can see it.
        let base = images.join("base");
        let linked = std::process::Command::new("cp")
            .arg("-al")
            .arg(image_root())
            .arg(&base)
            .status()
            .unwrap();
        assert!(linked.success(), "cp -al {} {}", image_root(), base.display());
        let setup = format!(
            "%setup\n    cp -a {}/. \"${{APPTAINER_ROOTFS}}/\"\n",
            base.display()
        );
        let environment = format!(
            "%environment\n    export TF_CONFIG='{IMAGE_TF_CONFIG}'\n    export CUDA_VISIBLE_DEVICES={IMAGE_GPUS}\n"
        );
        for (name, extra) in [("plain", ""), ("defines", environment.as_str())] {
            let def = images.join(format!("{name}.def"));
            std::fs::write(&def, format!("Bootstrap: scratch\n\n{setup}\n{extra}")).unwrap();
            sh_ok(&format!(
                "cd {} && apptainer --quiet build --sandbox {name} {name}.def",
                images.display()
            ));
        }
    });
    images.display().to_string()
}

/// One task's report under `srun -l`: rank (from srun's label) → (host, gpus, TF_CONFIG).
type Reports = BTreeMap<u32, (String, String, Option<Value>)>;

/// The `N: TASK|...` lines of tests/cluster/report.sh under `srun -l` (inside a clean
/// environment SLURM_PROCID is gone, so the rank comes from srun's label).
fn labelled(stdout: &str) -> Reports {
    stdout
        .lines()
        .filter_map(|l| {
            let (rank, rest) = l.split_once(": TASK|")?;
            let f: Vec<&str> = rest.splitn(4, '|').collect();
            let tf = (f[3] != "-").then(|| serde_json::from_str(f[3]).expect("JSON"));
            Some((rank.trim().parse().ok()?, (f[1].into(), f[2].into(), tf)))
        })
        .collect()
}

#[test]
#[ignore = "needs the test cluster and apptainer: run tests/run.sh"]
fn every_task_in_apptainer_gets_its_own_tf_config_and_gpus() {
    let images = images();
    let tools = dir().join("tools");
    let step = "-l -w n011,n012 -N2 -n4 --gres=gpu:4 --tf-cluster=chief:1,worker:*";
    let on_node = labelled(&sh_ok(&format!("srun {step} {}", tool("report.sh"))));
    assert_eq!(on_node.len(), 4);
    // The node's own: one cluster, each task at its own node.
    let placed: Vec<String> = one_cluster(
        "on the node",
        on_node.iter().map(|(rank, (host, _, tf))| {
            let tf = tf.as_ref().unwrap();
            Placed {
                rank: *rank,
                host,
                role: tf["task"]["type"].as_str().unwrap(),
                index: tf["task"]["index"].as_u64().unwrap(),
                cluster: &tf["cluster"],
            }
        }),
    );
    assert_eq!(placed.len(), 4);
    for ApptainerStep {
        start,
        options,
        image,
        settings,
        sees,
    } in APPTAINER_STEPS
    {
        let what = format!("{start:?}, {options:?}, image {image}, settings {settings:?}");
        let out = sh(&format!(
            "srun {step}{settings} {}",
            start.command(&format!(
                "--userns --bind {tools} {options} {images}/{image} {report}",
                tools = tools.display(),
                report = tool("report.sh"),
            ))
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{what}:\n{stdout}\n{stderr}");
        let inside = labelled(&stdout);
        assert_eq!(inside.len(), 4, "{what}:\n{stdout}\n{stderr}");
        for (rank, (host, gpus, tf)) in &inside {
            let (node_host, node_gpus, node_tf) = &on_node[rank];
            assert_eq!(host, node_host, "{what}: rank {rank}");
            let (want_gpus, want_tf) = match sees {
                Sees::Own => (node_gpus.clone(), Some(without_ports(node_tf.as_ref()))),
                Sees::Nothing => ("-".to_string(), None),
                Sees::Image => (
                    IMAGE_GPUS.to_string(),
                    Some(serde_json::from_str(IMAGE_TF_CONFIG).unwrap()),
                ),
            };
            let got_tf = match sees {
                Sees::Own => tf.as_ref().map(|tf| without_ports(Some(tf))),
                _ => tf.clone(),
            };
            assert_eq!((gpus, got_tf), (&want_gpus, want_tf), "{what}: rank {rank}");
        }
    }
}

/// Real TensorFlow in the hardest case: `--containall` (a clean environment, its own /tmp and
/// PID namespace) in the image that defines TF_CONFIG and CUDA_VISIBLE_DEVICES itself, the
/// TensorFlow virtualenv bound in, with apptainer as the task's program and started by a wrapper
/// script. MultiWorkerMirroredStrategy trains across two nodes and every task ends with the
/// same weights.
#[test]
#[ignore = "needs the test cluster, apptainer and TensorFlow: run tests/run.sh"]
fn multi_worker_mirrored_strategy_trains_in_apptainer_with_containall() {
    let venv = tf_venv();
    // Bound at a path of the image's own: under --containall the image's /tmp and /var/tmp are
    // new and empty, so a virtualenv there (TFC_TF_VENV=/var/tmp/...) has no mount point.
    for start in [Start::Program, Start::Script] {
        let out = sh(&format!(
            "srun -t 5 -w n011,n012 -N2 -n3 --tf-cluster=chief:1,worker:* {}",
            start.command(&format!(
                "--userns --containall --bind {tools} --bind {venv}:/opt/tf-venv {images}/defines \
                 /opt/tf-venv/bin/python {program}",
                tools = dir().join("tools").display(),
                images = images(),
                program = tool("mwms_train.py"),
            ))
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{start:?}:\n{stdout}\n{stderr}");
        let results = common::cluster::records(&stdout, "RESULT");
        let mut roles: Vec<&str> = results.iter().map(|r| r[0]).collect();
        roles.sort();
        assert_eq!(roles, ["chief", "worker", "worker"], "{start:?}: {stdout}");
        let finals: std::collections::HashSet<(&str, &str)> =
            results.iter().map(|r| (r[2], r[3])).collect();
        assert_eq!(finals.len(), 1, "{start:?}: the tasks disagree: {finals:?}");
    }
}

/// Keras 2's `model.fit` (TensorFlow's Keras tutorial shape, tests/keras.rs) under `apptainer
/// exec --cleanenv`, started with `srun --export=NONE`: `TF_USE_LEGACY_KERAS` reaches the program
/// only through tfcluster's `keras=2` (as `APPTAINERENV_TF_USE_LEGACY_KERAS`), and every task
/// ends with the same weights in tf_keras. The program is named by its path: `--export=NONE`
/// gives the task no PATH to find it by.
#[test]
#[ignore = "needs the test cluster, apptainer and TensorFlow: run tests/run.sh"]
fn keras_fit_trains_in_apptainer_with_cleanenv_and_keras_2() {
    let venv = tf_venv();
    let out = sh(&format!(
        "srun -t 5 --export=NONE -w n011,n012 -N2 -n2 --tf-cluster=worker:*,keras=2 /usr/bin/apptainer exec \
         --userns --cleanenv --bind {tools} --bind {venv}:/opt/tf-venv {images}/plain \
         /opt/tf-venv/bin/python {program}",
        tools = dir().join("tools").display(),
        images = images(),
        program = tool("keras_mwms.py"),
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let results = common::cluster::records(&stdout, "RESULT");
    assert_eq!(results.len(), 2, "{stdout}");
    let finals: std::collections::HashSet<(&str, &str)> =
        results.iter().map(|r| (r[2], r[3])).collect();
    assert_eq!(finals.len(), 1, "the tasks disagree: {finals:?}");
    for r in &results {
        assert_eq!(r[7], "tf_keras 2.21.0", "tf.keras inside the container");
    }
}

/// The TensorFlow virtualenv's folder (TFC_PYTHON is its `bin/python`), to bind into images.
fn tf_venv() -> String {
    let python = std::env::var("TFC_PYTHON").expect("TFC_PYTHON (tests/run.sh sets it)");
    std::path::Path::new(&python)
        .parent()
        .and_then(|bin| bin.parent())
        .unwrap()
        .display()
        .to_string()
}
