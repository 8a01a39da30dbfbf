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
//!
//! slurm.conf itself, with the files it `Include`s, is read here ([`read_slurm_conf`]) for these
//! rules and for one more fact of it: whether slurmstepd runs some hooks in a child process
//! ([`SlurmConf::contain_spank`], used by `crate::spank::slurm_conf`).

use super::error::{Error, Result};
use super::hostlist;
use std::path::{Path, PathBuf};

/// The most bytes of one configuration file tfcluster reads (slurm.conf, its includes,
/// topology.conf): a site's largest are a few hundred KB. The shell reads at most one byte more,
/// so a larger file is refused, not read whole.
pub const MAX_CONF_BYTES: usize = 4 << 20;
/// The most `Include` files followed from slurm.conf.
pub const MAX_INCLUDES: usize = 64;

/// One configuration file, as the shell found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfFile {
    /// Its text: at most [`MAX_CONF_BYTES`] + 1 bytes (more means it is too large).
    Text(String),
    /// There is no such file.
    Missing,
    /// It exists but cannot be read (why).
    Unreadable(String),
}

/// Whether a step's ranks may follow the topology's node ranks, so that the shell must read
/// them ([`node_ranks`]): only on a release that reorders block steps (`release_reorders`,
/// known when the plugin is built), for a step on more than one node, and never for a
/// heterogeneous job's or step's, whose ranks come from its components' layouts.
pub fn applies(release_reorders: bool, nodes: u32, heterogeneous: bool) -> bool {
    release_reorders && nodes > 1 && !heterogeneous
}

/// The node ranks Slurm 26.05 orders a block step's nodes by, from the configuration files
/// slurmstepd runs with: `slurm_conf` (which may `Include` others, relative to its directory)
/// and the topology.conf or topology.yaml beside it, each read through `read`. `None` when the
/// topology does not reorder block steps; `Some(Err)` when it does but tfcluster cannot know
/// how (a file it cannot read, topology.yaml, a node no switch lists): the step is then refused
/// with what to do instead, never planned on a guess.
pub fn node_ranks(
    slurm_conf: &Path,
    read: impl Fn(&Path) -> ConfFile,
) -> Option<Result<NodeRanks>> {
    let dir = slurm_conf.parent().unwrap_or(Path::new("/")).to_path_buf();
    let file_text = |path: &Path| text(path, read(path));
    let conf = match read_slurm_conf(slurm_conf, &read) {
        Ok(conf) => conf,
        Err(reason) => {
            return Some(Err(Error::TopologyUnreadable {
                plugin: "unknown".to_string(),
                reason,
            }))
        }
    };
    let yaml = dir.join("topology.yaml");
    if read(&yaml) != ConfFile::Missing {
        return Some(Err(Error::TopologyUnreadable {
            plugin: conf
                .ranking_plugin()
                .unwrap_or("from topology.yaml")
                .to_string(),
            reason: "tfcluster does not read topology.yaml".into(),
        }));
    }
    let plugin = conf.ranking_plugin()?;
    let topology = match file_text(&dir.join("topology.conf")) {
        Ok(text) => text,
        Err(why) => {
            return Some(Err(Error::TopologyUnreadable {
                plugin: plugin.to_string(),
                reason: why,
            }))
        }
    };
    Some(NodeRanks::read(plugin, topology.as_deref()))
}

/// A file's text, `None` where it does not exist, or why it cannot be used.
fn text(path: &Path, file: ConfFile) -> std::result::Result<Option<String>, String> {
    match file {
        ConfFile::Text(text) if text.len() > MAX_CONF_BYTES => Err(format!(
            "{} is larger than {MAX_CONF_BYTES} bytes",
            path.display()
        )),
        ConfFile::Text(text) => Ok(Some(text)),
        ConfFile::Missing => Ok(None),
        ConfFile::Unreadable(why) => Err(format!("{}: {why}", path.display())),
    }
}

/// slurm.conf and the files it `Include`s (relative to its directory), each read through
/// `read`; why not, when one is missing, unreadable or too large, or there are too many.
pub fn read_slurm_conf(
    slurm_conf: &Path,
    read: impl Fn(&Path) -> ConfFile,
) -> std::result::Result<SlurmConf, String> {
    let dir = slurm_conf.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut conf = match text(slurm_conf, read(slurm_conf))? {
        Some(text) => SlurmConf::parse(&text),
        None => return Err(format!("{} does not exist", slurm_conf.display())),
    };
    let mut followed = 0;
    while followed < conf.includes.len() {
        if followed == MAX_INCLUDES {
            return Err(format!(
                "{} includes more than {MAX_INCLUDES} files",
                slurm_conf.display()
            ));
        }
        let include: PathBuf = dir.join(&conf.includes[followed]);
        followed += 1;
        match text(&include, read(&include))? {
            Some(text) => conf.add(&text),
            None => return Err(format!("{} does not exist", include.display())),
        }
    }
    Ok(conf)
}

/// What slurm.conf says about topology, and where slurmstepd runs the plugin's hooks (keys are
/// case-insensitive; a line may hold several `Key=Value` words).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmConf {
    pub topology_plugin: Option<String>,
    pub select_type_parameters: Option<String>,
    pub slurmd_parameters: Option<String>,
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
                } else if key.eq_ignore_ascii_case("SlurmdParameters") {
                    self.slurmd_parameters = Some(value.to_string());
                }
            }
        }
    }

    /// `SlurmdParameters=contain_spank` (24.05 and later): slurmstepd runs the `user_init`,
    /// `task_post_fork` and `task_exit` hooks in a short-lived child process that shares its
    /// memory. Matched as Slurm matches it, anywhere in the value, in any case.
    pub fn contain_spank(&self) -> bool {
        self.slurmd_parameters
            .as_deref()
            .is_some_and(|p| p.to_ascii_lowercase().contains("contain_spank"))
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
        let mut groups: Vec<Vec<String>> = Vec::new();
        let mut listed = 0;
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
                listed += hosts.len();
                if listed > hostlist::MAX_HOSTS {
                    return Err(unreadable(&format!(
                        "topology.conf lists more than {} nodes",
                        hostlist::MAX_HOSTS
                    )));
                }
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
