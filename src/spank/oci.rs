//! The node's oci.conf `EnvExclude` ([`crate::core::oci`]) for a step in Slurm's container:
//! read and compiled once per node before the tasks fork; the node's first task then matches
//! its own variables against it and warns when Slurm would remove any.

use super::log;
use super::regex::Regex;
use super::topology;
use crate::core::container::ContainerWarning;
use crate::core::oci;
use std::borrow::Cow;

pub struct EnvExclude {
    pattern: String,
    regex: Regex,
    /// The step's bundle (`SLURM_CONTAINER`), for the message.
    bundle: String,
}

impl EnvExclude {
    /// The node's pattern, when its oci.conf has one that compiles (one that does not fails
    /// the container step in Slurm itself).
    pub fn of_node(bundle: String) -> Option<EnvExclude> {
        let pattern = oci::node_env_exclude(&topology::slurm_conf(), topology::read)?;
        match Regex::new(&pattern) {
            Ok(regex) => Some(EnvExclude {
                pattern,
                regex,
                bundle,
            }),
            Err(e) => {
                log::debug(&format!(
                    "oci.conf EnvExclude {pattern:?} does not compile: {e}"
                ));
                None
            }
        }
    }

    /// The warning for a task whose variables (`set`) the pattern would remove, if any.
    pub fn warning(&self, node: &str, set: &[(&'static str, Cow<'_, str>)]) -> Option<String> {
        let names = oci::excluded(set, |text| self.regex.is_match(text));
        (!names.is_empty()).then(|| {
            ContainerWarning::EnvExcluded {
                node: node.to_string(),
                pattern: self.pattern.clone(),
                names: names.join(", "),
                bundle: self.bundle.clone(),
            }
            .to_string()
        })
    }
}
