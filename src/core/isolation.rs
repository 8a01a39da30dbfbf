//! Per-step network isolation (`isolate=yes`): the firewall that keeps everyone but the job's own
//! processes on the step's own nodes away from the step's TensorFlow servers.
//!
//! TensorFlow's gRPC servers listen on every interface, with no authentication, and run any graph
//! they are sent (TensorFlow's SECURITY.md), so on a shared cluster anyone who reaches a port can
//! run code as the job's owner. Each node of the step gets an nftables table of its own, named
//! after the job and step ([`table_name`]), before any task starts:
//! - **input**: a connection to one of this node's step ports is refused unless it comes from an
//!   address of one of the step's nodes (or from this node itself, over loopback);
//! - **output**: a connection from this node to any endpoint of the step (and, over loopback, to
//!   this node's step ports) is refused unless its socket belongs to the job's uid.
//!
//! Together: a connection reaches a step's server only from the job's uid on a node of the step.
//! Only connection attempts (TCP SYN without ACK) are matched, so no connection tracking is needed
//! and nothing else on the node is touched. The admin's own tables are never edited: a packet
//! refused by any table is refused, so ours only adds refusals.
//!
//! The shell runs the scripts this module writes through libnftables; this module only writes
//! them, from plain values, with name resolution passed in as a closure (table-tested in
//! tests/isolation.rs).

use super::address::Endpoints;
use super::error::{Error, Result};
use super::layout::Layout;
use super::text::decimal;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::net::IpAddr;

/// Every table tfcluster makes starts with this; the rest is `JOB_STEP`.
pub const TABLE_PREFIX: &str = "tfcluster_";

/// The table of one step's rules on a node (family `inet`: IPv4 and IPv6 in one table).
pub fn table_name(job_id: u32, step_id: u32) -> String {
    format!("{TABLE_PREFIX}{job_id}_{step_id}")
}

/// A script that removes `table` whether or not it exists (nftables 1.0.6, Debian 12's, has no
/// `destroy`; adding the table first makes the delete always succeed, in one transaction).
pub fn removal(table: &str) -> String {
    format!("add table inet {table}\ndelete table inet {table}\n")
}

/// The tables of job `job_id` in the text of `list tables` (`table inet tfcluster_12_0` per
/// line): what the job epilog removes, whichever of the job's steps left them.
pub fn job_tables(listing: &str, job_id: u32) -> Vec<&str> {
    let prefix = format!("{TABLE_PREFIX}{job_id}_");
    listing
        .lines()
        .filter_map(|line| line.trim().strip_prefix("table inet "))
        .map(str::trim)
        .filter(|name| {
            name.strip_prefix(&prefix)
                .is_some_and(|step| !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect()
}

/// With `isolate=yes` a step's ports must lie in the site's `port_range`: the firewall refuses
/// other users' connections to every port of the step, so a job's `port_base` (or a port
/// reservation) outside it could close another service's port for them, ssh's 22 or slurmd's
/// 6818, for as long as the step runs. srun checks `port_base` before launch; each node checks
/// the ports it really got.
pub fn check_ports(range: (u16, u16), ports: impl IntoIterator<Item = u32>) -> Result<()> {
    let (lo, hi) = range;
    match ports
        .into_iter()
        .find(|&p| p < u32::from(lo) || p > u32::from(hi))
    {
        Some(port) => Err(Error::PortOutsideIsolatedRange { port, lo, hi }),
        None => Ok(()),
    }
}

/// Everything one node's firewall for one step is made of.
pub struct StepFirewall<'a> {
    pub job_id: u32,
    pub step_id: u32,
    /// The job's owner: the only uid whose sockets may connect to the step's servers.
    pub uid: u32,
    /// This node's index in the step.
    pub node: usize,
    pub layout: &'a Layout,
    pub endpoints: &'a Endpoints,
    /// The site's `port_range`: every port of the step must be in it ([`check_ports`]).
    pub port_range: (u16, u16),
}

impl StepFirewall<'_> {
    /// The nftables script that installs this node's rules for the step, replacing a table of
    /// the same name if one was left. `resolve` gives the addresses a node's address (as
    /// TF_CONFIG names it) resolves to; an address that resolves to nothing is an error, never a
    /// peer silently left out (its tasks could not connect) or let in.
    pub fn script(
        &self,
        mut resolve: impl FnMut(&str) -> std::result::Result<Vec<IpAddr>, String>,
    ) -> Result<String> {
        let slots = self.layout.busiest().1;
        check_ports(
            self.port_range,
            (0..slots).map(|slot| decimal::<u32>(self.endpoints.port(slot)).unwrap_or(0)),
        )?;
        // Each distinct address once (a template may make several nodes one address).
        let mut resolved: HashMap<&str, Vec<IpAddr>> = HashMap::new();
        for address in self.endpoints.addresses() {
            if resolved.contains_key(address.as_str()) {
                continue;
            }
            let found = resolve(address)
                .map(|mut found| {
                    found.sort();
                    found.dedup();
                    found
                })
                .and_then(|found| match found.is_empty() {
                    true => Err("it resolves to no address".to_string()),
                    false => Ok(found),
                })
                .map_err(|reason| Error::AddressUnresolved {
                    address: address.clone(),
                    reason,
                })?;
            resolved.insert(address, found);
        }
        let peers = |node: usize| &resolved[self.endpoints.address(node)];
        // A node's endpoints are its addresses times the ports of its first `count` slots (a
        // slot's port is the same on every node). Nodes with as many tasks form one group: one
        // rule over two plain sets, exact, with a few hundred elements for thousands of
        // endpoints (parsed in well under the 30-40 ms that 4096 address-port pairs took), and
        // no concatenated sets, which older kernels lack.
        let mut groups: BTreeMap<usize, (BTreeSet<IpAddr>, Vec<&str>)> = BTreeMap::new();
        let (mut v4, mut v6) = (BTreeSet::new(), BTreeSet::new());
        for (node, ranks) in self.layout.nodes().enumerate() {
            let count = ranks.len();
            if count == 0 {
                continue; // no endpoint on that node
            }
            let group = groups.entry(count).or_insert_with(|| {
                let ports = (0..count).map(|slot| self.endpoints.port(slot)).collect();
                (BTreeSet::new(), ports)
            });
            for &ip in peers(node) {
                group.0.insert(ip);
                match ip {
                    IpAddr::V4(_) => v4.insert(ip),
                    IpAddr::V6(_) => v6.insert(ip),
                };
            }
        }
        let local = self.layout.node(self.node).map_or(0, <[u32]>::len);
        let ports = (0..local).map(|slot| self.endpoints.port(slot));
        let table = table_name(self.job_id, self.step_id);
        let uid = self.uid;
        let mut out = removal(&table);
        let _ = writeln!(out, "table inet {table} {{");
        set(&mut out, "peers4", "ipv4_addr", v4.iter());
        set(&mut out, "peers6", "ipv6_addr", v6.iter());
        set(&mut out, "ports", "inet_service", ports);
        for (i, (hosts, ports)) in groups.values().enumerate() {
            let (h4, h6): (Vec<&IpAddr>, Vec<&IpAddr>) = hosts.iter().partition(|ip| ip.is_ipv4());
            set(
                &mut out,
                &format!("hosts4_{i}"),
                "ipv4_addr",
                h4.into_iter(),
            );
            set(
                &mut out,
                &format!("hosts6_{i}"),
                "ipv6_addr",
                h6.into_iter(),
            );
            set(
                &mut out,
                &format!("ports_{i}"),
                "inet_service",
                ports.iter(),
            );
        }
        // Refused with a TCP reset, so a refused client fails at once instead of waiting for
        // its connect timeout. Only connection attempts are matched (SYN without ACK).
        let refuse = "reject with tcp reset";
        let attempt = format!("tcp flags & (syn | ack) == syn meta skuid != {uid}");
        let _ = write!(
            out,
            "chain input {{\n\
             type filter hook input priority 0; policy accept;\n\
             iif \"lo\" accept\n\
             tcp dport @ports ip saddr != @peers4 {refuse}\n\
             tcp dport @ports ip6 saddr != @peers6 {refuse}\n\
             }}\n\
             chain output {{\n\
             type filter hook output priority 0; policy accept;\n"
        );
        for i in 0..groups.len() {
            let _ = writeln!(
                out,
                "{attempt} ip daddr @hosts4_{i} tcp dport @ports_{i} {refuse}"
            );
            let _ = writeln!(
                out,
                "{attempt} ip6 daddr @hosts6_{i} tcp dport @ports_{i} {refuse}"
            );
        }
        let _ = write!(
            out,
            "{attempt} oif \"lo\" tcp dport @ports {refuse}\n}}\n}}\n"
        );
        Ok(out)
    }
}

/// `set NAME { type TYPE; elements = { ... } }`, without `elements` when there are none (an
/// empty set matches nothing, so `!= @set` then refuses every source of that family).
fn set<T: std::fmt::Display>(
    out: &mut String,
    name: &str,
    kind: &str,
    elements: impl Iterator<Item = T>,
) {
    let _ = write!(out, "set {name} {{\ntype {kind}\n");
    let mut first = true;
    for element in elements {
        out.push_str(if first { "elements = { " } else { ", " });
        let _ = write!(out, "{element}");
        first = false;
    }
    if !first {
        out.push_str(" }\n");
    }
    out.push_str("}\n");
}
