//! The rules of one node's table for one step, and what a node must have for them to hold.
//! Only the TCP handshake is matched (a SYN without ACK, and the SYN-ACK that answers it), so
//! no connection tracking is needed and established connections, the step's or anyone else's,
//! are never touched:
//! - **input**: a connection to one of this node's step ports is refused unless it is addressed
//!   to this node's own step address (as TF_CONFIG names it, resolved: IPv4 and IPv6) and comes
//!   from a step node's address, or arrives over loopback. TensorFlow listens on every address,
//!   so without the destination check a node's other addresses (a second IPv4 address, IPv6, an
//!   InfiniBand or management network with the source bound to a step address) were open;
//! - **forward**: a connection forwarded through this node (a container, VM or pod network NAT'd
//!   to the node's address) to any endpoint of the step is refused: it has no local socket, so no
//!   uid to check, and after NAT it would come from a step node's address;
//! - **output**: a connection from this node to any endpoint of the step (and, over loopback, to
//!   this node's step ports at any address) is refused unless its socket belongs to the job's
//!   uid; and an answer from one of this node's step ports goes out only from a socket of the
//!   job's uid, so another user who binds a step port before TensorFlow does serves no one.
//!   Both fail closed: the owner's packets are accepted first, then every other one is refused
//!   or dropped, a packet whose sender has no uid to read included (a SYN that a kernel-internal
//!   socket sends, as `AF_SMC` does before it falls back to TCP, or an answer sent as a SYN
//!   cookie). A rule that refused `meta skuid != UID` would let such a packet through: a missing
//!   uid matches neither `== UID` nor `!= UID`, so nftables goes on to the next rule. The price
//!   is SYN cookies: a node that sends every answer as a cookie (`tcp_syncookies=2`) would drop
//!   the owner's own, so its steps are refused ([`check_syncookies`]).
//!
//! The admin's own tables are never edited: a packet refused by any table is refused, so ours
//! only adds refusals. The table is owned by the process that installs it (nftables `flags
//! owner`, Linux 5.12): `flush ruleset` leaves it, and no other process can delete it; with
//! `persist` (Linux 6.9) it also outlives a slurmstepd killed with SIGKILL until the job's epilog
//! removes it ([`persistent`]). Each rule and flag, deleted once, fails a
//! test (tests/release/mutations.tsv).
//!
//! The shell hands these scripts to the kernel as its own netlink messages
//! ([`super::messages`], which reads them), or to libnftables where those do not cover one; this
//! module only writes them, from plain values, with name resolution passed in as a closure (table-tested in tests/isolation.rs, run
//! in a kernel by tests/firewall.rs).

use super::tables::{ended_table_name, owner_comment, table_name};
use crate::core::address::Endpoints;
use crate::core::error::{Error, Result};
use crate::core::layout::Layout;
use crate::core::text::decimal;
use crate::core::topology::ConfFile;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::net::IpAddr;

/// With `isolate=yes` a step's ports must lie in the site's `port_range`: the firewall refuses
/// other users' connections to every port of the step, so a job's `port_base` outside it could
/// close another service's port for them, ssh's 22 or slurmd's 6818, for as long as the step
/// runs. srun checks `port_base` before launch; each node checks the ports it really got. Ports
/// Slurm reserved for the step (`MpiParams=ports`) are the admin's range for steps, never
/// another service's: they need not be in `port_range` ([`StepFirewall::port_range`]).
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

/// Where a node's kernel says when it answers a connection attempt with a SYN cookie (per
/// network namespace).
pub const SYNCOOKIES: &str = "/proc/sys/net/ipv4/tcp_syncookies";

/// Whether the owner's own handshakes get through this node's rules: a SYN-ACK sent as a SYN
/// cookie has no socket, so no uid, and the output chain drops it ([`ANSWER`]). With the
/// kernel's default, 1, cookies go out only while a listener's queue is full, and the client's
/// retried SYN finds room; with 2 every answer is a cookie, and no task could ever connect to a
/// server of the step here: the step is refused, naming the sysctl. A kernel built without SYN
/// cookies has no such file; a file that cannot be read, or says something else, is refused
/// too (fail closed).
pub fn check_syncookies(sysctl: ConfFile) -> Result<()> {
    let unknown = |reason: String| Err(Error::SynCookiesUnknown { reason });
    match sysctl {
        ConfFile::Missing => Ok(()),
        ConfFile::Unreadable(why) => unknown(format!("cannot read {SYNCOOKIES}: {why}")),
        ConfFile::Text(text) => match text.trim() {
            "0" | "1" => Ok(()),
            "2" => Err(Error::SynCookiesAlways),
            other => unknown(format!("{SYNCOOKIES} says '{other}', not 0, 1 or 2")),
        },
    }
}

/// The table's flags as the core writes them: owned by the process that installs it.
pub const OWNED: &str = "flags owner\n";
/// [`OWNED`], and kept after its owner exits until something deletes it (Linux 6.9; older
/// kernels, and libnftables before 1.1, refuse the word).
pub const OWNED_PERSISTENT: &str = "flags owner, persist\n";

/// `script` (from [`StepFirewall::script`]) with a table that outlives its owner: a slurmstepd
/// killed with SIGKILL leaves it to the job's epilog instead of taking it away.
pub fn persistent(script: &str) -> String {
    script.replacen(OWNED, OWNED_PERSISTENT, 1)
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
    /// The site's `port_range`, which every port of the step must be in ([`check_ports`]);
    /// `None` for ports Slurm reserved for the step.
    pub port_range: Option<(u16, u16)>,
}

/// The endpoints of every node with the same number of tasks: their addresses times the ports
/// of the first `count` slots (a slot's port is the same on every node).
struct Group<'p> {
    hosts: BTreeSet<IpAddr>,
    ports: Vec<&'p str>,
}

impl StepFirewall<'_> {
    /// The nftables script that installs this node's rules for the step (a table of the same
    /// name that a killed slurmstepd left must be removed first: [`super::tables::removal`]). `resolve` gives
    /// the addresses a node's address (as TF_CONFIG names it) resolves to; an address that
    /// resolves to nothing is an error, never a peer silently left out (its tasks could not
    /// connect) or let in.
    pub fn script(
        &self,
        resolve: impl FnMut(&str) -> std::result::Result<Vec<IpAddr>, String>,
    ) -> Result<String> {
        self.scripts(resolve).map(|(running, _)| running)
    }

    /// [`Self::script`], and the script of what the node keeps once its own tasks have all
    /// ended while the step may run on elsewhere, in [`ended_table_name`]: the forward and
    /// output rules, over every endpoint of the step. Its peers still admit this node's
    /// address, so no other uid here, and nothing forwarded through here, may open a
    /// connection to them; and its own ports still answer no other uid ([`ANSWER`], over the
    /// `own` set), since the step's other tasks may still connect to them: another user who
    /// binds one of them once the step's server here has gone receives nothing they send (a
    /// port with no listener still refuses them at once). Not owned: it outlives its
    /// slurmstepd. Its `ports` set holds every port of the step, for the check of a later step
    /// on the node ([`super::tables::check_tables`]). Names are resolved once for both.
    pub fn scripts(
        &self,
        resolve: impl FnMut(&str) -> std::result::Result<Vec<IpAddr>, String>,
    ) -> Result<(String, String)> {
        if let Some(range) = self.port_range {
            let busiest = self.layout.busiest().1;
            let port = |slot| decimal::<u32>(self.endpoints.port(slot)).unwrap_or(0);
            check_ports(range, (0..busiest).map(port))?;
        }
        let resolved = self.resolve(resolve)?;
        let groups = self.groups(&resolved);
        Ok((self.write(&resolved, &groups), self.write_ended(&groups)))
    }

    /// The name of this node's table for the step.
    pub fn table(&self) -> String {
        table_name(self.job_id, self.step_id)
    }

    /// This node's own step ports: the ports of its first slots, one per task here.
    pub fn own_ports(&self) -> Vec<u16> {
        let local = self.layout.node(self.node).map_or(0, <[u32]>::len);
        self.endpoints.ports_of(local)
    }

    /// Every node's address, resolved once (not once per endpoint), each to a sorted list
    /// without repeats. No two nodes share an address (`address=` needs `%h`, and a step names
    /// a node once), so each is asked once.
    fn resolve(
        &self,
        mut resolve: impl FnMut(&str) -> std::result::Result<Vec<IpAddr>, String>,
    ) -> Result<HashMap<&str, BTreeSet<IpAddr>>> {
        let mut resolved = HashMap::new();
        for address in self.endpoints.addresses() {
            let found: BTreeSet<IpAddr> = resolve(address)
                .map_err(|reason| Error::AddressUnresolved {
                    address: address.clone(),
                    reason,
                })?
                .into_iter()
                .collect();
            if found.is_empty() {
                return Err(Error::AddressUnresolved {
                    address: address.clone(),
                    reason: "it resolves to no address".into(),
                });
            }
            resolved.insert(address.as_str(), found);
        }
        Ok(resolved)
    }

    /// The step's endpoints by task count: one rule over two plain sets per count, exact, with a
    /// few hundred elements for thousands of endpoints, and no concatenated sets, which older
    /// kernels lack.
    fn groups(&self, resolved: &HashMap<&str, BTreeSet<IpAddr>>) -> Vec<Group<'_>> {
        let mut groups: BTreeMap<usize, Group> = BTreeMap::new();
        for (node, ranks) in self.layout.nodes().enumerate() {
            let count = ranks.len();
            if count == 0 {
                continue; // no endpoint on that node
            }
            let group = groups.entry(count).or_insert_with(|| Group {
                hosts: BTreeSet::new(),
                ports: (0..count).map(|slot| self.endpoints.port(slot)).collect(),
            });
            group.hosts.extend(&resolved[self.endpoints.address(node)]);
        }
        groups.into_values().collect()
    }

    /// The script itself: the table, its sets, and the three chains.
    fn write(&self, resolved: &HashMap<&str, BTreeSet<IpAddr>>, groups: &[Group]) -> String {
        let table = self.table();
        let mut out = format!("table inet {table} {{\n{OWNED}{}", owner_comment(self.uid));
        let peers: BTreeSet<&IpAddr> = resolved.values().flatten().collect();
        let own = &resolved[self.endpoints.address(self.node)];
        families(&mut out, ["peers4", "peers6"], peers.into_iter());
        families(&mut out, ["self4", "self6"], own.iter());
        set(&mut out, "ports", "inet_service", self.own_ports().iter());
        self.write_groups(&mut out, groups);
        let _ = write!(
            out,
            "chain input {{\n\
             type filter hook input priority 0; policy accept;\n\
             iif \"lo\" accept\n\
             ip daddr @self4 ip saddr @peers4 accept\n\
             ip6 daddr @self6 ip6 saddr @peers6 accept\n\
             {ATTEMPT} tcp dport @ports {REFUSE}\n\
             }}\n\
             chain forward {{\n\
             type filter hook forward priority 0; policy accept;\n"
        );
        endpoints(&mut out, groups.len(), ATTEMPT);
        let _ = write!(
            out,
            "}}\nchain output {{\ntype filter hook output priority 0; policy accept;\n"
        );
        let _ = writeln!(out, "{ATTEMPT} meta skuid {} accept", self.uid);
        endpoints(&mut out, groups.len(), ATTEMPT);
        let _ = write!(
            out,
            "{ATTEMPT} oif \"lo\" tcp dport @ports {REFUSE}\n\
             {ANSWER} tcp sport @ports meta skuid {uid} accept\n\
             {ANSWER} tcp sport @ports drop\n}}\n}}\n",
            uid = self.uid
        );
        out
    }

    /// The script of [`Self::scripts`]'s second table: the groups' sets, every port of the
    /// step, this node's own, and the forward and output chains of [`Self::write`] without the
    /// loopback rule.
    fn write_ended(&self, groups: &[Group]) -> String {
        let table = ended_table_name(self.job_id, self.step_id);
        let mut out = format!("table inet {table} {{\n{}", owner_comment(self.uid));
        let all: BTreeSet<&str> = groups
            .iter()
            .flat_map(|g| g.ports.iter().copied())
            .collect();
        set(&mut out, "ports", "inet_service", all.iter());
        set(&mut out, "own", "inet_service", self.own_ports().iter());
        self.write_groups(&mut out, groups);
        out.push_str("chain forward {\ntype filter hook forward priority 0; policy accept;\n");
        endpoints(&mut out, groups.len(), ATTEMPT);
        out.push_str("}\nchain output {\ntype filter hook output priority 0; policy accept;\n");
        let _ = writeln!(out, "{ATTEMPT} meta skuid {} accept", self.uid);
        endpoints(&mut out, groups.len(), ATTEMPT);
        let _ = write!(
            out,
            "{ANSWER} tcp sport @own meta skuid {uid} accept\n\
             {ANSWER} tcp sport @own drop\n}}\n}}\n",
            uid = self.uid
        );
        out
    }

    /// Each group's sets: its hosts by family and its ports.
    fn write_groups(&self, out: &mut String, groups: &[Group]) {
        for (i, group) in groups.iter().enumerate() {
            let names = [format!("hosts4_{i}"), format!("hosts6_{i}")];
            families(out, names, group.hosts.iter());
            set(
                out,
                &format!("ports_{i}"),
                "inet_service",
                group.ports.iter(),
            );
        }
    }
}

/// Refused with a TCP reset, so a refused client fails at once instead of waiting for its
/// connect timeout.
const REFUSE: &str = "reject with tcp reset";
/// Only connection attempts are matched (SYN without ACK): no connection tracking, and no
/// established connection, the step's or anyone else's, is ever touched.
const ATTEMPT: &str = "tcp flags & (syn | ack) == syn";
/// A server's answer to a connection attempt (SYN and ACK). Answers from this node's step
/// ports are let out only from a socket of the job's uid: another user who binds a step port
/// after the node's check ([`crate::core::claims`]) and before TensorFlow does (its import takes
/// seconds) never completes a handshake, so receives nothing the owner's tasks send. The
/// kernel gives an answer the listening socket's uid, and none to an answer with a SYN cookie
/// (which a listener with a full queue sends, and its owner can make its queue full): hence
/// the job's uid accepted, every other answer dropped. A dropped answer is retried by the
/// client, and TensorFlow's own bind of the port fails, so the step ends with TensorFlow's
/// error rather than run with another user's server in its place.
const ANSWER: &str = "tcp flags & (syn | ack) == syn | ack";

/// One rule per group and family that refuses `condition`'s connection attempts to the
/// group's endpoints.
fn endpoints(out: &mut String, groups: usize, condition: &str) {
    for i in 0..groups {
        for (family, v) in [("ip", 4), ("ip6", 6)] {
            let _ = writeln!(
                out,
                "{condition} {family} daddr @hosts{v}_{i} tcp dport @ports_{i} {REFUSE}"
            );
        }
    }
}

/// Two sets, `names[0]` of the IPv4 and `names[1]` of the IPv6 addresses of `addresses`.
fn families<'a>(
    out: &mut String,
    names: [impl AsRef<str>; 2],
    addresses: impl Iterator<Item = &'a IpAddr>,
) {
    let (v4, v6): (Vec<&IpAddr>, Vec<&IpAddr>) = addresses.partition(|ip| ip.is_ipv4());
    set(out, names[0].as_ref(), "ipv4_addr", v4.into_iter());
    set(out, names[1].as_ref(), "ipv6_addr", v6.into_iter());
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
