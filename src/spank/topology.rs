//! Reads the topology facts Slurm 26.05 orders block steps by, from the configuration files
//! slurmstepd itself runs with (`SLURM_CONF` in its environment, which slurmd sets, also in
//! configless mode; /etc/slurm/slurm.conf otherwise). The rules are in [`crate::core::topology`].

use crate::core::topology::{NodeRanks, SlurmConf};
use crate::core::{Error, Result};
use std::path::{Path, PathBuf};

/// `None` when the cluster's topology does not reorder block steps; otherwise the ranking
/// plugin and its node ranks, or why they cannot be known.
pub fn node_ranks() -> Option<Result<NodeRanks>> {
    let path = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"));
    let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let unreadable = |plugin: &str, reason: String| {
        Some(Err(Error::TopologyUnreadable {
            plugin: plugin.to_string(),
            reason,
        }))
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return unreadable("unknown", format!("{} cannot be read", path.display()));
    };
    let mut conf = SlurmConf::parse(&text);
    let mut read = 0;
    while read < conf.includes.len() && read < 64 {
        let include = dir.join(&conf.includes[read]);
        read += 1;
        match std::fs::read_to_string(&include) {
            Ok(text) => conf.add(&text),
            Err(e) => return unreadable("unknown", format!("{}: {e}", include.display())),
        }
    }
    if dir.join("topology.yaml").exists() {
        let plugin = conf
            .ranking_plugin()
            .unwrap_or("from topology.yaml")
            .to_string();
        return unreadable(&plugin, "tfcluster does not read topology.yaml".into());
    }
    let plugin = conf.ranking_plugin()?;
    let topology = std::fs::read_to_string(dir.join("topology.conf")).ok();
    Some(NodeRanks::read(plugin, topology.as_deref()))
}
