//! The files of `/run/tfcluster` as the core says they must be ([`crate::core::run_dir`]): each
//! directory made or closed on the way down, and the claims' lock taken within a deadline. The
//! raw calls (`lstat`, `mkdir`, `chmod`, `flock`) are here and nowhere else, and every file
//! written there is written by [`write_private`].

use crate::core::run_dir::{self, Action, Found, PRIVATE};
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Makes `dir` (below [`run_dir::RUN_DIR`]) and every directory above it root's alone, or says
/// why it cannot be trusted.
pub fn private(dir: &Path) -> Result<(), String> {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    for path in run_dir::chain(&dir.to_string_lossy()) {
        // Twice at most: a directory another step makes between the look and the mkdir.
        for _ in 0..2 {
            match run_dir::action(&path, found(&path), me) {
                Action::Use => break,
                Action::Make => match fs::DirBuilder::new().mode(PRIVATE).create(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(format!("cannot make {path}: {e}")),
                },
                Action::Close => fs::set_permissions(&path, fs::Permissions::from_mode(PRIVATE))
                    .map_err(|e| format!("cannot close {path} to other users: {e}"))?,
                Action::Refuse(reason) => return Err(reason),
            }
        }
        if run_dir::action(&path, found(&path), me) != Action::Use {
            return Err(format!("{path} is not root's alone after making it so"));
        }
    }
    Ok(())
}

fn found(path: &str) -> Found {
    match fs::symlink_metadata(path) {
        Err(_) => Found::Missing,
        Ok(meta) if meta.file_type().is_dir() => Found::Dir {
            uid: meta.uid(),
            mode: meta.mode() & 0o7777,
        },
        Ok(_) => Found::Other,
    }
}

/// An exclusive `flock` on `path` (in a directory [`private`] made), released when the file is
/// dropped; made again first when others could open it ([`run_dir::replace_file`]). Waits at
/// most `limit`: a lock no step of ours holds for more than milliseconds, still held then, is
/// someone else's doing, and the step is refused with a line rather than wait with no end.
pub fn lock(path: &Path, limit: Duration) -> Result<File, String> {
    if let Ok(meta) = fs::symlink_metadata(path) {
        if !meta.file_type().is_file() || run_dir::replace_file(meta.mode()) {
            let _ = fs::remove_file(path);
        }
    }
    let file = File::options()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot open the lock {}: {e}", path.display()))?;
    let start = Instant::now();
    loop {
        // SAFETY: flock(2) on a descriptor `file` owns for the whole call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(format!("cannot lock {}: {e}", path.display()));
        }
        if start.elapsed() >= limit {
            return Err(format!(
                "{} is still locked after {} s: another process holds it (as root: fuser -v {}); \
                 stop that process, or remove the file",
                path.display(),
                limit.as_secs(),
                path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes `text` to `path` (in a directory [`private`] made) as root's alone, mode 0600 (also
/// where an older version left the file 0644), never through a symbolic link.
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())
}
