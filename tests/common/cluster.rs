//! Helpers for the tests that run on the real test cluster (tests/cluster/cluster.sh).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

/// The cluster's state directory (TFC_DIR, as for cluster.sh).
pub fn dir() -> PathBuf {
    PathBuf::from(std::env::var("TFC_DIR").unwrap_or_else(|_| "/tmp/tfcluster-cluster".into()))
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
        for sub in ["tests/cluster", "tests/tensorflow"] {
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
        for script in ["report.sh", "decider.sh"] {
            Command::new("chmod")
                .arg("a+x")
                .arg(tools.join(script))
                .status()
                .unwrap();
        }
    });
    tools.join(name).display().to_string()
}

/// Runs a shell command line (bounded in time) from a directory every user can enter, inside
/// the Debian root of the Slurm release under test when there is one (TFC_ROOT, set by
/// tests/release/run.sh): srun, sbatch, make and dpkg are that release's.
pub fn sh(line: &str) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.arg("300");
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
    format!("required {} end_with_chief=no", plugin())
}

/// Replaces the cluster's plugstack.conf (srun and slurmstepd re-read it for every step) and
/// restores the test cluster's line when dropped.
pub struct PlugStack;

impl PlugStack {
    pub fn set(line: &str) -> PlugStack {
        std::fs::write(dir().join("etc/plugstack.conf"), format!("{line}\n")).unwrap();
        PlugStack
    }

    /// The plugin with every setting at its default, as a site installs it.
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
