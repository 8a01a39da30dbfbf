//! The admin guide's plugstack advice, tested: with the plugin `required` and `optional`, what
//! srun and sbatch do, with and without `--tf-cluster`, when the plugin file is missing on one
//! compute node, missing on the login host (where srun and sbatch run), or built for another
//! Slurm release. Needs root and the test cluster; tests/run.sh runs it on every release.

mod common;
use common::cluster::{cluster_sh, dir, plugin, sh, sh_ok, tool, PlugStack};
use common::plugstack::{Case, Fault, Job, CASES};
use common::release;
use std::path::PathBuf;
use tfcluster::core::tf_config::NOT_SET_ON_THIS_NODE;

/// A copy of the plugin in a directory of its own, which a fault can hide from one place.
fn plugin_dir() -> PathBuf {
    dir().join("plugstack-faults")
}

/// The plugin file a line of plugstack.conf names for `fault`, made ready.
fn prepare(fault: Fault) -> PathBuf {
    let d = plugin_dir();
    std::fs::create_dir_all(&d).unwrap();
    let so = d.join("libtfcluster.so");
    let source = match fault {
        Fault::AnotherRelease => release::built_for_another_release().0,
        _ => PathBuf::from(plugin()),
    };
    std::fs::copy(source, &so).unwrap();
    so
}

/// Hides the plugin's directory where `fault` says, until dropped.
struct Hidden(Option<String>);

impl Hidden {
    fn make(fault: Fault) -> Hidden {
        let d = plugin_dir().display().to_string();
        let mount_ns = match fault {
            Fault::MissingOnOneNode => {
                let pid = std::fs::read_to_string(dir().join("slurmd-n012.run.pid")).unwrap();
                format!("nsenter --mount --target {} ", pid.trim())
            }
            Fault::MissingOnTheLoginHost => String::new(),
            Fault::AnotherRelease => return Hidden(None),
        };
        let out = sh(&format!("{mount_ns}mount -t tmpfs tfc-hidden {d}"));
        assert!(out.status.success(), "{:?}", out);
        Hidden(Some(format!("{mount_ns}umount {d}")))
    }
}

impl Drop for Hidden {
    fn drop(&mut self) {
        if let Some(undo) = &self.0 {
            sh(undo);
        }
    }
}

/// What one command did: its exit status, each task that ran (by rank, and what its TF_CONFIG
/// was: `json`, `placeholder` for the text srun puts there, `-` unset), and n012's state after
/// it, as one line: `exit 0 | 0:json 1:placeholder | idle`. And its stderr.
fn outcome(line: &str) -> (String, String) {
    // n012 back from a drain the last case caused, and idle (10 s at most).
    sh("scontrol update nodename=n012 state=resume 2>/dev/null
        for i in $(seq 100); do [ \"$(sinfo -h -n n012 -o %T | head -1)\" = idle ] && break; sleep 0.1; done");
    let out = sh(line);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut tasks: Vec<(u32, &str)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("TASK|"))
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '|').collect();
            let tf = match f[3] {
                "-" => "-",
                t if t == NOT_SET_ON_THIS_NODE => "placeholder",
                _ => "json",
            };
            (f[0].parse().unwrap(), tf)
        })
        .collect();
    tasks.sort();
    let tasks: Vec<String> = tasks.iter().map(|(r, tf)| format!("{r}:{tf}")).collect();
    // Once the job's epilog has run on n012 (a drain comes from it): not while it completes.
    let state = String::from_utf8_lossy(
        &sh(
            "for i in $(seq 150); do s=$(sinfo -h -n n012 -o %T | head -1); \
             case $s in *comp*) sleep 0.1 ;; *) break ;; esac; done; echo $s",
        )
        .stdout,
    )
    .trim()
    .to_string();
    let code = out.status.code().unwrap_or(-1);
    (
        format!("exit {code} | {} | {state}", tasks.join(" ")),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Job {
    fn line(self) -> String {
        let report = tool("report.sh");
        let out = dir().join("plugstack-faults.out");
        let out = out.display();
        match self {
            Job::TfCluster => format!("srun -w n011,n012 -N2 -n2 -t 1 --tf-cluster {report}"),
            Job::Plain => format!("srun -w n011,n012 -N2 -n2 -t 1 {report}"),
            Job::Batch => format!(
                "rm -f {out}; sbatch --wait -w n011,n012 -N2 -n2 -t 1 -o {out} --wrap 'srun {report}'; s=$?; cat {out}; exit $s"
            ),
        }
    }
}

#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn what_each_fault_does_to_each_job() {
    let release = release::current();
    let missing = match release.optional_missing_quiet {
        true => "",
        false => "cannot open shared object file",
    };
    let mut wrong = Vec::new();
    for &Case {
        fault,
        kind,
        job: command,
        outcome: expected,
        says,
    } in CASES
    {
        let expected = expected.replace("{launch}", &release.launch_failure_status.to_string());
        let says = says.replace("{missing}", missing);
        let so = prepare(fault);
        let stack = PlugStack::set(&format!("{kind} {} end_with_chief=no", so.display()));
        let hidden = Hidden::make(fault);
        let (got, stderr) = outcome(&command.line());
        drop(hidden);
        drop(stack);
        if got != expected || !stderr.contains(&says) {
            wrong.push(format!(
                "{fault:?} {kind} {command:?}: {got} (want {expected}), says {says:?}:\n{stderr}"
            ));
        }
    }
    sh("scontrol update nodename=n012 state=resume 2>/dev/null");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One configless setup ([`CONFIGLESS`]): slurmctld serves the configuration, compute node n012
/// fetches it and has no configuration folder of its own.
struct Configless {
    what: &'static str,
    /// slurm.conf keeps `PlugStackConfig`, an absolute path (the cluster's configuration
    /// folder, which n012 does not have).
    plugstack_config: bool,
    /// slurmctld's plugstack.conf (the node reads the copy slurmctld ships, as the `include`
    /// rows show): `{so}` the plugin, `{share}` a folder every node has (where the packages put
    /// their snippet). `tfcluster.conf` beside plugstack.conf holds the
    /// plugin's line, on slurmctld's host only.
    plugstack: &'static str,
    /// What n012's task gets: its TF_CONFIG (`json`), srun's placeholder (`placeholder`: the
    /// node did not load the plugin), or `{includes}` where the release decides (`json` where
    /// slurmctld ships the included file, `placeholder` before).
    task: &'static str,
}

#[rustfmt::skip]
const CONFIGLESS: &[Configless] = &[
    Configless { what: "PlugStackConfig names a folder the node lacks", plugstack_config: true,  plugstack: "optional {so}",                  task: "placeholder" },
    Configless { what: "an include of the snippet every node has",      plugstack_config: false, plugstack: "include {share}/tfcluster.conf", task: "json" },
    Configless { what: "an include of a file beside plugstack.conf",    plugstack_config: false, plugstack: "include tfcluster.conf",         task: "{includes}" },
];

/// Puts n012 and slurmctld back to the cluster's own files, also when a row fails.
struct Configured(String);

impl Drop for Configured {
    fn drop(&mut self) {
        sh(&format!("{} configured n012", self.0));
    }
}

/// Configless Slurm (`SlurmctldParameters=enable_configless`, admin guide: enabling it): a node
/// that fetches its configuration loads tfcluster from the plugstack.conf slurmctld ships, as long
/// as slurm.conf's `PlugStackConfig` does not name a path the node lacks, and an `include`
/// reaches a file there: an absolute path on the node itself (the package's snippet), a path
/// beside plugstack.conf only where slurmctld ships it (23.11 and later).
#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn a_configless_node_loads_the_plugin_that_slurmctld_names() {
    let release = release::current();
    let cluster = cluster_sh();
    let (etc, share) = (dir().join("etc"), dir().join("configless-share"));
    std::fs::create_dir_all(&share).unwrap();
    let line = format!("optional {}\n", plugin());
    std::fs::write(share.join("tfcluster.conf"), &line).unwrap();
    std::fs::write(etc.join("tfcluster.conf"), &line).unwrap();
    let _stack = PlugStack::set("# set per row");
    let includes = match release.configless_ships_includes {
        true => "json",
        false => "placeholder",
    };
    let _back = Configured(cluster.clone());
    let mut wrong = Vec::new();
    for row in CONFIGLESS {
        let plugstack = row
            .plugstack
            .replace("{so}", &plugin())
            .replace("{share}", &share.display().to_string());
        std::fs::write(etc.join("plugstack.conf"), format!("{plugstack}\n")).unwrap();
        let keep = if row.plugstack_config { "yes" } else { "no" };
        sh_ok(&format!("{cluster} configless n012 {keep}"));
        // srun reads the plugstack.conf beside the slurm.conf it is given.
        let out = sh(&format!(
            "SLURM_CONF={}/slurm.conf srun -w n012 -N1 -n1 -t 1 --tf-cluster {}",
            etc.display(),
            tool("report.sh")
        ));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let got = match stdout.lines().find_map(|l| l.strip_prefix("TASK|")) {
            Some(task) if task.ends_with(NOT_SET_ON_THIS_NODE) => "placeholder",
            Some(task) if task.ends_with('}') => "json",
            Some(_) => "unset",
            None => "no task",
        };
        let want = row.task.replace("{includes}", includes);
        if got != want {
            wrong.push(format!(
                "{}: n012's task got {got} (want {want}):\n{}",
                row.what,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
