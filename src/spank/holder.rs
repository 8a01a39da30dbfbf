//! The holder of ended tables ([`crate::core::holding`] says why): a thread in the job's extern
//! slurmstepd ([`super::handover`] is slurmstepd's side). All as root, through libnftables and
//! files in a root-only directory of the node.

use super::log;
use super::nftables::Nft;
use super::process;
use super::run_dir;
use super::slurm;
use crate::core::holding::{self, Stage, ASK, HOLDER_FILE};
use crate::core::isolation;
use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running holder: job `job_id`'s extern slurmstepd's, stopped when it exits (the job has
/// ended), its tables and its directory with it.
pub struct Holder {
    stop: Arc<AtomicBool>,
    /// Wakes the thread to stop (an eventfd).
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
    dir: PathBuf,
}

/// The extern slurmstepd of job `job_id`, with `isolate=yes`: start holding. `None`, with a
/// line in slurmd's log, when it cannot (the job's ended tables then stay, not owned, and the
/// first step that leaves one says so once per node).
pub fn start_for_job(job_id: u32) -> Option<Holder> {
    let failed = |e: String| {
        log::error(&format!(
            "isolate=yes: job {job_id}'s extern step cannot hold the tables of nodes whose \
             tasks ended first: {e}; they stay, not owned, so a `nft flush ruleset` on this \
             node lets other users here reach the steps' other nodes: check that root can load \
             libnftables.so.1 and write {} on this node",
            holding::HELD_DIR
        ));
    };
    let (Some(node), Some(me)) = (process::host_name(), process::me()) else {
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
    let made = run_dir::private(&dir)
        .and_then(|()| {
            fs::write(dir.join(HOLDER_FILE), holding::holder_text(me)).map_err(|e| e.to_string())
        })
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()));
    if let Err(e) = made {
        failed(e);
        return None;
    }
    let (watch, wake) = match Watch::new(&dir) {
        Ok(pair) => pair,
        Err(e) => {
            forsake(&dir);
            failed(e);
            return None;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, path) = (stop.clone(), dir.clone());
    let thread = std::thread::Builder::new()
        .name("tfcluster-holder".into())
        .spawn(move || {
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                hold(&path, &flag, &watch)
            }));
            // Ended before its stop: it says so, and its directory goes, holder file and the
            // files of the tables it held (they went with its libnftables context), so that no
            // file says a table is held and no step hands it one (they find no holder, and the
            // first says so once per node).
            if !flag.load(Ordering::Relaxed) {
                let why = match ended {
                    Ok(Err(e)) => e,
                    Ok(Ok(())) => "it ended".to_string(),
                    Err(_) => "it panicked".to_string(),
                };
                forsake(&path);
                log::error(&format!(
                    "isolate=yes: job {job_id}'s extern step stopped holding the tables of nodes \
                     whose tasks ended first ({why}); those it held go with it, and later ones \
                     stay, not owned: check the node's nftables as root (nft list tables)"
                ));
            }
        });
    match thread {
        Ok(thread) => Some(Holder {
            stop,
            wake,
            thread: Some(thread),
            dir,
        }),
        Err(e) => {
            forsake(&dir);
            failed(format!("cannot start a thread: {e}"));
            None
        }
    }
}

/// A holder that could not start, or has stopped: its directory goes.
fn forsake(dir: &Path) {
    let _ = fs::remove_dir_all(dir);
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
        forsake(&self.dir);
    }
}

/// The holder's loop: take over each step's ended table as its file appears; remove a held
/// one once its file is gone, and remove that file once slurmctld says its step has ended
/// (one table per [`ASK`] while it holds any: [`holding::next_to_ask`]). Ends when stopped, or
/// with why it cannot go on.
fn hold(dir: &Path, stop: &AtomicBool, watch: &Watch) -> Result<(), String> {
    let mut nft = Nft::open()?;
    let mut asked: HashMap<(u32, u32), Instant> = HashMap::new();
    let mut last_ask: Option<Instant> = None;
    let mut held: HashSet<(u32, u32)> = HashSet::new();
    while !stop.load(Ordering::Relaxed) {
        let mut still = HashSet::new();
        for name in fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
        {
            match holding::step_of(&name) {
                Some((job_id, step_id, Stage::Left)) => {
                    if take(&mut nft, dir, (job_id, step_id)) {
                        still.insert((job_id, step_id));
                    }
                }
                Some((job_id, step_id, Stage::Held)) => {
                    still.insert((job_id, step_id));
                }
                // Only `take` makes one, and ends it before returning.
                Some((_, _, Stage::Taking)) | None => {}
            }
        }
        if last_ask.is_none_or(|at| at.elapsed() >= ASK) {
            let ages: Vec<_> = still
                .iter()
                .map(|key| (*key, asked.get(key).map(Instant::elapsed)))
                .collect();
            if let Some((job_id, step_id)) = holding::next_to_ask(&ages) {
                let now = Instant::now();
                asked.insert((job_id, step_id), now);
                last_ask = Some(now);
                if slurm::step_exists(job_id, step_id) == Some(false) {
                    let file = holding::stage_file(job_id, step_id, Stage::Held);
                    let _ = fs::remove_file(dir.join(file));
                }
            }
        }
        let seen: HashSet<(u32, u32)> = held.union(&still).copied().collect();
        still.retain(|&(job_id, step_id)| {
            dir.join(holding::stage_file(job_id, step_id, Stage::Held))
                .exists()
        });
        // What this holder held and no file names any more: its step or job has ended.
        for &(job_id, step_id) in seen.difference(&still) {
            let table = isolation::ended_table_name(job_id, step_id);
            let _ = nft.run(&isolation::removal(&table));
        }
        asked.retain(|key, _| still.contains(key));
        held = still;
        watch.wait((!held.is_empty()).then_some(ASK));
    }
    Ok(())
}

/// What wakes the holder: a file renamed into its directory or removed from it (inotify), or
/// its stop (an eventfd, written by [`Holder`]'s drop).
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
            libc::inotify_add_watch(
                inotify.as_raw_fd(),
                path.as_ptr(),
                libc::IN_MOVED_TO | libc::IN_DELETE,
            )
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
/// so by the file's name; on failure removes the file. Whether it holds the table now.
fn take(nft: &mut Nft, dir: &Path, (job_id, step_id): (u32, u32)) -> bool {
    let at = |stage| dir.join(holding::stage_file(job_id, step_id, stage));
    let taking = at(Stage::Taking);
    if fs::rename(at(Stage::Left), &taking).is_err() {
        return false; // withdrawn meanwhile
    }
    let scripts = fs::read_to_string(&taking)
        .ok()
        .and_then(|ended| holding::take_over(job_id, step_id, &ended));
    let Some([replace, install]) = scripts else {
        let _ = fs::remove_file(&taking);
        return false;
    };
    // Persistent where libnftables and the kernel can (a killed holder then leaves it to the
    // job's epilog), as slurmstepd's own table.
    let run = |nft: &mut Nft, script: &str| {
        nft.run(&isolation::persistent(script))
            .or_else(|_| nft.run(script))
    };
    match run(nft, &replace).or_else(|e| run(nft, &install).map_err(|_| e)) {
        Ok(_) if fs::rename(&taking, at(Stage::Held)).is_ok() => true,
        // The job's epilog removed the file meanwhile: the table is this holder's alone.
        Ok(_) => {
            let _ = nft.run(&isolation::removal(&isolation::ended_table_name(
                job_id, step_id,
            )));
            false
        }
        Err(e) => {
            log::error(&format!(
                "isolate=yes: this node cannot hold the table of step {job_id}.{step_id} \
                 (nodes whose tasks ended first): {e}; it stays, not owned, until the step \
                 ends: check the node's nftables as root (nft list tables)"
            ));
            let _ = fs::remove_file(&taking);
            false
        }
    }
}
