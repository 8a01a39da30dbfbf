//! The admin guide's plugstack advice as data: what srun, sbatch and a job without
//! `--tf-cluster` do with the plugin `required` or `optional` when its file is missing on one
//! compute node, missing on the login host, or built for another release. tests/plugstack.rs
//! runs every case on every release; tests/docs.rs checks that the admin guide's table is
//! [`guide_table`], rendered from the same cases.

use super::release::RELEASES;

/// Where the plugin goes wrong.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// The file is missing on compute node n012 only (its slurmd's mount namespace).
    MissingOnOneNode,
    /// The file is missing where srun and sbatch run.
    MissingOnTheLoginHost,
    /// The file is there, everywhere, built for another Slurm release.
    AnotherRelease,
}

/// What each command does, the plugin `required` or `optional`, with each fault. A node that
/// lacks the file fails every job's tasks there with `required` (srun exits 0 up to 23.02) and is
/// drained when the first job ends (slurmd's spank epilog cannot load the plugin); with
/// `optional` it runs them, and a `--tf-cluster` task there gets srun's placeholder TF_CONFIG,
/// on which TensorFlow fails, never a task that trains alone. Where srun and sbatch lack the file
/// or have one built for another release, `required` fails every srun and sbatch, `optional`
/// only `--tf-cluster` (an option they do not know; the load error is printed up to 25.05).
pub struct Case {
    pub fault: Fault,
    /// plugstack.conf's word.
    pub kind: &'static str,
    pub job: Job,
    /// What came of it: `exit STATUS | what each task got | the node's state`.
    pub outcome: &'static str,
    /// A piece of what it printed.
    pub says: &'static str,
}

#[rustfmt::skip]
pub const CASES: &[Case] = &[
    Case { fault: Fault::MissingOnOneNode,      kind: "required", job: Job::TfCluster, outcome: "exit {launch} | 0:json | drained",     says: "task 1 launch failed: " },
    Case { fault: Fault::MissingOnOneNode,      kind: "required", job: Job::Plain,     outcome: "exit {launch} | 0:- | drained",        says: "task 1 launch failed: " },
    Case { fault: Fault::MissingOnOneNode,      kind: "required", job: Job::Batch,     outcome: "exit {launch} | 0:- | drained",        says: "" },
    Case { fault: Fault::MissingOnOneNode,      kind: "optional", job: Job::TfCluster, outcome: "exit 0 | 0:json 1:placeholder | idle", says: "" },
    Case { fault: Fault::MissingOnOneNode,      kind: "optional", job: Job::Plain,     outcome: "exit 0 | 0:- 1:- | idle",              says: "" },
    Case { fault: Fault::MissingOnOneNode,      kind: "optional", job: Job::Batch,     outcome: "exit 0 | 0:- 1:- | idle",              says: "" },
    Case { fault: Fault::MissingOnTheLoginHost, kind: "required", job: Job::TfCluster, outcome: "exit 1 |  | idle",                     says: "cannot open shared object file" },
    Case { fault: Fault::MissingOnTheLoginHost, kind: "required", job: Job::Plain,     outcome: "exit 1 |  | idle",                     says: "cannot open shared object file" },
    Case { fault: Fault::MissingOnTheLoginHost, kind: "required", job: Job::Batch,     outcome: "exit 1 |  | idle",                     says: "cannot open shared object file" },
    Case { fault: Fault::MissingOnTheLoginHost, kind: "optional", job: Job::TfCluster, outcome: "exit 255 |  | idle",                   says: "unrecognized option '--tf-cluster'" },
    Case { fault: Fault::MissingOnTheLoginHost, kind: "optional", job: Job::Plain,     outcome: "exit 0 | 0:- 1:- | idle",              says: "{missing}" },
    Case { fault: Fault::MissingOnTheLoginHost, kind: "optional", job: Job::Batch,     outcome: "exit 0 | 0:- 1:- | idle",              says: "{missing}" },
    Case { fault: Fault::AnotherRelease,        kind: "required", job: Job::TfCluster, outcome: "exit 1 |  | idle",                     says: "Incompatible" },
    Case { fault: Fault::AnotherRelease,        kind: "required", job: Job::Plain,     outcome: "exit 1 |  | idle",                     says: "Incompatible" },
    Case { fault: Fault::AnotherRelease,        kind: "required", job: Job::Batch,     outcome: "exit 1 |  | idle",                     says: "Incompatible" },
    Case { fault: Fault::AnotherRelease,        kind: "optional", job: Job::TfCluster, outcome: "exit 255 |  | idle",                   says: "unrecognized option '--tf-cluster'" },
    Case { fault: Fault::AnotherRelease,        kind: "optional", job: Job::Plain,     outcome: "exit 0 | 0:- 1:- | idle",              says: "Incompatible" },
    Case { fault: Fault::AnotherRelease,        kind: "optional", job: Job::Batch,     outcome: "exit 0 | 0:- 1:- | idle",              says: "Incompatible" },
];

/// The commands: a 2-task step over n011 and n012 with `--tf-cluster`, the same without it, and
/// a batch job without it whose step is the same.
#[derive(Clone, Copy, Debug)]
pub enum Job {
    TfCluster,
    Plain,
    Batch,
}

impl Fault {
    /// The fault as the admin guide's table names it.
    fn words(self) -> &'static str {
        match self {
            Fault::MissingOnOneNode => "missing on compute node n012",
            Fault::MissingOnTheLoginHost => "missing on the login host",
            Fault::AnotherRelease => "built for another release",
        }
    }
}

impl Job {
    /// The command as the admin guide's table names it.
    fn words(self) -> &'static str {
        match self {
            Job::TfCluster => "`srun --tf-cluster`",
            Job::Plain => "`srun` without it",
            Job::Batch => "`sbatch`, a step without it",
        }
    }
}

/// The releases (by version) for which `pick` holds, joined with ", ".
fn releases(pick: impl Fn(&super::release::Release) -> bool) -> String {
    let picked: Vec<&str> = RELEASES
        .iter()
        .filter(|r| pick(r))
        .map(|r| r.version)
        .collect();
    picked.join(", ")
}

/// The admin guide's table of [`CASES`]: one row per case, the release-dependent parts (`{launch}`,
/// `{missing}`) spelled out per release.
pub fn guide_table() -> String {
    let launch = format!("1 (0 on {})", releases(|r| r.launch_failure_status == 0));
    let missing = format!(
        "`cannot open shared object file` (nothing on {})",
        releases(|r| r.optional_missing_quiet)
    );
    let mut table = String::from(
        "| the plugin file | plugstack.conf | the command | srun's or sbatch's status | what each task's TF_CONFIG was (rank:json, placeholder, `-` unset) | n012 after | stderr has |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for case in CASES {
        let parts: Vec<&str> = case.outcome.split(" | ").collect();
        let status = parts[0]
            .trim_start_matches("exit ")
            .replace("{launch}", &launch);
        let tasks = match parts[1].trim() {
            "" => "no task ran".to_string(),
            tasks => tasks.replace(' ', ", "),
        };
        let says = match case.says {
            "" => "-".to_string(),
            "{missing}" => missing.clone(),
            says => format!("`{}`", says.trim()),
        };
        table.push_str(&format!(
            "| {} | `{}` | {} | {status} | {tasks} | {} | {says} |\n",
            case.fault.words(),
            case.kind,
            case.job.words(),
            parts[2],
        ));
    }
    table
}
