//! slurmstepd's claim on its node's step ports ([`crate::core::claims`] says why and what a claim
//! is): taken before the tasks fork, under a lock on the node's claims, and given back when
//! slurmstepd exits. This file does the files and the lock ([`process`] the processes' start
//! times); the core decides.

use crate::core::claims::{self, Claim};
use crate::spank::{process, run_dir, sock_diag};
use std::fs;
use std::path::PathBuf;

/// A claim this slurmstepd made, removed when dropped: when slurmstepd exits, or when the
/// node fails to set up the step after claiming (its firewall, say).
pub struct Claimed {
    path: PathBuf,
}

/// The step whose ports a node claims.
pub struct Claimant<'a> {
    /// The Slurm name of the node.
    pub node: &'a str,
    /// The step's jobs (one; a heterogeneous job's components are jobs of their own).
    pub jobs: &'a [u32],
    pub step_id: u32,
    /// The ports this node's tasks listen on.
    pub ports: &'a [u16],
}

impl Claimant<'_> {
    /// Claims the ports, or says why not: the core's refusal ([`claims::check_free`]), or what
    /// the node's files would not do (the step cannot be kept from another's ports then, so it
    /// does not start).
    pub fn claim(&self) -> Result<Claimed, String> {
        // The step's own job: the first component's in a heterogeneous job.
        let job_id = self.jobs.first().copied().unwrap_or_default();
        // Held until `lock` is dropped (closed), also when slurmstepd dies meanwhile.
        let (dir, lock) = lock_node(self.node)?;
        let io = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", dir.display());
        let live = live_claims(&dir);
        claims::check_free(
            self.ports,
            self.jobs,
            &live,
            &sock_diag::holding(self.ports),
        )
        .map_err(|e| e.to_string())?;
        let owner = process::me()
            .ok_or_else(|| "cannot read slurmstepd's own /proc/self/stat".to_string())?;
        let claim = Claim {
            job_id,
            step_id: self.step_id,
            owner,
            ports: self.ports.to_vec(),
        };
        let path = dir.join(Claim::file_name(claim.job_id, claim.step_id));
        crate::spank::run_dir::write_private(&path, &claim.text())
            .map_err(|e| io("write a claim in", e))?;
        drop(lock);
        Ok(Claimed { path })
    }
}

/// The node's claims directory, made root's alone, and its lock, taken within its deadline
/// (held until the file is dropped). `--tf-cluster=check` takes it too ([`crate::spank::check`]).
pub fn lock_node(node: &str) -> Result<(PathBuf, fs::File), String> {
    let dir = PathBuf::from(claims::node_dir(node));
    run_dir::private(&dir)?;
    let lock = run_dir::lock(&dir.join(claims::LOCK_FILE), claims::LOCK_WAIT)?;
    Ok((dir, lock))
}

impl Drop for Claimed {
    /// The ports are free for other steps again. A claim left behind is stale once this
    /// process is gone, so a failure harms no one.
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// The claims in `dir` whose process still runs; stale ones are removed on the way (the caller
/// holds the lock).
fn live_claims(dir: &std::path::Path) -> Vec<Claim> {
    let (live, stale) = claims_in(dir);
    for path in stale {
        let _ = fs::remove_file(path);
    }
    live
}

/// The claims in `dir`: those whose process still runs, and the files of those whose process
/// is gone. Files of another shape are passed over.
pub fn claims_in(dir: &std::path::Path) -> (Vec<Claim>, Vec<PathBuf>) {
    let (mut live, mut stale) = (Vec::new(), Vec::new());
    let Ok(entries) = fs::read_dir(dir) else {
        return (live, stale);
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(claim) = fs::read_to_string(entry.path())
            .ok()
            .and_then(|text| Claim::parse(name, &text))
        else {
            continue;
        };
        match claim.is_live(process::stat) {
            true => live.push(claim),
            false => stale.push(entry.path()),
        }
    }
    (live, stale)
}
