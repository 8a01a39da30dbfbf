//! `--tf-cluster=check` on a node ([`crate::core::check`] decides and writes the line): what a
//! step of its own would find here, looked at as root in slurmstepd before the task forks. It
//! reads `/proc`, the node's configuration and `/run/tfcluster`, and installs and removes one
//! empty owned table where `isolate=yes` is set; it changes nothing else.

use crate::core::check::{self, Entry, FileId, Isolation, NodeCheck, Slurmd, Verdict};
use crate::core::container::Runtimes;
use crate::core::isolation::{handover, holding, rules};
use crate::core::run_dir::{Found, RUN_DIR};
use crate::core::{oci, Error, Settings};
use crate::spank::ffi;
use crate::spank::handle::{Spank, U32Item};
use crate::spank::isolation::{firewall, nftables};
use crate::spank::{hardware, process, runtimes, slurm_conf};
use std::ffi::c_void;
use std::fs;
use std::net::ToSocketAddrs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The most entries under `/run/tfcluster` the check looks at (a node keeps a few per step).
const MAX_ENTRIES: usize = 10_000;

/// The node's verdict for this step (`--tf-cluster=check`).
/// `node`: the node's name as slurmstepd has it ([`crate::spank::step::Shape::node`]), as every
/// file a node keeps is named (claims, holders); never the job's environment, which is the
/// user's.
/// `settings`: the node's, parsed, and its line's words.
pub fn node(
    sp: &Spank,
    (settings, words): (Result<Settings, Error>, &[String]),
    node: Option<String>,
) -> Verdict {
    let node = node.unwrap_or_else(|| "this node".into());
    let copy = check::copy(env!("CARGO_PKG_VERSION"), ffi::SLURM_RELEASE);
    let srun = sp.getenv(check::SRUN_VAR).ok().flatten();
    let srun_line = sp.getenv(check::SRUN_LINE_VAR).ok().flatten();
    // The usual prefixes alone: root looks at no file the job's `PATH` names (a step looks
    // there as the user, in `user_init`).
    let apptainer = (
        settings
            .as_ref()
            .map_or(Settings::default().apptainer_env, |s| s.apptainer_env),
        Runtimes::find(None, runtimes::program_at),
    );
    let srun_isolates = sp
        .getenv(check::SRUN_ISOLATE_VAR)
        .ok()
        .flatten()
        .map(|v| v == "yes");
    // As a step reads them ([`crate::spank::hooks::stepd`]), where the settings split GPUs.
    let gpus = match &settings {
        Ok(s) if s.gpus_by_affinity() => Some(hardware::node_gpus()),
        _ => None,
    };
    let isolation = match &settings {
        Ok(s) if s.isolate => isolation(sp, &node, &s.address.render(&node)),
        _ => Isolation::Off,
    };
    // After the look at /run/tfcluster: taking the claims' lock closes a directory left open.
    let run_dir = run_dir();
    let (claims, steps) = claims(&node);
    let root = sp.item_u32(U32Item::JobUid).is_ok_and(|uid| uid == 0);
    NodeCheck {
        node: &node,
        copy: &copy,
        srun: srun.as_deref(),
        srun_isolates,
        lines: (srun_line.as_deref(), words),
        slurmd: slurmd(),
        claims,
        steps: (steps, root),
        settings: settings.map(|_| ()).map_err(|e| e.to_string()),
        isolation,
        gpus,
        apptainer,
        oci: oci::node_conf(&slurm_conf::path(), slurm_conf::read),
        run_dir,
    }
    .verdict()
}

/// The file this plugin was loaded from, as the kernel names it.
fn this_file() -> Option<FileId> {
    // SAFETY: Dl_info is plain data (pointers and integers); all zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr reads the address of a function of this library and fills `info`.
    let found = unsafe { libc::dladdr(this_file as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr gave a NUL-terminated path that lives as long as the library.
    let path = unsafe { crate::spank::handle::c_string(info.dli_fname) }?;
    let meta = fs::metadata(path).ok()?;
    Some(FileId {
        major: libc::major(meta.dev()),
        minor: libc::minor(meta.dev()),
        inode: meta.ino(),
    })
}

/// What this node's slurmd loaded: the slurmd processes in this process's network and host name
/// namespaces (a test cluster runs several nodes on one machine), each one's `/proc/PID/maps`.
fn slurmd() -> Slurmd {
    let Some(ours) = this_file() else {
        return Slurmd::NotFound;
    };
    let namespaces =
        |pid: &str| ["net", "uts"].map(|ns| fs::read_link(format!("/proc/{pid}/ns/{ns}")).ok());
    let mine = namespaces("self");
    let Ok(entries) = fs::read_dir("/proc") else {
        return Slurmd::NotFound;
    };
    let slurmds: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "slurmd")
        })
        // A user's process may call itself slurmd too.
        .filter(|pid| process::is_root_process(pid))
        .filter(|pid| namespaces(pid) == mine)
        .collect();
    match slurmds.as_slice() {
        [] => Slurmd::NotFound,
        [pid] => match fs::read_to_string(format!("/proc/{pid}/maps")) {
            Ok(maps) => check::slurmd_copy(&maps, ours),
            Err(_) => Slurmd::NotFound,
        },
        several => Slurmd::Several(several.len()),
    }
}

/// Whether a step's table can go in here: SYN cookies, libnftables (which the job's holder
/// loads), and one empty table owned by this process, installed and removed as a step installs
/// and removes its own (named so that no step and no epilog takes it for one of
/// theirs); who holds the tables of nodes whose tasks end first.
fn isolation(sp: &Spank, node: &str, address: &str) -> Isolation {
    match (address, 0)
        .to_socket_addrs()
        .map(|mut found| found.next().is_some())
    {
        Ok(true) => {}
        Ok(false) => {
            return Isolation::Refused(format!("this node's address {address} resolves to nothing"))
        }
        Err(e) => {
            return Isolation::Refused(format!(
                "this node's address {address} does not resolve: {e}"
            ))
        }
    }
    if let Err(reason) = firewall::ready() {
        return Isolation::Refused(reason);
    }
    let job = sp.item_u32(U32Item::JobId).unwrap_or(0);
    let step = sp.item_u32(U32Item::StepId).unwrap_or(0);
    let table = format!("tfccheck_{job}_{step}");
    let script = format!("table inet {table} {{\n{}}}\n", rules::OWNED);
    // The way a step installs its table: the kernel's own messages.
    match nftables::install(&script) {
        Ok(Some(socket)) => {
            let _ = socket.delete(&table);
        }
        Ok(None) => {
            return Isolation::Refused(
                "tfcluster wrote no netlink messages for an empty table (a bug: report it with \
                 this line)"
                    .into(),
            )
        }
        Err(e) => {
            return Isolation::Refused(format!(
                "the kernel refused an owned table ({e}): isolate=yes needs Linux 5.12 or later"
            ))
        }
    }
    let file = Path::new(&handover::job_dir(node, job)).join(handover::HOLDER_FILE);
    let text = fs::read_to_string(file).ok();
    let nobody = crate::core::claims::Owner { pid: 0, start: 0 };
    let held =
        holding::whose(text.as_deref(), nobody, process::stat) == holding::HolderFile::OtherLive;
    Isolation::Works { held }
}

/// The node's port claims, as every step takes them first: their directory made root's alone and
/// their lock taken within its deadline (another user holding it is refused), then let go; and
/// the steps whose claims are live there (every step that uses tfcluster claims its ports).
fn claims(node: &str) -> (Result<(), String>, Vec<(u32, u32)>) {
    match crate::spank::claims::lock_node(node) {
        Ok((dir, _lock)) => {
            let (live, _) = crate::spank::claims::claims_in(&dir);
            (Ok(()), live.iter().map(|c| (c.job_id, c.step_id)).collect())
        }
        Err(e) => (Err(e), Vec::new()),
    }
}

/// What is not as tfcluster leaves it under `/run/tfcluster`.
fn run_dir() -> Vec<(String, bool)> {
    let mut notes = Vec::new();
    let mut todo = vec![RUN_DIR.to_string()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        seen += 1;
        if seen > MAX_ENTRIES {
            break;
        }
        let entry = match fs::symlink_metadata(&path) {
            Err(_) => Entry::Dir(Found::Missing),
            Ok(meta) if meta.file_type().is_dir() => Entry::Dir(Found::Dir {
                uid: meta.uid(),
                mode: meta.mode() & 0o7777,
            }),
            Ok(meta) if meta.file_type().is_file() => Entry::File {
                uid: meta.uid(),
                mode: meta.mode() & 0o7777,
            },
            Ok(_) => Entry::Other,
        };
        notes.extend(check::run_dir_note(&path, &entry));
        if let Entry::Dir(Found::Dir { .. }) = entry {
            if let Ok(children) = fs::read_dir(&path) {
                todo.extend(children.flatten().map(|c| c.path().display().to_string()));
            }
        }
    }
    notes
}
