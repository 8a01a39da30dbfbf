//! `isolate=yes` on the nodes: each slurmstepd installs its step's firewall before the tasks
//! fork and removes it when it exits; slurmd's job epilog removes whatever any step of the job
//! left (a slurmstepd killed with SIGKILL runs no exit hook). All as root, all through
//! libnftables ([`Nft`]); the rules themselves are the core's ([`crate::core::isolation`]).

use crate::core::isolation::{self, table_name};
use crate::core::{Settings, StepPlan};
use crate::spank::error::ShellError;
use crate::spank::handle::{Spank, U32Item};
use crate::spank::log;
use crate::spank::nftables::Nft;
use std::ffi::c_int;
use std::net::{IpAddr, ToSocketAddrs};

/// The firewall one slurmstepd installed, removed when it exits ([`remove`]).
pub struct Installed {
    table: String,
    nft: Nft,
}

/// slurmstepd, before the tasks fork: with `isolate=yes`, this node's rules for the step. An
/// error names the node and why; the caller stops the step, so no task starts unprotected.
pub fn install(
    plan: &StepPlan,
    job_id: u32,
    step_id: u32,
    uid: u32,
    node: usize,
) -> Result<Option<Installed>, ShellError> {
    let failed = |reason: String| ShellError::Isolation {
        node: plan.hosts.get(node).cloned().unwrap_or_default(),
        reason,
    };
    let Some(script) = plan
        .firewall(job_id, step_id, uid, node, resolve)
        .map_err(|e| failed(e.to_string()))?
    else {
        return Ok(None);
    };
    let mut nft = Nft::open().map_err(|e| {
        failed(format!(
            "{e}; install it on every node (Debian: libnftables1, RHEL: nftables)"
        ))
    })?;
    nft.run(&script).map_err(|e| {
        failed(format!(
            "nftables refused the rules: {e}; check that the node's kernel has nf_tables \
                 (modprobe nf_tables) and that slurmstepd runs as root"
        ))
    })?;
    Ok(Some(Installed {
        table: table_name(job_id, step_id),
        nft,
    }))
}

/// The addresses a node's address resolves to (the resolver the node itself uses: getaddrinfo,
/// so /etc/hosts, DNS, or whatever nsswitch.conf names).
fn resolve(address: &str) -> Result<Vec<IpAddr>, String> {
    (address, 0)
        .to_socket_addrs()
        .map(|found| found.map(|a| a.ip()).collect())
        .map_err(|e| e.to_string())
}

/// slurmstepd, as it exits: the step's rules go with it. A failure is logged; the job epilog
/// tries again.
pub fn remove(installed: &mut Installed) {
    if let Err(e) = installed.nft.run(&isolation::removal(&installed.table)) {
        log::error(&format!(
            "isolate=yes: could not remove the step's firewall (table inet {}): {e}; the job's \
             epilog removes it",
            installed.table
        ));
    }
}

/// slurmd's job epilog, on every node of the job, as root (`args`: the plugstack.conf words,
/// read here again since this process ran no other hook): with `isolate=yes`, remove every table
/// any step of this job left here. A failure fails the epilog (Slurm drains the node, with the
/// line in slurmd's log): rules must not outlive their job unnoticed. Without libnftables no
/// step here can have installed any, so there is nothing to remove.
pub fn job_epilog(sp: &Spank, args: &[String]) -> c_int {
    if !Settings::from_plugstack(args).is_ok_and(|s| s.isolate) {
        return 0;
    }
    let Ok(job_id) = sp.item_u32(U32Item::JobId) else {
        return 0;
    };
    let Ok(mut nft) = Nft::open() else {
        return 0;
    };
    let removed = nft.run("list tables").and_then(|listing| {
        let tables = isolation::job_tables(&listing, job_id);
        let script: String = tables.iter().map(|t| isolation::removal(t)).collect();
        match script.is_empty() {
            true => Ok(()),
            false => nft.run(&script).map(drop),
        }
    });
    match removed {
        Ok(()) => 0,
        Err(e) => {
            log::error(&format!(
                "isolate=yes: could not remove job {job_id}'s firewall tables \
                 (inet {}{job_id}_*): {e}",
                isolation::TABLE_PREFIX
            ));
            -1
        }
    }
}
