//! Installing tfcluster as a site would: `make install` (into a DESTDIR and into a prefix the
//! test cluster loads through an `include`d snippet), the Debian package (dpkg -i, a step, dpkg
//! -r), and a plugin built for another Slurm release being refused with Slurm's message.
//! Needs root and the test cluster; tests/run.sh runs these.

mod common;
use common::cluster::{dir, sh, tool, PlugStack};
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn debug_plugin() -> String {
    root()
        .join("target/debug/libtfcluster.so")
        .display()
        .to_string()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn make(args: &[&str]) -> String {
    run(Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(root())
        .args(args))
}

/// Runs a 2-task step with --tf-cluster and returns its TF_CONFIG lines.
fn step_tf_configs() -> Vec<String> {
    let out = sh(&format!(
        "srun -N1 -n2 --tf-cluster=chief:1,worker:1 {}",
        tool("report.sh")
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter(|l| l.starts_with("TASK|"))
        .map(|l| l.rsplit('|').next().unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn make_install_into_a_destdir() {
    let dest = dir().join("destdir");
    let _ = std::fs::remove_dir_all(&dest);
    let destdir = format!("DESTDIR={}", dest.display());
    let plugin = format!("PLUGIN={}", debug_plugin());
    make(&[
        "install",
        &destdir,
        &plugin,
        "SLURM_PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm",
    ]);
    let so = dest.join("usr/lib/x86_64-linux-gnu/slurm-wlm/spank_tfcluster.so");
    assert!(so.is_file());
    assert_eq!(
        std::fs::read_to_string(dest.join("usr/share/tfcluster/tfcluster.conf")).unwrap(),
        "# tfcluster: link or copy into /etc/slurm/plugstack.conf.d/ to enable\n\
         required /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_tfcluster.so\n"
    );
    assert!(dest
        .join("usr/share/tfcluster/plugstack.conf.example")
        .is_file());
    assert!(!dest.join("etc").exists(), "make install activates nothing");

    // install-config puts the snippet in plugstack.conf.d once, and never overwrites it.
    let args = [
        "install-config",
        &destdir,
        &plugin,
        "SLURM_PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm",
    ];
    make(&args);
    let snippet = dest.join("etc/slurm/plugstack.conf.d/tfcluster.conf");
    assert!(std::fs::read_to_string(&snippet)
        .unwrap()
        .contains("required /usr/lib/"));
    std::fs::write(
        &snippet,
        "required /site/path/spank_tfcluster.so port_base=9000\n",
    )
    .unwrap();
    assert!(make(&args).contains("keeping the existing"));
    assert_eq!(
        std::fs::read_to_string(&snippet).unwrap(),
        "required /site/path/spank_tfcluster.so port_base=9000\n"
    );
    let _ = std::fs::remove_dir_all(&dest);
}

#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn an_installed_plugin_runs_through_an_included_snippet() {
    let prefix = dir().join("prefix");
    let _ = std::fs::remove_dir_all(&prefix);
    make(&[
        "install",
        &format!("PREFIX={}", prefix.display()),
        &format!("SLURM_PLUGIN_DIR={}/lib/slurm", prefix.display()),
        &format!("PLUGIN={}", debug_plugin()),
    ]);
    let stack = PlugStack::set(&format!(
        "include {}/share/tfcluster/tfcluster.conf",
        prefix.display()
    ));
    let configs = step_tf_configs();
    drop(stack);
    assert_eq!(configs.len(), 2);
    assert!(
        configs
            .iter()
            .all(|c| c.starts_with("{\"cluster\":{\"chief\":[")),
        "{configs:?}"
    );
    let _ = std::fs::remove_dir_all(&prefix);
}

#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn the_debian_package_installs_runs_and_removes() {
    let out = dir().join("deb");
    let deb = run(Command::new("bash")
        .arg(root().join("packaging/build-deb.sh"))
        .arg(debug_plugin())
        .arg(&out));
    let deb = deb.trim();
    assert!(
        deb.ends_with("slurm-spank-tfcluster_0.1.0+slurm22.05_amd64.deb"),
        "{deb}"
    );
    let info = run(Command::new("dpkg-deb").args(["-f", deb, "Version", "Depends"]));
    assert_eq!(
        info,
        "Version: 0.1.0+slurm22.05\nDepends: slurm-wlm-basic-plugins (>= 22.05), slurm-wlm-basic-plugins (<< 22.06)\n"
    );
    run(Command::new("dpkg").args(["-i", deb]));
    let installed = Path::new("/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_tfcluster.so");
    let ok = installed.is_file();
    let stack = PlugStack::set("include /usr/share/tfcluster/tfcluster.conf");
    let configs = step_tf_configs();
    drop(stack);
    run(Command::new("dpkg").args(["-r", "slurm-spank-tfcluster"]));
    assert!(
        ok,
        "the package installs the plugin in Slurm's plugin directory"
    );
    assert_eq!(configs.len(), 2, "{configs:?}");
    assert!(!installed.exists(), "dpkg -r removes it");
}

#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn a_plugin_built_for_another_release_is_refused_by_slurm() {
    // The same sources, built for Slurm 23.02 (as a site would for its release).
    let target = root().join("target/slurm-23.02");
    run(Command::new("cargo")
        .args(["build", "--quiet", "--lib", "--target-dir"])
        .arg(&target)
        .current_dir(root())
        .env("TFCLUSTER_SLURM_VERSION", "23.02"));
    let so = target.join("debug/libtfcluster.so");
    let version = run(Command::new(root().join("packaging/plugin-version.sh")).arg(&so));
    assert_eq!(version, "23.02\n");

    // Slurm 22.05 refuses it: with `optional` the job still runs, the option does not exist.
    let stack = PlugStack::set(&format!("optional {}", so.display()));
    let optional = sh("srun -N1 -n1 true");
    let with_option = sh("srun -N1 -n1 --tf-cluster true");
    drop(stack);
    let stack = PlugStack::set(&format!("required {}", so.display()));
    let required = sh("srun -N1 -n1 true");
    drop(stack);
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let refused = format!(
        "srun: error: spank: {}: Incompatible plugin version",
        so.display()
    );
    assert!(optional.status.success());
    assert!(
        stderr(&optional).contains(&refused),
        "{}",
        stderr(&optional)
    );
    assert_eq!(with_option.status.code(), Some(255));
    assert!(
        stderr(&with_option).contains("srun: unrecognized option '--tf-cluster'"),
        "{}",
        stderr(&with_option)
    );
    assert_eq!(required.status.code(), Some(1));
    assert!(
        stderr(&required).contains("srun: error: Plug-in initialization failed"),
        "{}",
        stderr(&required)
    );
}
