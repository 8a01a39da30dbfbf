//! The configuration files slurmstepd runs with, read for the core's rules (the topology's node
//! ranks, oci.conf, the hardware's and the kernel's files): `SLURM_CONF` in slurmstepd's own
//! environment (which slurmd sets, also in configless mode; not the job's), /etc/slurm/slurm.conf
//! otherwise. Each file is read to at most one byte past [`MAX_CONF_BYTES`], so a huge file
//! costs no more than that.

use crate::core::topology::{self, ConfFile, MAX_CONF_BYTES};
use crate::spank::ffi;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The slurm.conf slurmstepd runs with.
pub fn path() -> PathBuf {
    std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"))
}

/// One configuration file, read to at most one byte past [`MAX_CONF_BYTES`].
pub fn read(path: &Path) -> ConfFile {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ConfFile::Missing,
        Err(e) => return ConfFile::Unreadable(e.to_string()),
    };
    let mut text = String::new();
    match file
        .take(MAX_CONF_BYTES as u64 + 1)
        .read_to_string(&mut text)
    {
        Ok(_) => ConfFile::Text(text),
        Err(e) => ConfFile::Unreadable(e.to_string()),
    }
}

/// Whether slurmstepd may run `task_post_fork` (and `user_init`, `task_exit`) in a short-lived
/// child process, where no thread outlives the hook: under `SlurmdParameters=contain_spank`, on
/// a release that has it (24.05 and later, known at build time). A slurm.conf that cannot be
/// read counts as yes: a thread that must outlive the hooks then starts before them.
pub fn hooks_may_run_in_children() -> bool {
    ffi::HOOKS_MAY_RUN_IN_CHILDREN
        && topology::read_slurm_conf(&path(), read).map_or(true, |conf| conf.contain_spank())
}
