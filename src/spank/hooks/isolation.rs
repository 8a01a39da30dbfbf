//! `isolate=yes` on the nodes: each slurmstepd installs its step's firewall before the tasks
//! fork and removes it when it exits; slurmd's job epilog removes whatever any step of the job
//! left (a slurmstepd killed with SIGKILL runs no exit hook). All as root, all through
//! libnftables ([`Nft`]); the rules themselves are the core's ([`crate::core::isolation`]).

use crate::core::isolation;
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

/// slurmstepd, before the tasks fork, once the node's ports are claimed ([`crate::spank::claims`]):
/// with `isolate=yes`, this node's rules for the step, once no other step's table holds one of
/// its ports. An error
/// names the node and why; the caller stops the step, so no task starts unprotected.
/// `own_jobs`: the step's jobs (a heterogeneous job's components share a node's ports).
pub fn install(
    plan: &StepPlan,
    (job_id, own_jobs): (u32, &[u32]),
    step_id: u32,
    uid: u32,
    node: usize,
) -> Result<Option<Installed>, ShellError> {
    let failed = |reason: String| ShellError::Isolation {
        node: plan.hosts.get(node).cloned().unwrap_or_default(),
        reason,
    };
    let Some(firewall) = plan.isolation(job_id, step_id, uid, node) else {
        return Ok(None);
    };
    let script = firewall
        .script(resolve)
        .map_err(|e| failed(e.to_string()))?;
    let mut nft = Nft::open().map_err(|e| {
        failed(format!(
            "{e}; install it on every node (Debian: libnftables1, RHEL: nftables)"
        ))
    })?;
    let listing = nft.run("list tables").map_err(|e| {
        failed(format!(
            "cannot list the node's nftables tables: {e}; check that slurmstepd runs as root"
        ))
    })?;
    let table = firewall.table();
    if isolation::listed(&listing).any(|t| t == table) {
        // Left by a killed slurmstepd of this step's job before a requeue.
        nft.run(&isolation::removal(&table)).map_err(|e| {
            failed(format!(
                "cannot remove the table inet {table} left here: {e}; once no slurmstepd of \
                 that step runs on the node, remove it as root (nft delete table inet {table})"
            ))
        })?;
    }
    tables_clear(
        &mut nft,
        &listing,
        (own_jobs, step_id),
        &firewall.own_ports(),
    )
    .map_err(|e| failed(e.to_string()))?;
    // A table that outlives a killed slurmstepd where libnftables and the kernel can keep one;
    // else one owned by this slurmstepd.
    nft.run(&isolation::persistent(&script))
        .or_else(|_| nft.run(&script))
        .map_err(|e| {
            failed(format!(
                "nftables refused the rules: {e}; check that the node's kernel has nf_tables \
                 (modprobe nf_tables) and is Linux 5.12 or later (tables owned by a process), \
                 and that slurmstepd runs as root"
            ))
        })?;
    Ok(Some(Installed { table, nft }))
}

/// Refuses `ports` when another step's table in `listing` holds one of them (each asked for its
/// ports; one that vanishes meanwhile is passed over).
fn tables_clear(
    nft: &mut Nft,
    listing: &str,
    (own_jobs, step_id): (&[u32], u32),
    ports: &[u16],
) -> crate::core::Result<()> {
    let tables: Vec<(&str, Vec<u16>)> = isolation::other_tables(listing, own_jobs, step_id)
        .into_iter()
        .filter_map(|table| {
            let set = nft.run(&format!("list set inet {table} ports")).ok()?;
            Some((table, isolation::set_ports(&set)))
        })
        .collect();
    isolation::check_tables(ports, &tables)
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
/// read here again since this process ran no other hook): remove every table any step of this
/// job left here, also after `isolate=yes` was turned off. With `isolate=yes` a failure fails
/// the epilog (Slurm drains the node, with the line in slurmd's log): rules must not outlive
/// their job unnoticed. Without libnftables no step here can have installed any, so there is
/// nothing to remove.
pub fn job_epilog(sp: &Spank, args: &[String]) -> c_int {
    let isolate = Settings::from_plugstack(args).is_ok_and(|s| s.isolate);
    let Ok(job_id) = sp.item_u32(U32Item::JobId) else {
        return 0;
    };
    let Ok(mut nft) = Nft::open() else {
        return 0;
    };
    let removed = nft.run("list tables").and_then(|listing| {
        // One transaction per table: a table its slurmstepd removed meanwhile is no failure.
        for table in isolation::job_tables(&listing, job_id) {
            if let Err(e) = nft.run(&isolation::removal(table)) {
                let now = nft.run("list tables")?;
                if isolation::listed(&now).any(|t| t == table) {
                    return Err(e);
                }
            }
        }
        Ok(())
    });
    match (removed, isolate) {
        (Ok(()), _) => 0,
        // Without isolate=yes no table is expected: listing may fail where nftables is unused.
        (Err(_), false) => 0,
        (Err(e), true) => {
            log::error(&format!(
                "isolate=yes: could not remove job {job_id}'s firewall tables \
                 (inet {}{job_id}_*): {e}",
                isolation::TABLE_PREFIX
            ));
            -1
        }
    }
}
