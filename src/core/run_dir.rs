//! `/run/tfcluster`, where the nodes keep their port claims ([`super::claims`]) and the holders
//! of ended tables their files ([`super::holding`]): root's alone. A file there another user can
//! open is a lock they can hold (every `--tf-cluster` step of the node would wait on it) or a
//! claim they can read; a directory they can write is a claim or a holder file they can forge.
//! So every directory from [`RUN_DIR`] down is made `0700`, one an older version (0.2 to 0.7)
//! left open is closed again before use, and one that is not root's own directory (another
//! owner, a symbolic link, a file) is refused, never used: its contents could be anyone's.
//!
//! This module decides from plain values (what `lstat` found); the shell makes, closes and
//! refuses ([`crate::spank`]'s `run_dir`).

/// The directory every file of tfcluster on a node lives under.
pub const RUN_DIR: &str = "/run/tfcluster";

/// The mode of every directory under [`RUN_DIR`], and the permission bits no file there may
/// give to anyone but its owner.
pub const PRIVATE: u32 = 0o700;

/// What `lstat` says of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Missing,
    /// A directory (not a link to one), its owner and its permission bits.
    Dir {
        uid: u32,
        mode: u32,
    },
    /// Anything else: a file, a symbolic link, a socket.
    Other,
}

/// What the shell does with one directory on the way to the one it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `mkdir` it with mode [`PRIVATE`] (then look again: another step may have made it first).
    Make,
    /// Root's and closed: use it.
    Use,
    /// Root's but open to others (an older version made it `0755`): `chmod` it to [`PRIVATE`].
    Close,
    /// Not root's own directory: the step is refused with this reason.
    Refuse(String),
}

/// What to do with `path`, found so by a process of uid `me` (root).
pub fn action(path: &str, found: Found, me: u32) -> Action {
    match found {
        Found::Missing => Action::Make,
        Found::Other => Action::Refuse(format!(
            "{path} is not a directory (a link or a file): remove it as root; tfcluster makes \
             it again"
        )),
        Found::Dir { uid, .. } if uid != me => Action::Refuse(format!(
            "{path} belongs to uid {uid}, not to root: remove it as root (and look at who made \
             it); tfcluster makes it again"
        )),
        Found::Dir { mode, .. } if mode & 0o077 != 0 => Action::Close,
        Found::Dir { .. } => Action::Use,
    }
}

/// Every directory from [`RUN_DIR`] down to `dir` (which must be below it), in order: each is
/// checked, so a parent left open cannot hide a child another user replaced.
pub fn chain(dir: &str) -> Vec<String> {
    let Some(rest) = dir.strip_prefix(RUN_DIR) else {
        return vec![dir.to_string()];
    };
    let mut out = vec![RUN_DIR.to_string()];
    let mut path = RUN_DIR.to_string();
    for part in rest.split('/').filter(|p| !p.is_empty()) {
        path.push('/');
        path.push_str(part);
        out.push(path.clone());
    }
    out
}

/// Whether a file with permission bits `mode` must be made again before use: one others can
/// open (an older version's `0644` lock) may be open in another user's process already, which
/// would keep its `flock` after any `chmod`; a new file has an inode no one else holds.
pub fn replace_file(mode: u32) -> bool {
    mode & 0o077 != 0
}
