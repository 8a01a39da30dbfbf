//! The Slurm releases the end-to-end tests run on, and what users see differently on each: the
//! only place where a test's expectation depends on the release. tests/release/run.sh names
//! the release under test in TFC_RELEASE (tests/releases.tsv lists the same releases, with the
//! root each runs in; `releases_agree_with_the_runner` keeps the two in step).

/// How a line that slurmstepd forwards to srun's stderr starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepdLine {
    /// `slurmstepd-NODE: error: ...`
    NodeName,
    /// `slurmstepd: error: ...` (SchedMD's builds of 23.02 to 24.05: no node name either).
    Bare,
    /// `[2026-11-22T13:51:01.837] error: ...` (25.05 and later: the node's name is gone, which
    /// is why tfcluster's own messages name the node).
    Timestamp,
}

#[derive(Debug)]
pub struct Release {
    /// major.minor, as in the plugin's `plugin_version` and the package's name.
    pub version: &'static str,
    /// The root the tests run it in (tests/releases.tsv): a Debian suite, or the SchedMD source
    /// release built in Debian 12.
    pub root: &'static str,
    pub stepd_line: StepdLine,
    /// What srun prints for an `optional` plugin built for another release (`{so}`: its path,
    /// `{version}`: the release it was built for).
    pub optional_other_release: &'static str,
    /// How a site installs tfcluster on this release, and so how the install test does.
    pub install: Install,
    /// Whether the tasks tfcluster stops when the chief exits count as successful
    /// (`KILL_NO_SIG_FAIL`, 23.11 and later); before, srun reports them killed (137).
    pub stopped_tasks_succeed: bool,
    /// 26.05 and later: a block step's tasks follow the topology's node ranks.
    pub topology_orders_block_steps: bool,
    /// 23.02 and later: a `--container` task gets the environment plugins set; before, srun
    /// refuses `--tf-cluster` with `--container`.
    pub container_gets_task_env: bool,
    /// 25.11: a heterogeneous job's first component is stopped by a signal to its tasks, which
    /// srun reports killed (a stop of that component's step would cancel the whole job there).
    pub het_leader_signalled: bool,
    /// The root's libnftables is 1.1 or later (trixie, sid): it knows the table flag `persist`,
    /// which slurmstepd gives it where it falls back to libnftables; 1.0.6 (Debian 12, the
    /// source builds' root) does not. The kernel's own messages ask for the flag on every
    /// release ([`kernel_persists`]).
    pub library_persists: bool,
    /// The root has Debian's apptainer (`apptainer` in tests/releases.tsv: packaged from forky
    /// on), so tasks there get its names by default; the others have no container runtime.
    pub has_apptainer: bool,
    /// srun's exit status when a task could not launch on its node (its slurmstepd failed a
    /// `required` plugin) while the others ran and exited 0: 0 up to 23.02, 1 from 23.11.
    pub launch_failure_status: i32,
    /// 25.11 and later: an `optional` plugin whose file is missing is passed over without a
    /// line; before, srun and sbatch print the loader's error.
    pub optional_missing_quiet: bool,
    /// 23.11 and later: configless slurmctld also ships the files plugstack.conf includes by a
    /// path relative to it (Slurm's NEWS for 23.11); an absolute path is read on the node.
    pub configless_ships_includes: bool,
    /// How the release's own slurmd.service starts slurmd (Debian's and SchedMD's units agree):
    /// `-D -s` (`Type=simple`) before 23.11; from 23.11 `--systemd` (`Type=notify`), with which
    /// `scontrol reconfigure` and SIGHUP start a new slurmd process and the old one exits.
    pub slurmd_unit: &'static str,
}

/// How Slurm came onto the release's system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// Debian's slurm-wlm packages: tfcluster's .deb (`make deb`, `dpkg -i`).
    DebianPackage,
    /// SchedMD's source under /usr/local: `make install` finds /usr/local/lib/slurm.
    FromSource,
    /// SchedMD's source laid out as its RPMs lay it out (/usr, /usr/lib64): tfcluster's RPM,
    /// built with `rpmbuild -ta` from its source tarball (tests/rpm.rs).
    Rpm,
}

const INCOMPATIBLE: &str = "srun: error: spank: {so}: Incompatible plugin version";
/// From 25.11: the loader's own line, with the release the plugin was built for.
const INCOMPATIBLE_VERSION: &str =
    "srun: plugin_load_from_file: Incompatible Slurm plugin {so} version ({version}.0)";

#[rustfmt::skip]
pub const RELEASES: &[Release] = &[
    Release { version: "22.05", root: "bookworm", stepd_line: StepdLine::NodeName,
              optional_other_release: INCOMPATIBLE, install: Install::DebianPackage,
              stopped_tasks_succeed: false, topology_orders_block_steps: false,
              container_gets_task_env: false, het_leader_signalled: false,
              library_persists: false, has_apptainer: false,
              launch_failure_status: 0, optional_missing_quiet: false,
              configless_ships_includes: false,
              slurmd_unit: "-D -s" },
    Release { version: "23.02", root: "slurm-23.02.8", stepd_line: StepdLine::Bare,
              optional_other_release: INCOMPATIBLE, install: Install::FromSource,
              stopped_tasks_succeed: false, topology_orders_block_steps: false,
              container_gets_task_env: true, het_leader_signalled: false,
              library_persists: false, has_apptainer: false,
              launch_failure_status: 0, optional_missing_quiet: false,
              configless_ships_includes: false,
              slurmd_unit: "-D -s" },
    Release { version: "23.11", root: "slurm-23.11.11", stepd_line: StepdLine::Bare,
              optional_other_release: INCOMPATIBLE, install: Install::FromSource,
              stopped_tasks_succeed: true, topology_orders_block_steps: false,
              container_gets_task_env: true, het_leader_signalled: false,
              library_persists: false, has_apptainer: false,
              launch_failure_status: 1, optional_missing_quiet: false,
              configless_ships_includes: true,
              slurmd_unit: "--systemd" },
    Release { version: "24.05", root: "slurm-24.05.8", stepd_line: StepdLine::Bare,
              optional_other_release: INCOMPATIBLE, install: Install::FromSource,
              stopped_tasks_succeed: true, topology_orders_block_steps: false,
              container_gets_task_env: true, het_leader_signalled: false,
              library_persists: false, has_apptainer: false,
              launch_failure_status: 1, optional_missing_quiet: false,
              configless_ships_includes: true,
              slurmd_unit: "--systemd" },
    Release { version: "24.11", root: "trixie", stepd_line: StepdLine::NodeName,
              optional_other_release: INCOMPATIBLE, install: Install::DebianPackage,
              stopped_tasks_succeed: true, topology_orders_block_steps: false,
              container_gets_task_env: true, het_leader_signalled: false,
              library_persists: true, has_apptainer: false,
              launch_failure_status: 1, optional_missing_quiet: false,
              configless_ships_includes: true,
              slurmd_unit: "--systemd" },
    Release { version: "25.05", root: "slurm-25.05.8", stepd_line: StepdLine::Timestamp,
              optional_other_release: INCOMPATIBLE, install: Install::FromSource,
              stopped_tasks_succeed: true, topology_orders_block_steps: false,
              container_gets_task_env: true, het_leader_signalled: false,
              library_persists: false, has_apptainer: false,
              launch_failure_status: 1, optional_missing_quiet: false,
              configless_ships_includes: true,
              slurmd_unit: "--systemd" },
    Release { version: "25.11", root: "slurm-25.11.7-rpm", stepd_line: StepdLine::Timestamp,
              optional_other_release: INCOMPATIBLE_VERSION, install: Install::Rpm,
              stopped_tasks_succeed: true, topology_orders_block_steps: false,
              container_gets_task_env: true, het_leader_signalled: true,
              library_persists: false, has_apptainer: false,
              launch_failure_status: 1, optional_missing_quiet: true,
              configless_ships_includes: true,
              slurmd_unit: "--systemd" },
    Release { version: "26.05", root: "sid", stepd_line: StepdLine::Timestamp,
              optional_other_release: INCOMPATIBLE_VERSION, install: Install::DebianPackage,
              stopped_tasks_succeed: true, topology_orders_block_steps: true,
              container_gets_task_env: true, het_leader_signalled: false,
              library_persists: true, has_apptainer: true,
              launch_failure_status: 1, optional_missing_quiet: true,
              configless_ships_includes: true,
              slurmd_unit: "--systemd" },
];

/// The release under test (TFC_RELEASE; Debian 12's 22.05 when unset).
pub fn current() -> &'static Release {
    let version = std::env::var("TFC_RELEASE").unwrap_or_else(|_| "22.05".into());
    RELEASES
        .iter()
        .find(|r| r.version == version)
        .unwrap_or_else(|| panic!("TFC_RELEASE={version}: not in tests/common/release.rs"))
}

impl Release {
    /// The line as this release prints it, for a line written in the table as
    /// `slurmstepd-NODE: error: ...`. Lines srun prints itself pass unchanged.
    pub fn stepd(&self, line: &str) -> String {
        let message = line
            .strip_prefix("slurmstepd-")
            .and_then(|rest| rest.split_once(": "))
            .map(|(_, message)| message);
        match (self.stepd_line, message) {
            (StepdLine::Timestamp, Some(message)) => message.into(),
            (StepdLine::Bare, Some(message)) => format!("slurmstepd: {message}"),
            _ => line.into(),
        }
    }

    /// srun's stderr with each line as `stepd` writes the expected ones: 26.05's timestamps
    /// dropped.
    pub fn stderr_lines(&self, stderr: &str) -> Vec<String> {
        stderr
            .lines()
            .map(|l| match self.stepd_line {
                StepdLine::Timestamp if l.starts_with('[') => {
                    l.split_once("] ").map_or(l, |(_, rest)| rest).to_string()
                }
                _ => l.to_string(),
            })
            .collect()
    }

    /// True when srun's stderr has `line` (written as `slurmstepd-NODE: ...` for node lines).
    pub fn printed(&self, stderr: &str, line: &str) -> bool {
        let want = self.stepd(line);
        self.stderr_lines(stderr).contains(&want)
    }

    /// srun's exit status when the chief exits with `code` and tfcluster stops the other tasks.
    pub fn stopped_step_status(&self, code: i32) -> i32 {
        if self.stopped_tasks_succeed {
            code
        } else {
            128 + 9
        }
    }

    /// A release other than this one, to build a plugin this one must refuse.
    pub fn another(&self) -> &'static Release {
        RELEASES
            .iter()
            .find(|r| r.version != self.version)
            .expect("two releases")
    }

    /// srun's exit statuses when one task ends with `code` (a failure, or the chief's success:
    /// 0) and tfcluster stops the others: that task's from 23.11 (the stopped ones count as
    /// successful); before, 137 (srun keeps the highest signal, and the stopped tasks were
    /// killed) unless the task's own signal is higher (SEGV: 139), or that task's when srun
    /// stops waiting for the others first (seen on 22.05 when a task fails in `task_init`, and
    /// for a ParameterServerStrategy chief that failed or succeeded with the machine busy).
    /// On a cluster with `SlurmdParameters=contain_spank` (tests/cluster/cluster.sh), a task
    /// ended by a signal is stopped from within `task_exit`, before its own status goes out
    /// (src/spank/stop.rs): the stopped tasks' 137 then counts too, as before 23.11.
    pub fn failed_step_statuses(&self, code: i32) -> Vec<i32> {
        let signal = code > 128;
        if self.stopped_tasks_succeed && !(signal && crate::common::cluster::contain_spank()) {
            vec![code]
        } else {
            vec![code, 128 + 9]
        }
    }

    /// The line `srun -v` and slurmd's log print for the plugin built for this release: its
    /// version (Cargo.toml's, as the packages' and the tarball's) and this release.
    pub fn loaded_line(&self) -> String {
        format!(
            "tfcluster: version {} loaded, built for Slurm {}",
            env!("CARGO_PKG_VERSION"),
            self.version
        )
    }

    /// srun's exit statuses when a `--no-kill` step loses a node and then ends with its chief
    /// (tests/tensorflow.rs): srun counts the lost node's tasks as failed with 1, so as for a
    /// task that failed with 1 ([`Self::failed_step_statuses`]; seen: 1 on 26.05, 137 on 22.05).
    pub fn lost_node_statuses(&self) -> Vec<i32> {
        self.failed_step_statuses(1)
    }

    /// srun's exit statuses when tfcluster stops a heterogeneous job's step after a task ended
    /// with `code` (0: the chief's success): as for a plain step ([`Self::stopped_step_status`],
    /// [`Self::failed_step_statuses`]), or, where the first component is signalled, 137 (its
    /// killed tasks) or the failed task's own.
    pub fn het_job_stopped_statuses(&self, code: i32) -> Vec<i32> {
        match (self.het_leader_signalled, code) {
            (true, _) => vec![code, 128 + 9],
            (false, 0) => vec![self.stopped_step_status(0)],
            (false, _) => self.failed_step_statuses(code),
        }
    }

    /// The release after this one (`22.05` -> `22.06`): a package built for this release must
    /// depend on `>= this, << next`.
    pub fn next(&self) -> String {
        let (major, minor) = self.version.split_once('.').unwrap();
        format!("{major}.{:02}", minor.parse::<u32>().unwrap() + 1)
    }
}

/// The plugin built from these sources for another Slurm release than the one under test (as a
/// site would build it for its release), and that release. Every release's run builds it in
/// one directory, `another-release` in the target directory (target/, or the lane's own that
/// tests/run.sh names in CARGO_TARGET_DIR), where only tfcluster itself is compiled again (a
/// directory per other release compiled bindgen and the rest once more: 86 s on 22.05,
/// 2026-11-27); the library is copied out beside it, so a later build leaves it be.
pub fn built_for_another_release() -> (std::path::PathBuf, &'static str) {
    let other = current().another().version;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lane = std::env::var_os("CARGO_TARGET_DIR").map_or(repo.join("target"), |d| repo.join(d));
    let target = lane.join("another-release");
    let built = std::process::Command::new("cargo")
        .args(["build", "--quiet", "--lib", "--target-dir"])
        .arg(&target)
        .current_dir(repo)
        .env("TFCLUSTER_SLURM_VERSION", other)
        .status()
        .unwrap();
    assert!(built.success(), "cargo build for Slurm {other}");
    let so = lane.join(format!("slurm-{other}-other/libtfcluster.so"));
    std::fs::create_dir_all(so.parent().unwrap()).unwrap();
    std::fs::copy(target.join("debug/libtfcluster.so"), &so).unwrap();
    (so, other)
}

/// Whether this machine's kernel keeps a table that asks for it (`flags owner, persist`) after
/// its owner exits: Linux 6.9 or later. slurmstepd asks for it in its own messages, so a step's
/// table outlives a slurmstepd killed with SIGKILL until the job's epilog on every release.
pub fn kernel_persists() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0)) >= (6, 9)
}
