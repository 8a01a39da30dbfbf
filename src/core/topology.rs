//! Slurm 26.05's topology order for block-distributed steps.
//!
//! From 26.05, when the topology plugin ranks nodes, Slurm gives a block-distributed step's tasks
//! to its nodes in rank order (ties in node order) instead of node order, and no variable of the
//! step says so: `SLURM_STEP_NODELIST` stays in node order. Cyclic, plane and arbitrary steps,
//! and steps on one node, are not reordered; `CR_NO_DIST_TOPO_BLOCK` in `SelectTypeParameters`
//! turns it off.
//!
//! The ranks come from the configuration every node has: with `topology/tree` a node's rank is
//! the position of its leaf switch (a `SwitchName` line with `Nodes=`) in topology.conf, with
//! `topology/block` the position of its `BlockName` line (both seen on Slurm 26.05.5). Other
//! ranking plugins (ring, torus3d, flat with `alpha_step_rank` in topology.yaml) are not read:
//! for those a block step is refused with what to do instead.

use super::error::{Error, Result};
use super::hostlist;

/// What slurm.conf says about topology (keys are case-insensitive; a line may hold several
/// `Key=Value` words).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmConf {
    pub topology_plugin: Option<String>,
    pub select_type_parameters: Option<String>,
    /// `Include` lines, in order, to be read and parsed in turn.
    pub includes: Vec<String>,
}

impl SlurmConf {
    pub fn parse(text: &str) -> SlurmConf {
        let mut conf = SlurmConf::default();
        conf.add(text);
        conf
    }

    /// Adds an included file's settings (later lines win, as in Slurm).
    pub fn add(&mut self, text: &str) {
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(path) = line
                .split_once(char::is_whitespace)
                .filter(|(word, _)| word.eq_ignore_ascii_case("include"))
                .map(|(_, path)| path.trim())
            {
                self.includes.push(path.to_string());
                continue;
            }
            for word in line.split_whitespace() {
                let Some((key, value)) = word.split_once('=') else {
                    continue;
                };
                if key.eq_ignore_ascii_case("TopologyPlugin") {
                    self.topology_plugin = Some(value.to_string());
                } else if key.eq_ignore_ascii_case("SelectTypeParameters") {
                    self.select_type_parameters = Some(value.to_string());
                }
            }
        }
    }

    /// The topology plugin whose node ranks reorder block steps, if any (`topology/tree`,
    /// `topology/block`, ...); `None` for the flat default or when the admin turned it off.
    pub fn ranking_plugin(&self) -> Option<&str> {
        let off = self.select_type_parameters.as_deref().is_some_and(|p| {
            p.split(',')
                .any(|w| w.eq_ignore_ascii_case("CR_NO_DIST_TOPO_BLOCK"))
        });
        let plugin = self.topology_plugin.as_deref()?.trim();
        let flat = [
            "",
            "none",
            "default",
            "topology/none",
            "topology/default",
            "topology/flat",
        ];
        (!off && !flat.iter().any(|f| plugin.eq_ignore_ascii_case(f))).then_some(plugin)
    }
}

/// Every node's rank under a ranking plugin: the node list of each ranked group (leaf switch or
/// block), in rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRanks {
    /// The plugin the ranks come from (`topology/tree`), for messages.
    plugin: String,
    groups: Vec<Vec<String>>,
}

impl NodeRanks {
    /// From topology.conf, for `plugin` (`topology/tree` or `topology/block`).
    /// `topology_conf` is `None` when the file could not be read.
    pub fn read(plugin: &str, topology_conf: Option<&str>) -> Result<NodeRanks> {
        let unreadable = |reason: &str| Error::TopologyUnreadable {
            plugin: plugin.to_string(),
            reason: reason.to_string(),
        };
        let group_key = match plugin {
            "topology/tree" => "SwitchName",
            "topology/block" => "BlockName",
            _ => {
                return Err(unreadable(
                    "tfcluster reads only topology/tree and topology/block",
                ))
            }
        };
        let text = topology_conf.ok_or_else(|| unreadable("topology.conf cannot be read"))?;
        let mut groups = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let words: Vec<(&str, &str)> = line
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .collect();
            let named = words.iter().any(|(k, _)| k.eq_ignore_ascii_case(group_key));
            let nodes = words.iter().find(|(k, _)| k.eq_ignore_ascii_case("Nodes"));
            if let (true, Some((_, list))) = (named, nodes) {
                let hosts = hostlist::expand(list)
                    .map_err(|e| unreadable(&format!("topology.conf: {e}")))?;
                groups.push(hosts);
            }
        }
        Ok(NodeRanks {
            plugin: plugin.to_string(),
            groups,
        })
    }

    /// The rank of `host` (its group's position), or `None` when no group lists it.
    pub fn rank(&self, host: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.iter().any(|h| h == host))
    }

    /// The order in which Slurm gives a block step's tasks to its nodes (`hosts`, in node
    /// order): by rank, ties in node order.
    pub fn order(&self, hosts: &[String]) -> Result<Vec<usize>> {
        let mut keyed = Vec::with_capacity(hosts.len());
        for (index, host) in hosts.iter().enumerate() {
            let rank = self.rank(host).ok_or_else(|| Error::TopologyUnreadable {
                plugin: self.plugin.clone(),
                reason: format!("topology.conf does not place node {host}"),
            })?;
            keyed.push((rank, index));
        }
        keyed.sort_unstable();
        Ok(keyed.into_iter().map(|(_, index)| index).collect())
    }
}
