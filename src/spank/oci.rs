//! The node's oci.conf ([`crate::core::oci`]) for a step in Slurm's container: read, and its
//! `EnvExclude` compiled, once per node before the tasks fork; the node's first task then
//! warns when Slurm would start the runtime without the task's environment, or remove some of
//! the task's variables from it.

use super::log;
use super::regex::Regex;
use super::slurm_conf;
use crate::core::container::ContainerWarning;
use crate::core::oci::{self, OciConf};
use std::borrow::Cow;

pub struct NodeOci {
    conf: OciConf,
    /// `EnvExclude`, compiled; `None` without one, or for one that does not compile (which
    /// fails the container step in Slurm itself).
    regex: Option<Regex>,
    /// The step's bundle (`SLURM_CONTAINER`), for the message.
    bundle: String,
}

impl NodeOci {
    /// The node's oci.conf, when it has one that can keep the task's variables from the
    /// container.
    pub fn of_node(bundle: String) -> Option<NodeOci> {
        let conf = oci::node_conf(&slurm_conf::path(), slurm_conf::read)?;
        let regex = conf
            .env_exclude
            .as_deref()
            .and_then(|pattern| match Regex::new(pattern) {
                Ok(regex) => Some(regex),
                Err(e) => {
                    log::debug(&format!(
                        "oci.conf EnvExclude {pattern:?} does not compile: {e}"
                    ));
                    None
                }
            });
        (conf.loses_task_env() || regex.is_some()).then_some(NodeOci {
            conf,
            regex,
            bundle,
        })
    }

    /// The warning for a task whose variables (`set`) cannot all reach its container, if any.
    pub fn warning(&self, node: &str, set: &[(&'static str, Cow<'_, str>)]) -> Option<String> {
        let (node, bundle) = (node.to_string(), self.bundle.clone());
        if self.conf.loses_task_env() {
            return Some(ContainerWarning::TaskEnvLost { node, bundle }.to_string());
        }
        let (regex, pattern) = (self.regex.as_ref()?, self.conf.env_exclude.clone()?);
        let names = oci::excluded(set, |text| regex.is_match(text));
        (!names.is_empty()).then(|| {
            ContainerWarning::EnvExcluded {
                node,
                pattern,
                names: names.join(", "),
                bundle,
            }
            .to_string()
        })
    }
}
