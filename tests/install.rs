//! Installing tfcluster as a site would: `make install` (into a DESTDIR and into a prefix the
//! test cluster loads through an `include`d snippet), the Debian package (dpkg -i, a step, dpkg
//! -r), and a plugin built for another Slurm release being refused with Slurm's message (the
//! RPM, built from the source tarball: tests/rpm.rs).
//! Needs root and the test cluster; tests/run.sh runs these on every release, and every
//! command here (make, dpkg) runs on that release's system (the release's Debian root).

mod common;
use common::cluster::{cluster_sh, dir, epilogs_done, plugin, records, sh, tool, PlugStack};
use common::release::{self, Install};
use std::path::Path;
use std::process::Command;
use tfcluster::core::claims::{CLAIMS_DIR, LOCK_FILE};
use tfcluster::core::isolation::handover::{HELD_DIR, TOLD_FILE};
use tfcluster::core::run_dir::RUN_DIR;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a command line on the release's system; its stdout and stderr, after checking it worked.
fn run(line: &str) -> String {
    let out = sh(line);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{line} failed:\n{text}");
    text
}

fn make(args: &[&str]) -> String {
    run(&format!(
        "make -s -C {} {}",
        root().display(),
        args.join(" ")
    ))
}

/// True when `path` is a file on the release's system.
fn exists(path: &str) -> bool {
    sh(&format!("test -f {path}")).status.success()
}

/// Runs a 2-task step with --tf-cluster and returns its TF_CONFIG lines.
fn step_tf_configs() -> Vec<String> {
    // Returns once the job has left squeue, its epilog run, and checks that the packaged
    // snippet's isolate=yes left no table on any node. The caller then puts plugstack.conf back
    // and removes the plugin: an epilog that found neither would leave that table behind.
    let out = sh(&format!(
        "srun -N1 -n2 --tf-cluster=chief:1,worker:1 {}; s=$?
for i in $(seq 300); do [ -z \"$(squeue -h)\" ] && break; sleep 0.1; done
for n in $(sinfo -h -N -o %N | sort -u); do
    echo \"TABLES|$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | awk '/tfcluster_/ {{print $3}}' | paste -sd,)\"
done; exit $s",
        tool("report.sh")
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let what = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what}");
    let tables = records(&stdout, "TABLES");
    assert!(
        !tables.is_empty() && tables.iter().all(|r| r[1].is_empty()),
        "tables left after the job: {what}"
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
    let plugin = format!("PLUGIN={}", plugin());
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
         # isolate=yes: a firewall per step keeps other users from its TensorFlow servers (needs libnftables; restart slurmd after enabling it)\n\
         # optional: a missing or mismatched plugin file never fails jobs that do not use --tf-cluster (spank-tfcluster(8))\n\
         optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_tfcluster.so isolate=yes\n"
    );
    assert!(dest
        .join("usr/share/tfcluster/plugstack.conf.example")
        .is_file());
    assert!(dest.join("usr/share/man/man8/spank-tfcluster.8").is_file());
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
        .contains("optional /usr/lib/"));
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
        &format!("PLUGIN={}", plugin()),
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

/// The admin's settings file the packages install once and keep through upgrades.
const ADMIN_CONF: &str = "/etc/tfcluster/tfcluster.conf";

/// The nodes the lifecycle test's jobs run on.
const NODES: &str = "n011,n012";

/// The admin guide's Operate section, in its order, as the site installs it: Debian's Slurm
/// gets tfcluster's .deb (`dpkg -i`), a Slurm built from source `make install`, which finds its
/// plugin directory (/usr/local/lib/slurm). Enabled (the packaged snippet: `optional ...
/// isolate=yes`), slurmd restarted, a job runs; a newer build is installed while a job runs (the
/// .deb repackaged at a higher version: dpkg's upgrade; `make install` again): the running job
/// keeps its firewall and ends well; slurmd restarted, it says it loaded the plugin, and the
/// next step runs through it; the .deb rolled back to the previous package (a downgrade),
/// slurmd restarted, and a step runs again, the admin's file kept; then removed in order (the plugstack line, slurmd restarted, the
/// package), and nothing of tfcluster is left: no table on any node, no file under
/// /run/tfcluster (removed as the guide says, once no job runs), no plugstack line.
#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn install_upgrade_and_removal_in_the_documented_order() {
    let release = release::current();
    let plugin_var = format!("PLUGIN={}", plugin());
    let (installed, install, upgrade, remove, purge, rollback) = match release.install {
        Install::DebianPackage => {
            let deb = make(&["deb", &plugin_var]);
            let deb = deb.trim().to_string();
            assert!(
                deb.ends_with(&format!(
                    "slurm-spank-tfcluster_{}+slurm{}_amd64.deb",
                    env!("CARGO_PKG_VERSION"),
                    release.version
                )),
                "{deb}"
            );
            // The admin's settings file, which dpkg keeps as the admin edited it.
            assert_eq!(
                run(&format!("dpkg-deb -I {deb} conffiles")),
                format!("{ADMIN_CONF}\n")
            );
            let info = run(&format!("dpkg-deb -f {deb} Version Depends Suggests"));
            // libnftables: what isolate=yes, on in the packaged snippet, loads
            // (docs/isolation.md).
            assert_eq!(
                info,
                format!(
                    "Version: {version}+slurm{v}\nDepends: slurm-wlm-basic-plugins (>= {v}), slurm-wlm-basic-plugins (<< {n}), libnftables1\n",
                    version = env!("CARGO_PKG_VERSION"),
                    v = release.version,
                    n = release.next()
                )
            );
            // A newer build: the same package at a higher version, which dpkg installs as an
            // upgrade (each file unpacked beside the old one and renamed over it).
            let newer = format!("{}.1+slurm{}", env!("CARGO_PKG_VERSION"), release.version);
            let newer_deb = dir().join(format!("slurm-spank-tfcluster_{newer}_amd64.deb"));
            let d = dir().join("newer-deb");
            run(&format!(
                "rm -rf {d}; dpkg-deb -R {deb} {d} && sed -i 's/^Version: .*/Version: {newer}/' {d}/DEBIAN/control && dpkg-deb -b {d} {n} >/dev/null",
                d = d.display(),
                n = newer_deb.display()
            ));
            (
                "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_tfcluster.so",
                format!("dpkg -i {deb}"),
                format!(
                    "dpkg -i {} && test \"$(dpkg-query -W -f '${{Version}}' slurm-spank-tfcluster)\" = {newer}",
                    newer_deb.display()
                ),
                "dpkg -r slurm-spank-tfcluster".to_string(),
                Some("dpkg --purge slurm-spank-tfcluster"),
                // 5b. Rolled back: the previous package again, which dpkg installs as a
                // downgrade (with a warning).
                Some(format!(
                    "dpkg -i {deb} && test \"$(dpkg-query -W -f '${{Version}}' slurm-spank-tfcluster)\" = {}+slurm{}",
                    env!("CARGO_PKG_VERSION"),
                    release.version
                )),
            )
        }
        Install::FromSource => {
            let install = format!("make -s -C {} install {plugin_var}", root().display());
            (
                "/usr/local/lib/slurm/spank_tfcluster.so",
                install.clone(),
                install,
                format!("make -s -C {} uninstall", root().display()),
                None,
                None,
            )
        }
        // Built from the source tarball, installed and removed by tests/rpm.rs.
        Install::Rpm => return,
    };
    let cluster = cluster_sh();
    let nodes = NODES.replace(',', " ");
    // 1. Install; 2. enable; 3. restart slurmd.
    run(&install);
    let ok = exists(installed);
    // Both install under /usr (make install's default PREFIX).
    let man = "/usr/share/man/man8/spank-tfcluster.8";
    let man_installed = exists(man);
    // The package's admin file, edited as a site sets a setting: it survives the upgrade below
    // (a source install enables the snippet under /usr/share; `make install-config` keeps its
    // own copy, tested above).
    let enabled = match purge {
        Some(_) => {
            run(&format!(
                "sed -i 's/isolate=yes$/isolate=yes port_base=24000/' {ADMIN_CONF}"
            ));
            ADMIN_CONF
        }
        None => "/usr/share/tfcluster/tfcluster.conf",
    };
    let stack = PlugStack::set(&format!("include {enabled}"));
    run(&format!("{cluster} restart-slurmd {nodes}"));
    // 4. A newer build installed while a job runs, which holds its firewall through it.
    let d = dir().join("upgrade-while-running");
    let d = d.display();
    let during = run(&format!(
        "rm -rf {d}; mkdir -m 1777 {d}
srun -N2 -n2 -w {NODES} -t 2 --tf-cluster=worker:* bash -c 'echo $SLURM_JOB_ID >{d}/job; touch {d}/ready.$SLURM_PROCID; for i in $(seq 300); do [ -e {d}/upgraded ] && break; sleep 0.1; done; echo \"TASK|$SLURM_PROCID|$TF_CONFIG\"' >{d}/out 2>&1 &
step=$!
for i in $(seq 300); do [ -e {d}/ready.0 ] && [ -e {d}/ready.1 ] && break; sleep 0.1; done
{upgrade} >&2
for n in {nodes}; do echo \"DURING|$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | grep -c \"tfcluster_$(cat {d}/job)_\")\"; done
touch {d}/upgraded; wait $step; echo \"STEP|$?\"; cat {d}/out"
    ));
    assert_eq!(records(&during, "STEP"), [["0"]], "{during}");
    assert_eq!(records(&during, "TASK").len(), 2, "{during}");
    assert_eq!(
        records(&during, "DURING"),
        [["n011", "1"], ["n012", "1"]],
        "the running job's own tables after the upgrade: {during}"
    );
    // 5. slurmd restarted: it says it loaded the plugin, and the next step runs through it.
    let seen = slurmd_lines(&nodes);
    run(&format!("{cluster} restart-slurmd {nodes}"));
    let loaded = release.loaded_line();
    for (node, from) in &seen {
        let log = std::fs::read_to_string(dir().join(format!("log/slurmd-{node}.log"))).unwrap();
        let new: String = log.lines().skip(*from).collect::<Vec<_>>().join("\n");
        assert!(
            new.contains(&loaded),
            "{node}'s slurmd after the restart: {new}"
        );
    }
    let mut configs = step_tf_configs();
    // 5b. Rolled back to the previous package, slurmd restarted: the next step runs through it.
    if let Some(rollback) = &rollback {
        run(rollback);
        run(&format!("{cluster} restart-slurmd {nodes}"));
        configs.extend(step_tf_configs());
    }
    let edited = run(&format!("cat {enabled}"));
    // 6. Removed in order: the plugstack line, slurmd restarted, the package; then
    // /run/tfcluster, once no job runs.
    drop(stack);
    run(&format!("{cluster} restart-slurmd {nodes}"));
    run(&remove);
    // dpkg -r keeps the admin's file; --purge removes it.
    let kept = purge.map(|purge| {
        let kept = exists(ADMIN_CONF);
        run(purge);
        kept
    });
    let left = run(&format!(
        "for n in $(sinfo -h -N -o %N | sort -u); do echo \"TABLES|$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | grep -c tfcluster_)\"; done
echo \"RUN|$(find {RUN_DIR} -type f 2>/dev/null | sort | paste -sd,)\"
rm -rf {RUN_DIR}"
    ));
    assert!(ok, "{install}: the plugin is in Slurm's plugin directory");
    assert!(man_installed, "{install}: {man}");
    assert!(!exists(man), "{remove} removes {man}");
    assert_eq!(
        configs.len(),
        2 * (1 + usize::from(rollback.is_some())),
        "{configs:?}"
    );
    if let Some(kept) = kept {
        assert!(
            edited.contains("isolate=yes port_base=24000\n"),
            "{ADMIN_CONF} after the upgrade:\n{edited}"
        );
        assert!(
            configs.iter().all(|c| c.contains(":24000\"")),
            "the edited setting applies: {configs:?}"
        );
        assert!(kept, "{remove} keeps {ADMIN_CONF}");
        assert!(!exists(ADMIN_CONF), "dpkg --purge removes {ADMIN_CONF}");
    }
    assert!(!exists(installed), "{remove} removes it");
    assert!(!exists("/usr/share/tfcluster/tfcluster.conf"), "{remove}");
    assert!(
        records(&left, "TABLES").iter().all(|r| r[1] == "0"),
        "tables left: {left}"
    );
    // What step 6e removes: each node's lock of its port claims, and its note that slurmd's
    // log has said once that nothing holds ended tables there (this cluster runs without
    // `PrologFlags=Contain`), of this test's nodes and of every node the suites before it used;
    // no step's or job's file.
    let node_file = |path: &str, dir: &str, name: &str| {
        path.strip_prefix(&format!("{dir}/"))
            .and_then(|rest| rest.strip_suffix(&format!("/{name}")))
            .is_some_and(|node| !node.is_empty() && !node.contains('/'))
    };
    let files = &records(&left, "RUN")[0][0];
    let unexpected: Vec<&str> = files
        .split(',')
        .filter(|f| !f.is_empty())
        .filter(|f| !node_file(f, CLAIMS_DIR, LOCK_FILE) && !node_file(f, HELD_DIR, TOLD_FILE))
        .collect();
    assert!(
        unexpected.is_empty(),
        "left under {RUN_DIR}: {unexpected:?} (of {files})"
    );
}

/// Each of `nodes`' slurmd log's line count now (the lines after it are a restart's).
fn slurmd_lines(nodes: &str) -> Vec<(String, usize)> {
    nodes
        .split(' ')
        .map(|n| {
            let log = std::fs::read_to_string(dir().join(format!("log/slurmd-{n}.log")))
                .unwrap_or_default();
            (n.to_string(), log.lines().count())
        })
        .collect()
}

#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn a_plugin_built_for_another_release_is_refused_by_slurm() {
    // The same sources, built for another Slurm release (as a site would for its release).
    let release = release::current();
    let (so, other) = release::built_for_another_release();
    let version = run(&format!(
        "{} {}",
        root().join("packaging/plugin-version.sh").display(),
        so.display()
    ));
    assert_eq!(version, format!("{other}\n"));

    // The release under test refuses it: with `optional` the job still runs, the option does
    // not exist.
    let stack = PlugStack::set(&format!("optional {}", so.display()));
    let optional = sh("srun -N1 -n1 true");
    let with_option = sh("srun -N1 -n1 --tf-cluster true");
    drop(stack);
    // The `required` line would fail the optional job's epilog, still to come, and drain its node.
    epilogs_done();
    let stack = PlugStack::set(&format!("required {}", so.display()));
    let required = sh("srun -N1 -n1 true");
    drop(stack);
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(optional.status.success());
    let refused = release
        .optional_other_release
        .replace("{so}", &so.display().to_string())
        .replace("{version}", other);
    assert!(
        stderr(&optional).contains(&refused),
        "{refused:?} in {}",
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

#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn a_package_for_schedmds_own_slurm_packages() {
    // SchedMD's slurm-smd packages keep plugins in /usr/lib/<triplet>/slurm, and conflict with
    // Debian's slurm-wlm ones: a site that runs them gets a package that depends on them.
    let release = release::current();
    let deb = run(&format!(
        "SLURM_PACKAGE=slurm-smd bash {} {} {}",
        root().join("packaging/build-deb.sh").display(),
        plugin(),
        dir().join("deb-smd").display()
    ));
    let deb = deb.trim();
    assert_eq!(
        run(&format!("dpkg-deb -f {deb} Depends")),
        format!(
            "slurm-smd (>= {v}), slurm-smd (<< {n}), libnftables1\n",
            v = release.version,
            n = release.next()
        )
    );
    assert!(
        run(&format!("dpkg-deb -c {deb}"))
            .contains("./usr/lib/x86_64-linux-gnu/slurm/spank_tfcluster.so"),
        "{deb}"
    );
}

/// Files a Slurm installation has, the plugin directory make install detects, and what it says
/// it found (on stderr, which make shows).
struct PluginDir {
    files: &'static [&'static str],
    dir: &'static str,
    says: &'static str,
}

#[rustfmt::skip]
const PLUGIN_DIRS: &[PluginDir] = &[
    // Debian, Ubuntu
    PluginDir { files: &["usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so"], dir: "/usr/lib/x86_64-linux-gnu/slurm-wlm",
                says: "slurm-plugin-dir: Slurm's plugins are in /usr/lib/x86_64-linux-gnu/slurm-wlm (it holds libslurmfull.so); SLURM_PLUGIN_DIR=... overrides" },
    // SchedMD's slurm-smd debs
    PluginDir { files: &["usr/lib/x86_64-linux-gnu/slurm/libslurmfull.so"],     dir: "/usr/lib/x86_64-linux-gnu/slurm",
                says: "slurm-plugin-dir: Slurm's plugins are in /usr/lib/x86_64-linux-gnu/slurm (it holds libslurmfull.so); SLURM_PLUGIN_DIR=... overrides" },
    // RPM
    PluginDir { files: &["usr/lib64/slurm/select_cons_tres.so"],                dir: "/usr/lib64/slurm",
                says: "slurm-plugin-dir: Slurm's plugins are in /usr/lib64/slurm (it holds select_cons_tres.so); SLURM_PLUGIN_DIR=... overrides" },
    // built from source
    PluginDir { files: &["usr/local/lib/slurm/libslurmfull.so"],                dir: "/usr/local/lib/slurm",
                says: "slurm-plugin-dir: Slurm's plugins are in /usr/local/lib/slurm (it holds libslurmfull.so); SLURM_PLUGIN_DIR=... overrides" },
    PluginDir { files: &["usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so", "usr/lib/x86_64-linux-gnu/slurm/other.so"],
                dir: "/usr/lib/x86_64-linux-gnu/slurm-wlm",
                says: "slurm-plugin-dir: Slurm's plugins are in /usr/lib/x86_64-linux-gnu/slurm-wlm (it holds libslurmfull.so); SLURM_PLUGIN_DIR=... overrides" },
    // nothing: no directory, and the line says what to do
    PluginDir { files: &["usr/lib/other/readme"], dir: "",
                says: "slurm-plugin-dir: no Slurm plugin directory found; set SLURM_PLUGIN_DIR=..." },
];

#[test]
fn the_plugin_directory_of_each_packaging() {
    for PluginDir { files, dir, says } in PLUGIN_DIRS {
        let fake = tempdir("plugin-dir");
        for f in *files {
            let path = fake.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let out = Command::new(root().join("packaging/slurm-plugin-dir.sh"))
            .env("SLURM_ROOT", &fake)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            *dir,
            "{files:?}"
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim_end(),
            *says,
            "{files:?}"
        );
        std::fs::remove_dir_all(&fake).unwrap();
    }
}

/// An empty directory of its own under the test's temporary directory.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
