//! `--tf-cluster=check`: what an admin runs after installing or upgrading tfcluster, on every
//! node at once (`srun -N<nodes> --ntasks-per-node=1 --tf-cluster=check printenv
//! TFCLUSTER_CHECKED`, [`ANSWERED_VAR`]). Each node's
//! slurmstepd looks at the node as a step of its own would (as root, before the task forks) and
//! the node's task prints one line: tfcluster's version and the Slurm release it was built for,
//! whether srun and slurmd run the same copy, whether `isolate=yes` works there and who holds the
//! tables of nodes whose tasks end first, the runtimes Apptainer's names are set for, what the
//! node's oci.conf keeps from a container, and anything under `/run/tfcluster` that is not as
//! tfcluster leaves it. A node that would refuse a step, or run one unprotected, fails its task:
//! srun then exits non-zero.
//!
//! This module decides from plain values what the shell found (`crate::spank::check`), and
//! writes the line (table-tested in tests/check.rs).

use super::container::{ApptainerEnv, Runtimes};
use super::gpu_affinity::{Contiguous, PciGpus};
use super::oci::OciConf;
use super::run_dir::{self, Action, Found};

/// The option's value that asks for the check instead of a step's variables.
pub const VALUE: &str = "check";

/// Whether the option's argument asks for the check.
pub fn asked(arg: Option<&str>) -> bool {
    arg.is_some_and(|a| a.trim() == VALUE)
}

/// What srun adds to the job's environment for the nodes to compare with their own copy: its
/// version and the Slurm release it was built for ([`copy`]).
pub const SRUN_VAR: &str = "TFCLUSTER_CHECK_SRUN";

/// What srun adds beside [`SRUN_VAR`]: whether its own plugstack.conf line sets `isolate=yes`
/// (`yes` or `no`). A node whose line does not, where srun's does, runs its steps unprotected.
pub const SRUN_ISOLATE_VAR: &str = "TFCLUSTER_CHECK_SRUN_ISOLATE";

/// What srun adds beside [`SRUN_VAR`]: its own plugstack.conf line's words (after the plugin's
/// path), space-separated. Every node builds its steps' TF_CONFIG from its own line, so each
/// node's must say what srun's host's says (spank(8): the same plugstack.conf everywhere).
pub const SRUN_LINE_VAR: &str = "TFCLUSTER_CHECK_SRUN_LINE";

/// The settings whose values differ between srun's host's line (`srun`, [`SRUN_LINE_VAR`]) and
/// this node's words, each as `KEY (srun's host: VALUE, here: VALUE)`, a setting a line does
/// not name as `unset`, in the order the lines name them.
pub fn line_differences(srun: &str, node: &[String]) -> Vec<String> {
    let pairs = |words: Vec<&str>| -> Vec<(String, String)> {
        words
            .into_iter()
            .map(|w| match w.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (w.to_string(), String::new()),
            })
            .collect()
    };
    let theirs = pairs(srun.split_whitespace().collect());
    let ours = pairs(node.iter().map(String::as_str).collect());
    let value = |pairs: &[(String, String)], key: &str| {
        // The last word for a key is the one that applies.
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let mut keys: Vec<&str> = Vec::new();
    for (key, _) in theirs.iter().chain(&ours) {
        if !keys.contains(&key.as_str()) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .filter_map(|key| {
            let (a, b) = (value(&theirs, key), value(&ours, key));
            let shown = |v: Option<String>| v.unwrap_or_else(|| "unset".into());
            (a != b).then(|| format!("{key} (srun's host: {}, here: {})", shown(a), shown(b)))
        })
        .collect()
}

/// What each node's tfcluster sets in the check's task: the node's name. The documented
/// check runs `printenv TFCLUSTER_CHECKED`, which exits 1 in a task no tfcluster answered for:
/// on a node where it is not loaded (no plugstack.conf line, its file missing, a build for
/// another release, which slurmstepd refuses and `optional` skips), so srun exits non-zero and
/// Slurm names the node (`srun: error: NODE: task N: Exited with exit code 1`). srun removes
/// it from the step's environment first: an inherited value must not pass for a node's answer.
pub const ANSWERED_VAR: &str = "TFCLUSTER_CHECKED";

/// A copy of tfcluster: its version and the Slurm release it was built for, as one word pair
/// (`0.12.0 24.11`), the form of [`SRUN_VAR`].
pub fn copy(version: &str, release: &str) -> String {
    format!("{version} {release}")
}

/// A file as the kernel names it in `/proc/PID/maps`: its device (major, minor) and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
}

/// The file a line of `/proc/PID/maps` maps (`START-END PERMS OFFSET MAJ:MIN INODE PATH`, the
/// device in hexadecimal), with its path (` (deleted)` kept); `None` for anonymous memory.
pub fn mapped_file(line: &str) -> Option<(FileId, &str)> {
    let mut fields = line.splitn(6, ' ');
    let (_, _, _, device, inode) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let path = fields.next()?.trim_start();
    let (major, minor) = device.split_once(':')?;
    let id = FileId {
        major: u32::from_str_radix(major, 16).ok()?,
        minor: u32::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
    };
    (id.inode != 0 && path.starts_with('/')).then_some((id, path))
}

/// What this node's slurmd has loaded of tfcluster. slurmd loads plugstack.conf's plugins when
/// it starts and keeps them: spank(8) says it must be restarted when they change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slurmd {
    /// The very file this step loaded.
    ThisFile,
    /// Another file, or an older one replaced since (its path, ` (deleted)` when it was).
    OtherCopy(String),
    /// No tfcluster at all: plugstack.conf named it after slurmd started.
    NotLoaded,
    /// No slurmd of this node was found (its network and host name namespaces).
    NotFound,
    /// Several slurmd processes of this node (`--enable-multiple-slurmd`): not told apart.
    Several(usize),
}

/// What the slurmd whose `/proc/PID/maps` is `maps` loaded of tfcluster, against `ours`, the
/// file this step loaded.
pub fn slurmd_copy(maps: &str, ours: FileId) -> Slurmd {
    let mut other = None;
    for (id, path) in maps.lines().filter_map(mapped_file) {
        if id == ours {
            return Slurmd::ThisFile;
        }
        let name = path.trim_end_matches(" (deleted)");
        let name = name.rsplit('/').next().unwrap_or(name);
        if name.contains("tfcluster") && name.contains(".so") {
            other = Some(path.to_string());
        }
    }
    other.map_or(Slurmd::NotLoaded, Slurmd::OtherCopy)
}

/// Whether and how `isolate=yes` works on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// Not set in plugstack.conf.
    Off,
    /// A step's table can be installed (the node's address resolves, its libnftables took an
    /// owned table, SYN cookies allow the owner's handshakes); `held`: the job's extern step holds the tables
    /// of nodes whose tasks end first (`PrologFlags=Contain`), else no process does.
    Works { held: bool },
    /// A step would be refused here, for this reason.
    Refused(String),
}

/// What `lstat` found at one path under [`run_dir::RUN_DIR`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir(Found),
    /// A regular file: its owner and permission bits.
    File {
        uid: u32,
        mode: u32,
    },
    /// A link, socket or the like.
    Other,
}

/// What is not as tfcluster leaves it at `path`: `(what, refuses)`; `None` when it is. A
/// directory open to others is closed by the next step (noted); one that is not root's own, a
/// file of another owner or anything but files and directories is refused by the next step
/// there.
pub fn run_dir_note(path: &str, entry: &Entry) -> Option<(String, bool)> {
    let path = &shown(path);
    match entry {
        Entry::Dir(found) => match run_dir::action(path, *found, 0) {
            Action::Use | Action::Make => None,
            Action::Close => Some((
                format!("{path} is open to other users: the next step closes it"),
                false,
            )),
            Action::Refuse(reason) => Some((reason, true)),
        },
        Entry::File { uid, .. } if *uid != 0 => Some((
            format!("{path} belongs to uid {uid}, not to root: remove it as root"),
            true,
        )),
        Entry::File { mode, .. } if run_dir::replace_file(*mode) => Some((
            format!("{path} can be opened by other users: the next step makes it again"),
            false,
        )),
        Entry::File { .. } => None,
        Entry::Other => Some((
            format!("{path} is neither a file nor a directory: remove it as root"),
            true,
        )),
    }
}

/// `path` as the check's line shows it to whoever ran it: below a node's directory
/// (`/run/tfcluster/claims/NODE/...`, `/run/tfcluster/held/NODE/...`) the names carry other
/// jobs' ids, which the line does not tell (each number is shown as `N`; the admin finds the
/// file with `ls`).
pub fn shown(path: &str) -> String {
    path.split('/')
        .enumerate()
        .map(|(at, segment)| match at >= 5 {
            true => {
                let mut out = String::new();
                for c in segment.chars() {
                    match (c.is_ascii_digit(), out.ends_with('N')) {
                        (true, true) => {}
                        (true, false) => out.push('N'),
                        (false, _) => out.push(c),
                    }
                }
                out
            }
            false => segment.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Everything a node found, for its line.
#[derive(Debug, Clone)]
pub struct NodeCheck<'a> {
    pub node: &'a str,
    /// This copy: [`copy`] of the plugin's version and release.
    pub copy: &'a str,
    /// srun's, from [`SRUN_VAR`] in the job's environment; `None` when it is not there (srun
    /// older than the check, or `--export` that dropped it).
    pub srun: Option<&'a str>,
    /// Whether srun's plugstack.conf line sets `isolate=yes` ([`SRUN_ISOLATE_VAR`]), when told.
    pub srun_isolates: Option<bool>,
    /// srun's plugstack.conf line's words ([`SRUN_LINE_VAR`]), when told, and this node's.
    pub lines: (Option<&'a str>, &'a [String]),
    pub slurmd: Slurmd,
    /// The node's port claims ([`super::claims`]), which every step takes first: their
    /// directory made root's and their lock taken within its deadline, or why not.
    pub claims: Result<(), String>,
    /// The steps that use tfcluster on the node now (each one's live claim: job and step), and
    /// whether the check's user may see their ids (root: the inventory before a removal); any
    /// other user is told how many, never another job's id.
    pub steps: (Vec<(u32, u32)>, bool),
    /// The plugstack.conf settings, or why they are refused.
    pub settings: Result<(), String>,
    pub isolation: Isolation,
    /// The node's GPUs as `gpu_affinity` finds them, or why its slices stay contiguous;
    /// `None` where the settings split GPUs in Slurm's order (`gpu_affinity=no`, `gpus=keep`).
    pub gpus: Option<Result<PciGpus, Contiguous>>,
    /// `apptainer_env` and the runtimes found on the node.
    pub apptainer: (ApptainerEnv, Runtimes),
    /// The node's oci.conf, when it has one.
    pub oci: Option<OciConf>,
    /// [`run_dir_note`] of each path found under [`run_dir::RUN_DIR`].
    pub run_dir: Vec<(String, bool)>,
}

/// The part of a node's line that says which steps use tfcluster there: how many, and which
/// (`JOB.STEP`) where `ids` (the check's user is root).
fn steps_part(steps: &[(u32, u32)], ids: bool) -> String {
    let mut sorted = steps.to_vec();
    sorted.sort_unstable();
    match (sorted.len(), ids) {
        (0, _) => "steps using tfcluster: none".to_string(),
        (n, false) => format!("steps using tfcluster: {n}"),
        (n, true) => {
            let listed: Vec<String> = sorted.iter().map(|(j, s)| format!("{j}.{s}")).collect();
            format!("steps using tfcluster: {n} ({})", listed.join(", "))
        }
    }
}

/// A node's line, and whether the node would refuse a step or run one unprotected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub line: String,
    pub fails: bool,
    /// The node the line is about ([`NodeCheck::node`]), which its task answers with.
    pub node: String,
}

impl NodeCheck<'_> {
    /// The node's line: each part, then `ok` or what must be done.
    pub fn verdict(&self) -> Verdict {
        let mut parts = vec![format!(
            "tfcluster {}",
            self.copy.replacen(' ', " built for Slurm ", 1)
        )];
        let mut fixes = Vec::new();
        parts.push(match self.srun {
            Some(srun) if srun == self.copy => "srun: the same".to_string(),
            Some(srun) => {
                fixes.push(format!(
                    "srun's host runs tfcluster {srun}: install the same version and build \
                     there as on the nodes"
                ));
                format!("srun: {srun}")
            }
            None => "srun: not told (an srun older than the check, or --export without its \
                     variable)"
                .to_string(),
        });
        parts.push(match &self.slurmd {
            Slurmd::ThisFile => "slurmd: this file".to_string(),
            Slurmd::OtherCopy(path) => {
                fixes.push("slurmd runs another copy: restart slurmd".to_string());
                format!("slurmd: another copy, {path}")
            }
            Slurmd::NotLoaded => {
                fixes.push("slurmd has not loaded tfcluster: restart slurmd".to_string());
                "slurmd: not loaded".to_string()
            }
            Slurmd::NotFound => {
                fixes.push("no slurmd of this node was found".to_string());
                "slurmd: not found".to_string()
            }
            Slurmd::Several(n) => format!("slurmd: {n} processes, not told apart"),
        });
        if let Err(reason) = &self.settings {
            fixes.push(format!("plugstack.conf: {reason}"));
        }
        if let (Some(srun), node) = self.lines {
            let differ = line_differences(srun, node);
            parts.push(match differ.is_empty() {
                true => "plugstack.conf: the same line as srun's host".to_string(),
                false => {
                    fixes.push(format!(
                        "this node's plugstack.conf line differs from srun's host's: {}; make \
                         the line the same on every node and login node, then restart slurmd",
                        differ.join(", ")
                    ));
                    "plugstack.conf: another line than srun's host".to_string()
                }
            });
        }
        if let Err(reason) = &self.claims {
            fixes.push(format!("the node's port claims: {reason}"));
        }
        parts.push(steps_part(&self.steps.0, self.steps.1));
        if self.srun_isolates == Some(true) && self.isolation == Isolation::Off {
            fixes.push(
                "srun's plugstack.conf line sets isolate=yes and this node's does not: its steps \
                 run unprotected"
                    .to_string(),
            );
        }
        parts.push(match &self.isolation {
            Isolation::Off => "isolate: off".to_string(),
            Isolation::Works { held: true } => {
                "isolate=yes: works; ended tables held by the job's extern step".to_string()
            }
            Isolation::Works { held: false } => "isolate=yes: works; WARNING: no \
                 PrologFlags=Contain in slurm.conf, so no process holds the tables of steps whose \
                 tasks end here first: a `nft flush ruleset` here (nftables.service's start, \
                 reload or stop) removes them and opens those steps' other nodes to other users \
                 on this node; set PrologFlags=Contain"
                .to_string(),
            Isolation::Refused(reason) => {
                fixes.push(format!("isolate=yes: {reason}"));
                "isolate=yes: refused".to_string()
            }
        });
        parts.push(match &self.gpus {
            None => "GPUs: in Slurm's order (gpu_affinity=no or gpus=keep)".to_string(),
            Some(Ok(gpus)) => format!("GPUs: by CPU affinity, {}", gpus.summary()),
            Some(Err(why)) => format!("GPUs: contiguous slices, {why}"),
        });
        let (setting, found) = self.apptainer;
        let names = setting.for_task(found, None);
        parts.push(
            match (setting, names.apptainer, names.singularity) {
                (ApptainerEnv::Auto, ..) => "Apptainer's names: for steps that start one",
                (_, true, true) => "Apptainer's names: Apptainer's and SingularityCE's",
                (_, true, false) => "Apptainer's names: Apptainer's",
                (_, false, true) => "Apptainer's names: SingularityCE's",
                (_, false, false) => "Apptainer's names: none",
            }
            .to_string(),
        );
        parts.push(match &self.oci {
            None => "oci.conf: none".to_string(),
            Some(conf) if conf.loses_task_env() => "oci.conf: starts --container steps \
                 without the task's variables (IgnoreFileConfigJson without CreateEnvFile)"
                .to_string(),
            Some(OciConf {
                env_exclude: Some(pattern),
                ..
            }) => format!("oci.conf: EnvExclude={pattern} keeps matching variables out"),
            Some(_) => "oci.conf: keeps no variable out".to_string(),
        });
        let notes: Vec<&str> = self.run_dir.iter().map(|(n, _)| n.as_str()).collect();
        parts.push(match notes.is_empty() {
            true => format!("{}: as tfcluster leaves it", run_dir::RUN_DIR),
            false => notes.join("; "),
        });
        fixes.extend(
            self.run_dir
                .iter()
                .filter(|(_, refuses)| *refuses)
                .map(|(note, _)| note.clone()),
        );
        let fails = !fixes.is_empty();
        let end = match fails {
            false => "ok".to_string(),
            true => format!("NOT OK: {}", fixes.join("; ")),
        };
        Verdict {
            line: format!("check {}: {} | {end}", self.node, parts.join(" | ")),
            fails,
            node: self.node.to_string(),
        }
    }
}
