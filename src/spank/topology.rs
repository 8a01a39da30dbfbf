//! Reads the configuration files the topology rules ([`crate::core::topology::node_ranks`])
//! need, as slurmstepd itself runs with them: `SLURM_CONF` in its environment (which slurmd
//! sets, also in configless mode), /etc/slurm/slurm.conf otherwise. Each file is read to at
//! most one byte past [`MAX_CONF_BYTES`], so a huge file costs no more than that.

use crate::core::topology::{self, ConfFile, NodeRanks, MAX_CONF_BYTES};
use crate::core::Result;
use std::io::Read;
use std::path::{Path, PathBuf};

/// `None` when the cluster's topology does not reorder block steps; otherwise the ranking
/// plugin's node ranks, or why they cannot be known.
pub fn node_ranks() -> Option<Result<NodeRanks>> {
    topology::node_ranks(&slurm_conf(), read)
}

/// The slurm.conf slurmstepd runs with.
pub fn slurm_conf() -> PathBuf {
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
