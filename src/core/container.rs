//! Slurm's own OCI containers (`srun --container=BUNDLE`, `sbatch --container`, scrun): whether
//! what tfcluster sets for a task can reach the program inside.
//!
//! Before 23.02 slurmstepd writes the container's environment (config.json's `process.env`)
//! while it sets the step up, before any plugin's `task_init` and before Slurm's own GPU
//! variables, and never writes it again; it also runs one task per node at most. A task in
//! such a container gets no TF_CONFIG, no CUDA_VISIBLE_DEVICES and no SLURM_PROCID: it trains
//! alone and exits 0. From 23.02 (SchedMD bug 15449) the file is written again from the final
//! task environment just before the runtime starts, so the variables arrive.

use super::error::{Error, Result};

/// srun exports the bundle here for a `--container` step (and reads it back from a batch
/// script's environment when `sbatch --container` gave one), on every release.
pub const VAR: &str = "SLURM_CONTAINER";

/// The step's container as srun sees it, and whether this release hands a container its
/// task's final environment (decided at build time from the release).
#[derive(Debug, Clone, Copy)]
pub struct ContainerStep<'a> {
    /// `SLURM_CONTAINER` in srun's environment; unset or empty means no container.
    pub bundle: Option<&'a str>,
    /// The Slurm release, `major.minor`, for the message.
    pub release: &'a str,
    /// Whether the container's environment is written after `task_init` (23.02 and later).
    pub gets_task_env: bool,
}

impl ContainerStep<'_> {
    /// Refuses, before launch, a container step whose tasks could not get their TF_CONFIG.
    pub fn check(&self) -> Result<()> {
        match self.bundle {
            Some(bundle) if !bundle.is_empty() && !self.gets_task_env => {
                Err(Error::ContainerTooOld {
                    bundle: shown(bundle),
                    release: self.release.into(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// The longest bundle path a message repeats (Linux's PATH_MAX); a longer value is cut.
const MAX_SHOWN: usize = 4096;

fn shown(bundle: &str) -> String {
    if bundle.len() <= MAX_SHOWN {
        return bundle.into();
    }
    let mut end = MAX_SHOWN;
    while !bundle.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &bundle[..end])
}
