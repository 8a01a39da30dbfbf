//! The tables' names, and what a node's `nft list` says of them: which tables are a job's (the
//! epilog removes them), which steps' ended tables are on the node (the holder keeps them), and
//! which ports other steps' tables hold. Before the rules go in, a node refuses a step whose
//! ports another step's table holds ([`check_tables`]): the rules would act on the other job's
//! connections.

use crate::core::error::{Error, Result};
use crate::core::text::decimal;

/// Every table tfcluster makes starts with this; the rest is `JOB_STEP`.
pub const TABLE_PREFIX: &str = "tfcluster_";

/// The table of one step's rules on a node (family `inet`: IPv4 and IPv6 in one table).
pub fn table_name(job_id: u32, step_id: u32) -> String {
    format!("{TABLE_PREFIX}{job_id}_{step_id}")
}

/// What the name of a node's table after its tasks ended adds to [`table_name`].
pub const ENDED: &str = "_ended";

/// The table a node keeps for a step once its own tasks have all ended ([`super::rules::StepFirewall::scripts`]).
pub fn ended_table_name(job_id: u32, step_id: u32) -> String {
    format!("{}{ENDED}", table_name(job_id, step_id))
}

/// The tables of steps whose tasks ended here in the text of `list tables`, each with its job
/// and step: each stays until slurmctld says its step has ended.
pub fn ended_steps(listing: &str) -> Vec<(&str, u32, u32)> {
    listed(listing)
        .filter_map(|name| {
            let ids = name.strip_prefix(TABLE_PREFIX)?.strip_suffix(ENDED)?;
            let (job, step) = ids.split_once('_')?;
            Some((name, decimal(job)?, decimal(step)?))
        })
        .collect()
}

/// The script that removes `table`, which must exist. The usual way to remove a table whether
/// or not it exists (add it, then delete it, in one transaction; nftables 1.0.6, Debian 12's,
/// has no `destroy`) fails on an owned table, even for its owner (the add would change its
/// flags): the shell removes only tables it has seen listed, or made.
pub fn removal(table: &str) -> String {
    format!("delete table inet {table}\n")
}

/// The names of the `inet` tables in the text of `list tables` (`table inet NAME` per line).
pub fn listed(listing: &str) -> impl Iterator<Item = &str> {
    listing
        .lines()
        .filter_map(|line| line.trim().strip_prefix("table inet "))
        .map(str::trim)
}

/// The tables of job `job_id` in the text of `list tables` (`table inet tfcluster_12_0` per
/// line, or `tfcluster_12_0_ended`): what the job epilog removes, whichever of the job's steps
/// left them.
pub fn job_tables(listing: &str, job_id: u32) -> Vec<&str> {
    let prefix = format!("{TABLE_PREFIX}{job_id}_");
    listed(listing)
        .filter(|name| {
            name.strip_prefix(&prefix)
                .map(|step| step.strip_suffix(ENDED).unwrap_or(step))
                .is_some_and(|step| !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect()
}

/// The other steps' tables in the text of `list tables`: every tfcluster table but those of
/// step `step_id` of `own_jobs` (a heterogeneous job's components are jobs of their own, and
/// may share a node and its ports; a heterogeneous step's may not: Slurm refuses them, "already
/// allocated ... to previous components").
pub fn other_tables<'l>(listing: &'l str, own_jobs: &[u32], step_id: u32) -> Vec<&'l str> {
    let own: Vec<String> = own_jobs
        .iter()
        .flat_map(|&job| [table_name(job, step_id), ended_table_name(job, step_id)])
        .collect();
    listed(listing)
        .filter(|name| name.starts_with(TABLE_PREFIX) && !own.iter().any(|o| o == name))
        .collect()
}

/// The elements of the set in the text of `list set inet TABLE ports` (`elements = { 12000,
/// 12001 }`, over several lines when long). Anything that is not a port is passed over.
pub fn set_ports(listing: &str) -> Vec<u16> {
    let Some((_, elements)) = listing.split_once("elements = {") else {
        return Vec::new();
    };
    let elements = elements.split('}').next().unwrap_or("");
    elements
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(decimal)
        .collect()
}

/// Refuses the step when another step's table (`tables`: name and ports) holds one of `ports`:
/// the step's rules would act on the other job's connections. Such a table outlives its step's
/// claim ([`crate::core::claims`]) when its slurmstepd was killed and libnftables kept the table
/// until the job's epilog. The first port held, in `ports`' order.
pub fn check_tables(ports: &[u16], tables: &[(&str, Vec<u16>)]) -> Result<()> {
    for &port in ports {
        if let Some((table, _)) = tables.iter().find(|(_, held)| held.contains(&port)) {
            let table = table.to_string();
            return Err(Error::PortInOtherTable { port, table });
        }
    }
    Ok(())
}
