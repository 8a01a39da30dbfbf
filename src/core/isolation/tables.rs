//! The tables' names, and what the node's tables say: which tables are a job's (the epilog
//! removes them), which steps' ended tables are on the node (the holder keeps them), and which
//! ports other steps' tables hold. The node's tables are asked of the kernel by name alone
//! ([`dump_request`]), never with libnftables' `list tables`, whose cost grows with the square of
//! the node's tables (libnftables 1.0.6, CPU per call on the test machine: 0.17 ms with one
//! step's table, 16 ms with 32, 55 ms with 64, 212 ms with 128), where the names are wanted at
//! every step start, every holder's look and every job's epilog. Before the rules go in, a node refuses a step whose
//! ports another step's table holds ([`check_tables`]): the rules would act on the other job's
//! connections.

use crate::core::error::{Error, Result};
use crate::core::netlink;
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

/// The tables of steps whose tasks ended here among the node's `tables`, each with its job and
/// step: each stays until slurmctld says its step has ended.
pub fn ended_steps(tables: &[String]) -> Vec<(&str, u32, u32)> {
    tables
        .iter()
        .map(String::as_str)
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

/// The line in every table tfcluster makes that says whose step it is (`comment "uid N"`): the
/// kernel keeps it as the table's user data, and its dump hands it back with the name
/// ([`dump_reply`]), so a node counts each user's tables ([`check_table_count`]) without asking
/// slurmctld. Only root makes tables, so the line is root's word.
pub fn owner_comment(uid: u32) -> String {
    format!("comment \"{OWNER_PREFIX}{uid}\"\n")
}

const OWNER_PREFIX: &str = "uid ";

/// A table as the kernel's dump names it: its name, and the user [`owner_comment`] names, where
/// its comment is one (a table of tfcluster before 0.13.0 has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub uid: Option<u32>,
}

/// The request for the names of the node's `inet` tables (`NETLINK_NETFILTER`): a dump of
/// `NFT_MSG_GETTABLE` (subsystem `NFNL_SUBSYS_NFTABLES`, 10), whose `nfgenmsg` (family, version,
/// resource id) asks for family `NFPROTO_INET` (1) alone.
pub fn dump_request() -> Vec<u8> {
    netlink::dump_request(NFTABLES << 8 | GET_TABLE, &[NFPROTO_INET, 0, 0, 0])
}

/// `NFNL_SUBSYS_NFTABLES`: the high byte of every nftables message's type.
pub(super) const NFTABLES: u16 = 10;
const GET_TABLE: u16 = 1;
pub(super) const NEW_TABLE: u16 = 0;
pub(super) const NFPROTO_INET: u8 = 1;
/// `NFTA_TABLE_NAME`: the table's name, NUL-terminated.
pub(super) const TABLE_NAME: u16 = 1;
/// `NFTA_TABLE_USERDATA`: what nft keeps with the table, as `(type, length, value)` records;
/// type 0 is the comment, NUL-terminated.
pub(super) const TABLE_USERDATA: u16 = 6;

/// One reply to [`dump_request`]: each `NFT_MSG_NEWTABLE` message (its `nfgenmsg`, then its
/// attributes) gives one table's name and owner, where its family is `inet`; a table of
/// another family (not asked for) comes back with an empty name.
pub fn dump_reply(buf: &[u8]) -> netlink::Reply<Listed> {
    netlink::reply(buf, NFTABLES << 8 | NEW_TABLE, |message| {
        let (family, attributes) = (*message.first()?, message.get(4..)?);
        let mut name = None;
        let mut uid = None;
        for (kind, value) in netlink::attributes(attributes) {
            let text = |v: &[u8]| -> Option<String> {
                let v = v.strip_suffix(&[0]).unwrap_or(v);
                std::str::from_utf8(v).ok().map(str::to_string)
            };
            match kind {
                TABLE_NAME => name = Some(text(value)?),
                TABLE_USERDATA => uid = comment(value).and_then(|c| owner_of(&text(c)?)),
                _ => {}
            }
        }
        Some(Listed {
            name: match family {
                NFPROTO_INET => name?,
                _ => String::new(),
            },
            uid,
        })
    })
}

/// The comment among a table's user data records (type 0), its value with its NUL.
fn comment(records: &[u8]) -> Option<&[u8]> {
    let mut rest = records;
    while let [kind, length, tail @ ..] = rest {
        let value = tail.get(..usize::from(*length))?;
        if *kind == 0 {
            return Some(value);
        }
        rest = &tail[usize::from(*length)..];
    }
    None
}

/// The user an [`owner_comment`] names.
fn owner_of(comment: &str) -> Option<u32> {
    decimal(comment.strip_prefix(OWNER_PREFIX)?)
}

/// The tables of job `job_id` among the node's `tables` (`tfcluster_12_0`, or
/// `tfcluster_12_0_ended`): what the job epilog removes, whichever of the job's steps left them.
pub fn job_tables(tables: &[String], job_id: u32) -> Vec<&str> {
    let prefix = format!("{TABLE_PREFIX}{job_id}_");
    tables
        .iter()
        .map(String::as_str)
        .filter(|name| {
            name.strip_prefix(&prefix)
                .map(|step| step.strip_suffix(ENDED).unwrap_or(step))
                .is_some_and(|step| !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect()
}

/// The other steps' tables among the node's `tables`: every tfcluster table but those of
/// step `step_id` of `own_jobs` (a heterogeneous job's components are jobs of their own, and
/// may share a node and its ports; a heterogeneous step's may not: Slurm refuses them, "already
/// allocated ... to previous components").
pub fn other_tables<'l>(tables: &'l [String], own_jobs: &[u32], step_id: u32) -> Vec<&'l str> {
    let own: Vec<String> = own_jobs
        .iter()
        .flat_map(|&job| [table_name(job, step_id), ended_table_name(job, step_id)])
        .collect();
    tables
        .iter()
        .map(String::as_str)
        .filter(|name| name.starts_with(TABLE_PREFIX) && !own.iter().any(|o| o == name))
        .collect()
}

/// Refuses the step when another step's table (`tables`: name and ports) holds one of `ports`:
/// the step's rules would act on the other job's connections. Such a table outlives its step's
/// claim ([`crate::core::claims`]) when its slurmstepd was killed and the kernel kept the table
/// until the job's epilog (`persist`). The first port held, in `ports`' order.
pub fn check_tables(ports: &[u16], tables: &[(&str, Vec<u16>)]) -> Result<()> {
    for &port in ports {
        if let Some((table, _)) = tables.iter().find(|(_, held)| held.contains(&port)) {
            let table = table.to_string();
            return Err(Error::PortInOtherTable { port, table });
        }
    }
    Ok(())
}

/// The most tfcluster tables a node holds at once: each adds base chains that every packet of
/// the node walks (with 400 tables a UDP datagram over loopback took 24.5 µs, not 1.3, and
/// libnftables' `list tables` 5.9 s of CPU; at 1024 the kernel refused any further table, the admin's
/// included). A node runs one table per isolated step, and one per step whose tasks ended there
/// first while it runs elsewhere: 128 is more than a node runs steps at once.
pub const MAX_TABLES: usize = 128;
/// The most of those one user's jobs hold on a node, so that no user fills [`MAX_TABLES`] and
/// keeps everyone else's isolated steps off the node.
pub const MAX_TABLES_PER_USER: usize = 32;

/// The job of each tfcluster table among the node's `tables` (`tfcluster_JOB_STEP`, with or
/// without [`ENDED`]), but `gone`'s.
pub fn table_jobs<'l>(tables: &'l [String], gone: &[&str]) -> Vec<(&'l str, u32)> {
    tables
        .iter()
        .map(String::as_str)
        .filter(|name| !gone.contains(name))
        .filter_map(|name| Some((name, job_of(name)?)))
        .collect()
}

/// The job of a tfcluster table named `name`; `None` for any other name.
fn job_of(name: &str) -> Option<u32> {
    let ids = name.strip_prefix(TABLE_PREFIX)?;
    let ids = ids.strip_suffix(ENDED).unwrap_or(ids);
    let (job, step) = ids.split_once('_')?;
    decimal::<u32>(step)?;
    decimal(job)
}

/// The user whose job `job`'s tables are, as their comments say ([`owner_comment`]); `None`
/// where no table of that job has one.
pub fn commented_owner(listed: &[Listed], job: u32) -> Option<u32> {
    listed
        .iter()
        .filter(|t| job_of(&t.name) == Some(job))
        .find_map(|t| t.uid)
}

/// Refuses one more table on the node (the step's, for user `uid`) when the node holds
/// [`MAX_TABLES`] of tfcluster's already, or the user's jobs [`MAX_TABLES_PER_USER`]: `tables`
/// is each table's job ([`table_jobs`]), `owner` says whose a job is (slurmctld's record;
/// `None` when it cannot say: such a table counts for the node, not for the user), asked only
/// where the node holds as many tables as one user may, once per job.
pub fn check_table_count(
    tables: &[(&str, u32)],
    uid: u32,
    mut owner: impl FnMut(u32) -> Option<u32>,
) -> Result<()> {
    if tables.len() >= MAX_TABLES {
        return Err(Error::TooManyTables {
            count: tables.len(),
            max: MAX_TABLES,
            yours: false,
        });
    }
    // Fewer tables than one user may hold: nobody is at the bound, and nobody is asked.
    if tables.len() < MAX_TABLES_PER_USER {
        return Ok(());
    }
    let mut owners: Vec<(u32, Option<u32>)> = Vec::new();
    let mut yours = 0;
    for &(_, job) in tables {
        let whose = match owners.iter().find(|(j, _)| *j == job) {
            Some(&(_, whose)) => whose,
            None => {
                let whose = owner(job);
                owners.push((job, whose));
                whose
            }
        };
        yours += usize::from(whose == Some(uid));
    }
    match yours >= MAX_TABLES_PER_USER {
        true => Err(Error::TooManyTables {
            count: yours,
            max: MAX_TABLES_PER_USER,
            yours: true,
        }),
        false => Ok(()),
    }
}
