//! `isolate=yes` in the step's slurmstepd: it installs its step's firewall before the tasks
//! fork and, when it exits, leaves only what keeps other users on the node away from the step's
//! other nodes until the step has ended (slurmd's job epilog removes whatever any step of the
//! job left: `crate::spank::hooks::epilog`). All as root, through the kernel's own netlink
//! messages ([`nftables::install`], [`nftables::delete_table`], [`nftables::set_ports`]): no
//! libnftables is loaded on a step's path unless the core cannot write a script, and the
//! step's table stays owned by the socket that made it while the tasks run; the rules themselves
//! are the core's ([`crate::core::isolation`]).

use crate::core::isolation;
use crate::core::StepPlan;
use crate::spank::error::ShellError;
use crate::spank::isolation::handover::{self, Handed};
use crate::spank::isolation::nftables::{self, Nft, OwnerSocket};
use crate::spank::log;
use crate::spank::resolver::resolve;
use crate::spank::slurm;
use crate::spank::slurm_conf;
use std::path::Path;

/// The firewall one slurmstepd installed, which [`leave`] replaces when it exits.
pub struct Installed {
    table: String,
    /// The script of what the node keeps once its tasks have ended
    /// ([`isolation::rules::StepFirewall::scripts`]).
    ended: String,
    keeper: Keeper,
    /// The step (the holder of the node's job takes the ended table over).
    step: (u32, u32),
    /// The node's name as slurmstepd has it ([`crate::spank::step::Shape::node`]): where the
    /// node's holder directories are.
    node: Option<String>,
}

/// What keeps the step's table owned while the tasks run: the netlink socket that made it; or,
/// where libnftables made it and its socket cannot be told apart from the process's others,
/// the whole context, as before 0.15.0.
enum Keeper {
    Socket(OwnerSocket),
    Context(Nft),
}

/// What a node needs for everything `isolate=yes` does (the step's own addresses aside): SYN
/// cookies that let the owner's handshakes through, and libnftables, which the job's holder of
/// ended tables loads ([`super::holder`]) and a step falls back to ([`install_owned`]); its
/// context, or why not. `--tf-cluster=check` asks this ([`crate::spank::check`]); a step checks
/// the SYN cookies alone, and loads no libnftables.
pub fn ready() -> Result<Nft, String> {
    syncookies().map_err(|e| e.to_string())?;
    Nft::open().map_err(|e| {
        format!("{e}; install it on every node (Debian: libnftables1, RHEL: nftables)")
    })
}

/// Whether the node's SYN cookies let the owner's handshakes through its rules
/// ([`isolation::rules::check_syncookies`]).
fn syncookies() -> crate::core::Result<()> {
    isolation::rules::check_syncookies(slurm_conf::read(Path::new(isolation::rules::SYNCOOKIES)))
}

/// slurmstepd, before the tasks fork, once the node's ports are claimed ([`crate::spank::claims`]):
/// with `isolate=yes`, this node's rules for the step, once no other step's table holds one of
/// its ports. An error
/// names the node and why; the caller stops the step, so no task starts unprotected.
/// `own_jobs`: the step's jobs (a heterogeneous job's components share a node's ports); `node`:
/// the node's index in the plan, and its name as slurmstepd has it.
pub fn install(
    plan: &StepPlan,
    (job_id, own_jobs): (u32, &[u32]),
    step_id: u32,
    uid: u32,
    (node, name): (usize, Option<&str>),
) -> Result<Option<Installed>, ShellError> {
    let failed = |reason: String| ShellError::Isolation {
        node: plan.hosts.get(node).cloned().unwrap_or_default(),
        reason,
    };
    let Some(firewall) = plan.isolation(job_id, step_id, uid, node) else {
        return Ok(None);
    };
    let (script, ended) = firewall
        .scripts(resolve)
        .map_err(|e| failed(e.to_string()))?;
    syncookies().map_err(|e| failed(e.to_string()))?;
    let listed = nftables::owned_tables().map_err(|e| {
        failed(format!(
            "cannot list the node's nftables tables: {e}; check that slurmstepd runs as root"
        ))
    })?;
    let listing: Vec<String> = listed.iter().map(|t| t.name.clone()).collect();
    let table = firewall.table();
    // Left by this step's job before a requeue: by a killed slurmstepd, or after its tasks ended.
    let own = [
        table.clone(),
        isolation::tables::ended_table_name(job_id, step_id),
    ];
    for left in &own {
        if listing.contains(left) {
            nftables::delete_table(left).map_err(|e| {
                failed(format!(
                    "cannot remove the table inet {left} left here: {e}; once no slurmstepd \
                     of that step runs on the node, remove it as root (nft delete table inet \
                     {left})"
                ))
            })?;
        }
    }
    let mut gone = remove_ended(&listing, (job_id, step_id));
    // One more table here: within the node's bound and the user's (whose each other job's
    // tables are, their comments say, or, for a table without one, slurmctld; asked only where
    // the node holds MAX_TABLES_PER_USER or more).
    gone.extend(own.iter().map(String::as_str));
    let jobs = isolation::tables::table_jobs(&listing, &gone);
    isolation::tables::check_table_count(&jobs, uid, |job| match own_jobs.contains(&job) {
        true => Some(uid),
        false => isolation::tables::commented_owner(&listed, job)
            .or_else(|| slurm::job_record(job).ok().flatten().map(|r| r.user_id)),
    })
    .map_err(|e| failed(e.to_string()))?;
    tables_clear(
        (&listing, &gone),
        (own_jobs, step_id),
        &firewall.own_ports(),
    )
    .map_err(|e| failed(e.to_string()))?;
    let keeper = install_owned(&script).map_err(|e| {
        failed(format!(
            "nftables refused the rules: {e}; check that the node's kernel has nf_tables \
                 (modprobe nf_tables) and is Linux 5.12 or later (tables owned by a process), \
                 and that slurmstepd runs as root"
        ))
    })?;
    Ok(Some(Installed {
        table,
        ended,
        keeper,
        step: (job_id, step_id),
        node: name.map(str::to_string),
    }))
}

/// The step's table, owned by this slurmstepd: with `persist` first, so that it outlives a
/// slurmstepd killed with SIGKILL until the job's epilog ([`isolation::rules::persistent`]),
/// where the kernel has the flag (Linux 6.9), else owned alone. Through the core's own messages
/// ([`nftables::install`]): no libnftables is loaded, so the tasks fork without it. Where the
/// core does not write the script, through libnftables as before 0.16.0, which is let go
/// before the tasks fork where its socket can be told apart ([`Nft::release`]).
fn install_owned(script: &str) -> Result<Keeper, String> {
    let persistent = isolation::rules::persistent(script);
    let installed = nftables::install(&persistent).or_else(|_| nftables::install(script))?;
    if let Some(socket) = installed {
        return Ok(Keeper::Socket(socket));
    }
    // Not the core's script: libnftables.
    let mut nft = ready()?;
    match nft.may_persist() {
        true => nft.run(&persistent).or_else(|_| nft.run(script)),
        false => nft.run(script),
    }?;
    Ok(match nft.release() {
        Ok(socket) => Keeper::Socket(socket),
        Err(nft) => Keeper::Context(nft),
    })
}

/// Removes the tables of other steps whose tasks ended here once slurmctld says those steps
/// have ended everywhere (one request per table; usually the job's previous step): slurmd's
/// holder lets go of one it holds, any other goes here. A table whose step slurmctld cannot
/// answer for stays, for the next step or the job's epilog, as does every table while
/// slurmctld does not know this step's own job ([`slurm::step_exists_vouched`]). The tables it
/// removed.
fn remove_ended(listing: &[String], own: (u32, u32)) -> Vec<&str> {
    let mut gone = Vec::new();
    for (table, job_id, step_id) in isolation::tables::ended_steps(listing) {
        // Gone only once removed: a table whose removal failed (a holder of another job still
        // owns it) keeps its ports for `tables_clear` to see.
        if (job_id, step_id) != own
            && slurm::step_exists_vouched(job_id, step_id, own.0) == Some(false)
            && nftables::delete_table(table).is_ok()
        {
            gone.push(table);
        }
    }
    gone
}

/// Refuses `ports` when another step's table among the node's (`listing`) holds one of them
/// (each asked of the kernel for its ports; one that vanishes meanwhile, or that `gone` names,
/// is passed over).
fn tables_clear(
    (listing, gone): (&[String], &[&str]),
    (own_jobs, step_id): (&[u32], u32),
    ports: &[u16],
) -> crate::core::Result<()> {
    let tables: Vec<(&str, Vec<u16>)> = isolation::tables::other_tables(listing, own_jobs, step_id)
        .into_iter()
        .filter(|table| !gone.contains(table))
        .filter_map(|table| Some((table, nftables::set_ports(table)?)))
        .collect();
    isolation::tables::check_tables(ports, &tables)
}

/// slurmstepd, as it exits, its tasks all ended: the step may still run on other nodes, which
/// admit this node's address, so the node keeps the rules that keep other users here away from
/// them, in a table that outlives this process ([`remove_ended`] and the job's epilog remove it),
/// then removes the step's own (through the socket that owns it). Both through the kernel's own
/// messages, libnftables only where the core does not write the first. A failure is logged;
/// the job epilog tries again.
pub fn leave(installed: &mut Installed) {
    // Not owned: the socket that made it may close at once.
    let ended = match nftables::install(&installed.ended) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => match &mut installed.keeper {
            Keeper::Context(nft) => nft.run(&installed.ended).map(drop),
            Keeper::Socket(_) => {
                Nft::open().and_then(|mut nft| nft.run(&installed.ended).map(drop))
            }
        },
        Err(e) => Err(e),
    };
    if let Err(e) = ended {
        log::error(&format!(
            "isolate=yes: could not keep the rules for the step's other nodes after this node's \
             tasks ended: {e}; until the step ends, other users on this node may reach its \
             other nodes' servers: check the node's nftables as root (nft list tables), and \
             stop the step (scancel) if it must not run exposed"
        ));
    } else {
        let (job_id, step_id) = installed.step;
        let node = installed.node.as_deref();
        match handover::hand_over(node, (job_id, step_id), &installed.ended) {
            Handed::Held => {}
            Handed::NoHolder => handover::say_no_holder_once(node, (job_id, step_id)),
            Handed::NotTaken => log::error(&format!(
                "isolate=yes: the holder (job {job_id}'s extern step) did not take \
                 over this node's table for step {job_id}.{step_id}'s other nodes in time; it \
                 stays, owned by no process, until the step ends (the holder's own lines in \
                 slurmd's log, if any, say why)"
            )),
        }
    }
    let removed = match &mut installed.keeper {
        Keeper::Socket(socket) => socket.delete(&installed.table),
        Keeper::Context(nft) => nft
            .run(&isolation::tables::removal(&installed.table))
            .map(drop),
    };
    if let Err(e) = removed {
        log::error(&format!(
            "isolate=yes: could not remove the step's firewall (table inet {}): {e}; the job's \
             epilog removes it",
            installed.table
        ));
    }
}
