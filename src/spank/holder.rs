//! The holder of ended tables ([`crate::core::holding`] says why): a thread in the job's extern
//! slurmstepd, and slurmstepd's side of the handover. All as root, through libnftables and
//! files in a root-only directory of the node.

use super::log;
use super::nftables::Nft;
use super::process;
use super::slurm;
use crate::core::holding::{self, Stage, ASK, HOLDER_FILE};
use crate::core::isolation;
use std::collections::HashMap;
use std::ffi::c_int;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long slurmstepd waits for the holder to take its ended table over.
const HANDOVER: Duration = Duration::from_secs(2);

/// A running holder, stopped when the extern slurmstepd exits (the job has ended): its tables
/// go with it.
pub struct Holder {
    stop: Arc<AtomicBool>,
    /// Wakes the thread to stop (an eventfd).
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
    dir: PathBuf,
}

/// This node's name as its processes see it (the same for the extern step and the job's other
/// steps).
fn node() -> Option<String> {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string())
}

/// The extern slurmstepd of job `job_id`, with `isolate=yes`: start holding. `None`, with a
/// line in slurmd's log, when it cannot (steps then leave their tables not owned).
pub fn start(job_id: u32) -> Option<Holder> {
    let failed = |e: String| {
        log::error(&format!(
            "isolate=yes: job {job_id}'s extern step cannot hold the tables of nodes whose \
             tasks ended first: {e}; they stay, not owned, so a `nft flush ruleset` on this \
             node lets other users here reach the step's other nodes: check that root can load \
             libnftables.so.1 and write {} on this node",
            holding::HELD_DIR
        ));
    };
    let (Some(node), Some(me)) = (node(), process::me()) else {
        failed("cannot read the node's name or this process's /proc entry".into());
        return None;
    };
    // The thread opens its own (a context stays in its thread); a node without libnftables
    // has no step table to hold.
    if let Err(e) = Nft::open() {
        failed(e);
        return None;
    }
    let dir = PathBuf::from(holding::job_dir(&node, job_id));
    if let Err(e) = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .and_then(|()| fs::write(dir.join(HOLDER_FILE), holding::holder_text(me)))
    {
        failed(format!("cannot write in {}: {e}", dir.display()));
        return None;
    }
    let watch = Watch::new(&dir);
    let (watch, wake) = match watch {
        Ok(pair) => pair,
        Err(e) => {
            let _ = fs::remove_dir_all(&dir);
            failed(e);
            return None;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, path) = (stop.clone(), dir.clone());
    let thread = std::thread::Builder::new()
        .name("tfcluster-holder".into())
        .spawn(move || {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                hold(job_id, &path, &flag, &watch)
            }));
        });
    match thread {
        Ok(thread) => Some(Holder {
            stop,
            wake,
            thread: Some(thread),
            dir,
        }),
        Err(e) => {
            let _ = fs::remove_dir_all(&dir);
            failed(format!("cannot start a thread: {e}"));
            None
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let one: u64 = 1;
        // SAFETY: an 8-byte write of a live u64 to the eventfd this holder owns.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The holder's loop: take over each step's ended table as its file appears; remove a held
/// one once slurmctld says its step has ended.
fn hold(job_id: u32, dir: &Path, stop: &AtomicBool, watch: &Watch) {
    let Ok(mut nft) = Nft::open() else { return };
    let mut asked: HashMap<u32, Instant> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        for name in fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
        {
            match holding::step_of(&name) {
                Some((step_id, Stage::Left)) => take(&mut nft, dir, (job_id, step_id)),
                Some((step_id, Stage::Held)) => {
                    let due = asked.get(&step_id).is_none_or(|at| at.elapsed() >= ASK);
                    if due {
                        asked.insert(step_id, Instant::now());
                        if slurm::step_exists(job_id, step_id) == Some(false) {
                            let table = isolation::ended_table_name(job_id, step_id);
                            let _ = nft.run(&isolation::removal(&table));
                            let _ = fs::remove_file(dir.join(&name));
                            asked.remove(&step_id);
                        }
                    }
                }
                // Only `take` makes one, and ends it before returning.
                Some((_, Stage::Taking)) | None => {}
            }
        }
        watch.wait((!asked.is_empty()).then_some(ASK));
    }
}

/// What wakes the holder: a file renamed into its directory (inotify), or its stop (an
/// eventfd, written by [`Holder`]'s drop).
struct Watch {
    inotify: OwnedFd,
    wake: OwnedFd,
}

impl Watch {
    /// The watch on `dir`, and the stop's other end for the [`Holder`].
    fn new(dir: &Path) -> Result<(Watch, OwnedFd), String> {
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|e| e.to_string())?;
        let fd = |raw: c_int, what: &str| match raw {
            -1 => Err(format!("{what}: {}", std::io::Error::last_os_error())),
            // SAFETY: a descriptor the call just made, owned by nobody else.
            raw => Ok(unsafe { OwnedFd::from_raw_fd(raw) }),
        };
        // SAFETY: plain flags.
        let inotify = fd(
            unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) },
            "inotify",
        )?;
        // SAFETY: a live inotify descriptor and a NUL-terminated path.
        let added = unsafe {
            libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), libc::IN_MOVED_TO)
        };
        if added < 0 {
            return Err(format!("inotify: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: plain flags.
        let wake = fd(
            unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) },
            "eventfd",
        )?;
        let other = wake.try_clone().map_err(|e| e.to_string())?;
        Ok((Watch { inotify, wake }, other))
    }

    /// Sleeps until a file arrives, the holder is stopped, or `timeout` passes; drains what
    /// woke it.
    fn wait(&self, timeout: Option<Duration>) {
        let mut fds = [self.inotify.as_raw_fd(), self.wake.as_raw_fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as c_int);
        // SAFETY: two valid pollfd entries that outlive the call.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        let mut buffer = [0u8; 4096];
        for fd in [&self.inotify, &self.wake] {
            // SAFETY: a nonblocking read into a buffer of that length, which outlives the call.
            let _ = unsafe { libc::read(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
        }
    }
}

/// Takes the ended table of a step over: claims its file first (slurmstepd can no longer
/// withdraw it, and waits for what follows), then replaces the table with its own copy and says
/// so by the file's name; on failure removes the file.
fn take(nft: &mut Nft, dir: &Path, (job_id, step_id): (u32, u32)) {
    let at = |stage| dir.join(holding::stage_file(step_id, stage));
    let taking = at(Stage::Taking);
    if fs::rename(at(Stage::Left), &taking).is_err() {
        return; // withdrawn meanwhile
    }
    let script = fs::read_to_string(&taking)
        .ok()
        .and_then(|ended| holding::take_over(job_id, step_id, &ended));
    let Some(script) = script else {
        let _ = fs::remove_file(&taking);
        return;
    };
    // Persistent where libnftables and the kernel can (a killed extern slurmstepd then leaves
    // it to the job's epilog), as slurmstepd's own table.
    match nft
        .run(&isolation::persistent(&script))
        .or_else(|_| nft.run(&script))
    {
        Ok(_) => {
            let _ = fs::rename(&taking, at(Stage::Held));
        }
        Err(e) => {
            log::error(&format!(
                "isolate=yes: job {job_id}'s extern step cannot hold the table of step \
                 {job_id}.{step_id} (nodes whose tasks ended first): {e}; it stays, not owned, \
                 until the step ends: check the node's nftables as root (nft list tables)"
            ));
            let _ = fs::remove_file(&taking);
        }
    }
}

/// What became of a step's ended table at its handover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handed {
    /// The job's holder owns it.
    Held,
    /// No live holder: the job has no extern step on this node (or its holder failed, and
    /// said so). The table stays, owned by no process.
    NoHolder,
    /// The holder did not take it in time, or could not (and said so). It stays, owned by no
    /// process.
    NotTaken,
}

/// slurmstepd, its tasks all ended, its ended table installed (`ended`: its script): hand the
/// table over to the holder of this node's job, and wait for it to take it ([`HANDOVER`] at
/// most, twice that when the holder has claimed it by then). The caller keeps its own table
/// until this returns.
pub fn hand_over(job_id: u32, step_id: u32, ended: &str) -> Handed {
    let Some(node) = node() else {
        return Handed::NoHolder;
    };
    let dir = holding::job_dir(&node, job_id);
    hand_over_in(Path::new(&dir), step_id, ended, HANDOVER)
}

/// [`hand_over`] through the holder directory `dir`, waiting `limit` where it waits
/// [`HANDOVER`] (tests/isolation.rs plays the holder's side in a directory of its own, in
/// shorter times).
pub fn hand_over_in(dir: &Path, step_id: u32, ended: &str, limit: Duration) -> Handed {
    let live = fs::read_to_string(dir.join(HOLDER_FILE))
        .ok()
        .and_then(|text| holding::holder_of(&text))
        .is_some_and(|owner| owner.is_live(process::stat));
    if !live {
        return Handed::NoHolder;
    }
    let at = |stage| dir.join(holding::stage_file(step_id, stage));
    let left = at(Stage::Left);
    let tmp = dir.join(format!(".{}", holding::step_file(step_id)));
    if fs::write(&tmp, ended)
        .and_then(|()| fs::rename(&tmp, &left))
        .is_err()
    {
        return Handed::NotTaken;
    }
    let (taking, held) = (at(Stage::Taking), at(Stage::Held));
    // The holder is done, either way, once the file has left the names it is not done at.
    let done = || !left.exists() && !taking.exists();
    let outcome = || match held.exists() {
        true => Handed::Held,
        false => Handed::NotTaken,
    };
    if waited(done, limit) {
        return outcome();
    }
    // Not claimed: withdrawn, and no take-over follows.
    if fs::remove_file(&left).is_ok() {
        return Handed::NotTaken;
    }
    match waited(done, limit) {
        true => outcome(),
        false => Handed::NotTaken,
    }
}

/// slurmstepd whose ended table no holder took because the job has no extern step here: says
/// so in slurmd's log, once per node until it reboots (a marker in [`holding::node_dir`], on
/// the node's /run): a site without `PrologFlags=Contain` learns what it leaves open, without
/// a line at every step.
pub fn say_no_extern_step_once(job_id: u32, step_id: u32) {
    let Some(node) = node() else { return };
    let dir = PathBuf::from(holding::node_dir(&node));
    let first = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .and_then(|()| {
            fs::File::options()
                .write(true)
                .create_new(true)
                .open(dir.join(holding::TOLD_FILE))
        })
        .is_ok();
    if first {
        log::info(&holding::no_extern_step_line(job_id, step_id));
    }
}

/// Whether `done` held within `limit`, asked every 5 ms.
fn waited(done: impl Fn() -> bool, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// slurmd's job epilog: the job's holder directory, left when the extern slurmstepd was killed
/// (it removes its own as it exits).
pub fn forget(job_id: u32) {
    if let Some(node) = node() {
        let _ = fs::remove_dir_all(holding::job_dir(&node, job_id));
    }
}
