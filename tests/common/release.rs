//! The Slurm releases the end-to-end tests run on, and what users see differently on each: the
//! only place where a test's expectation depends on the release. tests/release/run.sh names
//! the release under test in TFC_RELEASE (tests/releases.tsv lists the same releases, with the
//! Debian suite each comes from; `releases_agree_with_the_runner` keeps the two in step).

/// How a line that slurmstepd forwards to srun's stderr starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepdLine {
    /// `slurmstepd-NODE: error: ...`
    NodeName,
    /// `[2026-11-22T13:51:01.837] error: ...` (26.05: the node's name is gone, which is why
    /// tfcluster's own messages name the node).
    Timestamp,
}

#[derive(Debug)]
pub struct Release {
    /// major.minor, as in the plugin's `plugin_version` and the package's name.
    pub version: &'static str,
    /// The Debian suite whose packages the tests run (tests/releases.tsv).
    pub suite: &'static str,
    pub stepd_line: StepdLine,
    /// What srun prints for an `optional` plugin built for another release (`{so}`: its path);
    /// 25.11 turned the error into an info line.
    pub optional_other_release: &'static str,
    /// Whether the tasks tfcluster stops when the chief exits count as successful
    /// (`KILL_NO_SIG_FAIL`, 23.11 and later); before, srun reports them killed (137).
    pub stopped_tasks_succeed: bool,
    /// 26.05 and later: a block step's tasks follow the topology's node ranks.
    pub topology_orders_block_steps: bool,
}

#[rustfmt::skip]
pub const RELEASES: &[Release] = &[
    Release { version: "22.05", suite: "bookworm", stepd_line: StepdLine::NodeName,
              optional_other_release: "srun: error: spank: {so}: Incompatible plugin version",
              stopped_tasks_succeed: false, topology_orders_block_steps: false },
    Release { version: "24.11", suite: "trixie", stepd_line: StepdLine::NodeName,
              optional_other_release: "srun: error: spank: {so}: Incompatible plugin version",
              stopped_tasks_succeed: true, topology_orders_block_steps: false },
    Release { version: "26.05", suite: "sid", stepd_line: StepdLine::Timestamp,
              optional_other_release: "srun: plugin_load_from_file: Incompatible Slurm plugin {so} version (23.02.0)",
              stopped_tasks_succeed: true, topology_orders_block_steps: true },
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
        match (self.stepd_line, line.strip_prefix("slurmstepd-")) {
            (StepdLine::Timestamp, Some(rest)) => {
                rest.split_once(": ").map_or(line, |(_, msg)| msg).into()
            }
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

    /// The release after this one (`22.05` -> `22.06`): a package built for this release must
    /// depend on `>= this, << next`.
    pub fn next(&self) -> String {
        let (major, minor) = self.version.split_once('.').unwrap();
        format!("{major}.{:02}", minor.parse::<u32>().unwrap() + 1)
    }
}
