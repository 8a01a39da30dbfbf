//! The rules `isolate=yes` writes (src/core/isolation/rules.rs), in a kernel. Each node's tables are
//! loaded through libnftables as slurmstepd loads them, in network namespaces that stand for the
//! step's two nodes, a node outside it, and a network each node forwards and NATs to its own
//! addresses (tests/cluster/firewall.sh); then every attempt the owner or another user can make
//! is run in its namespace, as its uid, over IPv4 and IPv6.
//!
//! tests/isolation.rs compares the rules' text and runs them on the test cluster through Slurm.
//! Here each rule earns its place: deleted, some row below fails (the audit of docs/testing.md,
//! tests/release/mutations.sh). No Slurm runs: the test runs in each release's root, with the
//! libnftables that root has (1.0.6 in Debian 12, 1.1 in Debian 13 and sid): its programs there,
//! and the tests that load the library themselves run again inside it ([`in_roots_library`]).

mod common;
use common::cluster::{dir, records, sh, sh_ok, tool};
use common::{plan, release, step};
use std::net::IpAddr;
use tfcluster::core::isolation::rules::OWNED;
use tfcluster::core::isolation::tables::{ended_table_name, removal, table_name};
use tfcluster::core::StepPlan;
use tfcluster::spank::isolation::nftables::{
    delete_table, install, node_tables, owned_tables, set_ports, Nft,
};

/// The tests that open libnftables in this process, one at a time: [`Nft::release`] tells its
/// context's socket from the process's other netfilter sockets.
static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether the calling test (`name`) goes on in this process: the tests that load libnftables
/// themselves run again inside the release's root (TFC_ROOT, tests/release/run.sh), this same
/// binary, so that they load that root's library (1.0.6 in Debian 12, 1.1 in Debian 13 and sid),
/// not the host's; `false` once that run has passed. Without a root the host's is the release's.
fn in_roots_library(name: &str) -> bool {
    if std::env::var_os("TFC_IN_ROOT").is_some() || std::env::var_os("TFC_ROOT").is_none() {
        return true;
    }
    let exe = std::env::current_exe().expect("this test binary");
    let out = sh(&format!(
        "TFC_IN_ROOT=1 {} --exact {name} --include-ignored --test-threads=1",
        exe.display()
    ));
    assert!(
        out.status.success(),
        "{name}, run in the release's root:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// The start of each test that loads libnftables itself: `None` where it has run in the
/// release's root ([`in_roots_library`]), else this process's turn ([`IN_PROCESS`]), in a
/// network namespace of the thread's own.
fn library_test(name: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if !in_roots_library(name) {
        return None;
    }
    let one = IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    own_network();
    Some(one)
}

/// A network namespace of the calling thread's own (the test harness gives each test a thread).
fn own_network() {
    // SAFETY: unshare affects this thread alone.
    assert_eq!(
        unsafe { libc::unshare(libc::CLONE_NEWNET) },
        0,
        "unshare: {}",
        std::io::Error::last_os_error()
    );
}

/// The job's owner, and another user (numeric: `setpriv` needs no account).
const OWNER_UID: u32 = 61001;
const OTHER_UID: u32 = 61002;

/// The step's nodes, in the step's order (name, IPv4 and IPv6 address), as the nodes resolve them.
const NODES: [(&str, &str, &str); 2] = [
    ("n9", "10.77.0.11", "fd00::11"),
    ("n10", "10.77.0.12", "fd00::12"),
];

/// What the nodes hold while the attempts are made.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Phase {
    /// Both nodes run their tasks: each holds its step table.
    Running,
    /// n9's tasks have ended, n10's still run: n9 holds its ended table, n10 its step table.
    N9Ended,
    /// As `Running`, with n9 answering every attempt with a SYN cookie (`tcp_syncookies=2`):
    /// an answer no socket sends.
    SynCookies,
}

#[derive(Clone, Copy)]
enum Who {
    Owner,
    Other,
}

/// Where an attempt dials.
#[derive(Clone, Copy)]
enum To {
    /// A step node's address, by the node's name.
    V4(&'static str),
    V6(&'static str),
    /// Another address: loopback, or one n9 has beside its step address.
    At(&'static str),
}

const LOOPBACK: To = To::At("127.0.0.1");
/// n9's other addresses on the step's network (tests/cluster/firewall.sh): TensorFlow listens
/// on every address, so these reach its servers unless the rules say otherwise.
const N9_SECOND_V4: To = To::At("10.77.0.250");
const N9_SECOND_V6: To = To::At("fd00::250");

/// One connection attempt to a step port and what it gets: open, refused (a reset), or no
/// answer (its SYN-ACK dropped). In every phase the owner serves n9's first port and n10's, and
/// another user serves n9's second port (bound before the owner's server: a squatter).
struct Attempt {
    what: &'static str,
    phase: Phase,
    who: Who,
    /// The namespace it is made in: n9, n10, out (a node outside the step), nat-n9 or nat-n10
    /// (a network NAT'd behind that node).
    from: &'static str,
    to: To,
    /// The port: the step's port of that slot.
    slot: usize,
    gets: &'static str,
}

use Phase::{N9Ended, Running, SynCookies};
use To::{At, V4, V6};
use Who::{Other, Owner};

#[rustfmt::skip]
const ATTEMPTS: &[Attempt] = &[
    Attempt { what: "the owner on n10, to n9",                           phase: Running,    who: Owner, from: "n10",    to: V4("n9"),  slot: 0, gets: "open" },
    Attempt { what: "the owner on n10, to n9's IPv6",                    phase: Running,    who: Owner, from: "n10",    to: V6("n9"),  slot: 0, gets: "open" },
    Attempt { what: "the owner on n9, over loopback",                    phase: Running,    who: Owner, from: "n9",     to: LOOPBACK,  slot: 0, gets: "open" },
    Attempt { what: "another user on n10, to n9",                        phase: Running,    who: Other, from: "n10",    to: V4("n9"),  slot: 0, gets: "refused" },
    Attempt { what: "another user on n10, to n9's IPv6",                 phase: Running,    who: Other, from: "n10",    to: V6("n9"),  slot: 0, gets: "refused" },
    Attempt { what: "another user on n9, to n10",                        phase: Running,    who: Other, from: "n9",     to: V4("n10"), slot: 0, gets: "refused" },
    Attempt { what: "another user on n9, to n10's IPv6",                 phase: Running,    who: Other, from: "n9",     to: V6("n10"), slot: 0, gets: "refused" },
    Attempt { what: "another user on n9, over loopback",                 phase: Running,    who: Other, from: "n9",     to: LOOPBACK,  slot: 0, gets: "refused" },
    Attempt { what: "another user on n10, to n9's second IPv4",         phase: Running,    who: Other, from: "n10",    to: N9_SECOND_V4, slot: 0, gets: "refused" },
    Attempt { what: "another user on n10, to n9's second IPv6",         phase: Running,    who: Other, from: "n10",    to: N9_SECOND_V6, slot: 0, gets: "refused" },
    Attempt { what: "another user outside the step, to n9",              phase: Running,    who: Other, from: "out",    to: V4("n9"),  slot: 0, gets: "refused" },
    Attempt { what: "another user outside the step, to n9's IPv6",       phase: Running,    who: Other, from: "out",    to: V6("n9"),  slot: 0, gets: "refused" },
    Attempt { what: "a network NAT'd behind n10, to n9",                 phase: Running,    who: Other, from: "nat-n10", to: V4("n9"), slot: 0, gets: "refused" },
    Attempt { what: "a network NAT'd behind n10, to n9's IPv6",          phase: Running,    who: Other, from: "nat-n10", to: V6("n9"), slot: 0, gets: "refused" },
    Attempt { what: "a network NAT'd behind n9, to n10",                 phase: Running,    who: Other, from: "nat-n9", to: V4("n10"), slot: 0, gets: "refused" },
    Attempt { what: "a network NAT'd behind n9, to n10's IPv6",          phase: Running,    who: Other, from: "nat-n9", to: V6("n10"), slot: 0, gets: "refused" },
    Attempt { what: "the owner on n10, to another user's server on n9",  phase: Running,    who: Owner, from: "n10",    to: V4("n9"),  slot: 1, gets: "no answer" },
    Attempt { what: "n9 ended: the owner on n9, to n10",                 phase: N9Ended,    who: Owner, from: "n9",     to: V4("n10"), slot: 0, gets: "open" },
    Attempt { what: "n9 ended: another user on n9, to n10",              phase: N9Ended,    who: Other, from: "n9",     to: V4("n10"), slot: 0, gets: "refused" },
    Attempt { what: "n9 ended: another user on n9, to n10's IPv6",       phase: N9Ended,    who: Other, from: "n9",     to: V6("n10"), slot: 0, gets: "refused" },
    Attempt { what: "n9 ended: a network NAT'd behind n9, to n10",       phase: N9Ended,    who: Other, from: "nat-n9", to: V4("n10"), slot: 0, gets: "refused" },
    Attempt { what: "n9 ended: a network NAT'd behind n9, to n10's IPv6", phase: N9Ended,   who: Other, from: "nat-n9", to: V6("n10"), slot: 0, gets: "refused" },
    Attempt { what: "n9 ended: the owner on n10, to the owner's server on n9", phase: N9Ended, who: Owner, from: "n10", to: V4("n9"),  slot: 0, gets: "open" },
    Attempt { what: "n9 ended: the owner on n10, to another user's server on n9", phase: N9Ended, who: Owner, from: "n10", to: V4("n9"), slot: 1, gets: "no answer" },
    Attempt { what: "a SYN cookie: the owner on n10, to n9",             phase: SynCookies, who: Owner, from: "n10",    to: V4("n9"),  slot: 0, gets: "no answer" },
];

/// The addresses the nodes resolve a step node's name to: both families.
fn resolve(name: &str) -> Result<Vec<IpAddr>, String> {
    let (_, v4, v6) = NODES
        .iter()
        .find(|(n, ..)| *n == name)
        .ok_or(format!("unknown host {name}"))?;
    Ok(vec![v4.parse().unwrap(), v6.parse().unwrap()])
}

fn address(to: To) -> &'static str {
    let of = |node| NODES.iter().find(|(n, ..)| *n == node).unwrap();
    match to {
        V4(node) => of(node).1,
        V6(node) => of(node).2,
        At(address) => address,
    }
}

fn uid(who: Who) -> u32 {
    match who {
        Owner => OWNER_UID,
        Other => OTHER_UID,
    }
}

/// Prints `LEFT|node|count` of the step's tables each node still holds.
const LEFT_TABLES: &str = "for n in n9 n10; do echo \"LEFT|$n|$(ip netns exec tfk-$n nft list tables | grep -c tfcluster_)\"; done\n";

/// The network of tests/cluster/firewall.sh, taken down whatever happens.
struct Network;

impl Network {
    fn up() -> Network {
        sh(&format!("bash {} down", tool("firewall.sh")));
        sh_ok(&format!("bash {} up", tool("firewall.sh")));
        Network
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        sh(&format!("bash {} down", tool("firewall.sh")));
    }
}

/// Runs one phase: the nodes' tables held, the servers up, every attempt of the phase at once.
/// Its stdout (`ATTEMPT|what|result` lines).
fn run(plan: &StepPlan, phase: Phase) -> String {
    let d = dir().join(format!("firewall-{phase:?}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let mut tables = Vec::new();
    for (node, (name, ..)) in NODES.iter().enumerate() {
        let firewall = plan.isolation(12, 3, OWNER_UID, node).unwrap();
        let (script, ended) = firewall.scripts(resolve).unwrap();
        let held = if phase == N9Ended && *name == "n9" {
            ended
        } else {
            script
        };
        let file = d.join(format!("{name}.nft"));
        std::fs::write(&file, held).unwrap();
        tables.push((name, file));
    }
    let tool = tool("firewall.py");
    let d = d.display();
    let as_uid = |who| format!("setpriv --reuid={0} --regid={0} --clear-groups", uid(who));
    let mut lines = String::from("set -u\n");
    if phase == SynCookies {
        lines += "ip netns exec tfk-n9 sysctl -qw net.ipv4.tcp_syncookies=2\n";
    }
    for (name, file) in &tables {
        lines += &format!("ip netns exec tfk-{name} python3 {tool} hold {d}/stop {} >{d}/ready.hold.{name} 2>&1 &\n", file.display());
    }
    let servers = [("n9", Owner, 0), ("n9", Other, 1), ("n10", Owner, 0)];
    for (node, who, slot) in servers {
        lines += &format!(
            "ip netns exec tfk-{node} {} python3 {tool} serve {d}/stop {} >{d}/ready.serve.{node}.{slot} 2>&1 &\n",
            as_uid(who),
            plan.endpoints.port(slot)
        );
    }
    let ready = tables.len() + servers.len();
    lines += &format!(
        "for i in $(seq 200); do [ \"$(cat {d}/ready.* | grep -c -e HELD -e SERVING)\" = {ready} ] && break; sleep 0.05; done
grep -H . {d}/ready.* >&2\n"
    );
    let mut attempts = String::from("pids=\n");
    for a in ATTEMPTS.iter().filter(|a| a.phase == phase) {
        attempts += &format!(
            "(echo \"ATTEMPT|{}|$(ip netns exec tfk-{} {} python3 {tool} connect {} {})\") & pids=\"$pids $!\"\n",
            a.what,
            a.from,
            as_uid(a.who),
            address(a.to),
            plan.endpoints.port(a.slot)
        );
    }
    lines += &attempts;
    lines += &format!("wait $pids\ntouch {d}/stop\nwait\n");
    // The owned tables went with their holders; an ended table is owned by no process (it
    // outlives slurmstepd), so it is removed here, as the job's epilog would.
    if phase == N9Ended {
        lines += &format!(
            "echo '{}' | ip netns exec tfk-n9 nft -f -\n",
            removal(&ended_table_name(12, 3))
        );
    }
    lines += LEFT_TABLES;
    if phase == SynCookies {
        lines += "ip netns exec tfk-n9 sysctl -qw net.ipv4.tcp_syncookies=1\n";
    }
    let out = sh(&lines);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every attempt gets what its row says, in each phase: the owner's connections open, over
/// IPv4, IPv6 and loopback, and after its node's tasks ended; every other one refused or left
/// without an answer, wherever it comes from (the step's nodes, a node outside it, a network
/// behind a node), by either family; an answer from another user's server on a step port, or
/// one no socket sends (a SYN cookie), never reaches the owner.
#[test]
#[ignore = "needs a release's root (nftables, network namespaces): run tests/run.sh"]
fn each_rule_keeps_one_path_closed_or_the_owners_open() {
    // n9 runs two tasks, n10 one: n9's ports are slots 0 and 1, n10's slot 0.
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let _network = Network::up();
    let mut wrong = Vec::new();
    for phase in [Running, N9Ended, SynCookies] {
        let out = run(&plan, phase);
        for a in ATTEMPTS.iter().filter(|a| a.phase == phase) {
            let got: Vec<&str> = records(&out, "ATTEMPT")
                .into_iter()
                .filter(|r| r[0] == a.what)
                .map(|r| r[1])
                .collect();
            if got != [a.gets] {
                wrong.push(format!("{}: got {got:?}, not {}", a.what, a.gets));
            }
        }
        // Each phase starts from nodes that hold no table of the step.
        let left: Vec<Vec<&str>> = records(&out, "LEFT");
        if left != [["n9", "0"], ["n10", "0"]] {
            wrong.push(format!("tables left after phase {phase:?}: {left:?}"));
        }
        if !wrong.is_empty() {
            wrong.push(format!("(phase {phase:?}'s lines:\n{out})"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The kernel's dump of the node's table names (what slurmstepd, the holder and the epilog ask
/// for) names every inet table and only those, as libnftables' `list tables` does, also over
/// many replies: a step's table, an ended table, another family's table of a tfcluster name,
/// and 200 other tables, in a network namespace of this test's thread; and the user each of the
/// step's tables names in its comment.
#[test]
#[ignore = "needs root (a network namespace, nftables): run tests/run.sh"]
fn the_kernels_table_names_are_libnftables_list() {
    let Some(_one) = library_test("the_kernels_table_names_are_libnftables_list") else {
        return;
    };
    let mut nft = Nft::open().expect("libnftables");
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let (script, ended) = plan
        .isolation(12, 3, OWNER_UID, 0)
        .unwrap()
        .scripts(resolve)
        .unwrap();
    let others: String = (0..200)
        .map(|i| format!("add table inet other_{i}\n"))
        .collect();
    for script in [
        script.as_str(),
        ended.as_str(),
        "add table ip tfcluster_9_9\n",
        &others,
    ] {
        nft.run(script).expect("installed");
    }
    let mut dumped = node_tables().expect("the kernel's dump");
    let listing = nft.run("list tables").expect("libnftables' list");
    let mut listed: Vec<String> = listing
        .lines()
        .filter_map(|line| line.trim().strip_prefix("table inet "))
        .map(String::from)
        .collect();
    dumped.sort();
    listed.sort();
    assert_eq!(dumped, listed);
    assert_eq!(dumped.len(), 202);
    assert!(dumped.contains(&table_name(12, 3)) && dumped.contains(&ended_table_name(12, 3)));
    assert!(
        !dumped.contains(&"tfcluster_9_9".to_string()),
        "an ip table"
    );
    // Each of the step's tables names its user in its comment; the others name none.
    let owners: Vec<(String, Option<u32>)> = owned_tables()
        .expect("the kernel's dump")
        .into_iter()
        .filter(|t| t.uid.is_some())
        .map(|t| (t.name, t.uid))
        .collect();
    assert_eq!(
        owners,
        [
            (table_name(12, 3), Some(OWNER_UID)),
            (ended_table_name(12, 3), Some(OWNER_UID))
        ]
    );
}

/// Node n9's table for step 12.3 (`worker:*` on n9 and n10, `isolate=yes`): its script, as the
/// plugin hands it to libnftables, and its name.
fn node_table() -> (String, String) {
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let script = plan
        .isolation(12, 3, OWNER_UID, 0)
        .unwrap()
        .script(resolve)
        .unwrap();
    (script, table_name(12, 3))
}

/// The step's table stays owned once slurmstepd lets libnftables go before its tasks fork
/// (`Nft::release`, src/spank/isolation/firewall.rs): root's `nft flush ruleset` leaves it and
/// no other process can delete it, while its socket, kept alone, deletes it with the core's own
/// transaction (`messages::deletion_request`), once; with the libnftables of each release's root.
#[test]
#[ignore = "needs root (a network namespace, nftables): run tests/run.sh"]
fn a_released_context_keeps_the_table_owned_by_its_socket() {
    let Some(_one) = library_test("a_released_context_keeps_the_table_owned_by_its_socket") else {
        return;
    };
    let (script, table) = node_table();
    let mut nft = Nft::open().expect("libnftables");
    nft.run(&script).expect("installed");
    let Ok(socket) = nft.release() else {
        panic!("the context's socket is not told apart from the process's others");
    };
    let listed = || node_tables().expect("the kernel's dump").contains(&table);
    let mut other = Nft::open().expect("libnftables");
    other.run("flush ruleset").expect("root's flush");
    assert!(listed(), "an owned table outlives `nft flush ruleset`");
    let refused = other.run(&removal(&table));
    assert!(refused.is_err(), "another socket deleted an owned table");
    assert!(listed());
    assert_eq!(socket.delete(&table), Ok(()));
    assert!(!listed(), "its owner deleted it");
    let again = socket.delete(&table);
    assert!(
        again.as_ref().is_err_and(|e| e.contains("No such file")),
        "{again:?}"
    );
}

/// The job epilog removes a table without libnftables (`delete_table`, one hand-built request
/// through a socket of its own): a table no live process owns goes, once; a table a live process
/// owns stays, refused; with the libnftables of each release's root installing them.
#[test]
#[ignore = "needs root (a network namespace, nftables): run tests/run.sh"]
fn the_epilog_deletes_a_table_no_live_process_owns() {
    let Some(_one) = library_test("the_epilog_deletes_a_table_no_live_process_owns") else {
        return;
    };
    let (script, table) = node_table();
    let listed = || node_tables().expect("the kernel's dump").contains(&table);
    let mut nft = Nft::open().expect("libnftables");
    nft.run(&script).expect("installed, owned");
    let refused = delete_table(&table);
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("not permitted")),
        "{refused:?}"
    );
    assert!(listed(), "a table a live process owns went");
    nft.run(&removal(&table)).expect("its owner deletes it");
    nft.run(&script.replacen(OWNED, "", 1))
        .expect("installed, owned by no one");
    assert_eq!(delete_table(&table), Ok(()));
    assert!(!listed(), "the epilog's request deleted it");
    let again = delete_table(&table);
    assert!(
        again.as_ref().is_err_and(|e| e.contains("No such file")),
        "{again:?}"
    );
}

/// slurmstepd gives libnftables the table flag `persist` only where the library may know it
/// (src/spank/isolation/firewall.rs): each release's root's library says what the release's row
/// says (`library_persists`: libnftables 1.1, on Linux 6.9 or later).
#[test]
#[ignore = "needs a release's root (its libnftables): run tests/run.sh"]
fn the_library_says_whether_a_table_may_outlive_its_owner() {
    let Some(_one) = library_test("the_library_says_whether_a_table_may_outlive_its_owner") else {
        return;
    };
    let nft = Nft::open().expect("libnftables");
    assert_eq!(nft.may_persist(), release::current().library_persists);
}

/// The elements of set `ports` in a script, as the script lists them (sorted).
fn script_ports(script: &str) -> Vec<u16> {
    let set = script
        .split("set ports {\n")
        .nth(1)
        .expect("a set of ports");
    let line = set.lines().nth(1).unwrap_or("");
    let elements = line
        .strip_prefix("elements = { ")
        .map_or("", |l| l.trim_end_matches(" }"));
    let mut ports: Vec<u16> = elements
        .split(", ")
        .filter_map(|p| p.parse().ok())
        .collect();
    ports.sort_unstable();
    ports
}

/// What slurmstepd installs with the core's own messages (`nftables::install`,
/// src/core/isolation/messages.rs) is what libnftables installs from the same script: the
/// kernel lists both alike, each rule expression by expression (`nft --debug=netlink list`),
/// with the table's flags and comment and every set's type and elements; for both tables of
/// two nodes of a step, and for a step of 3000 dual-stack nodes (its sets in several messages,
/// its batch larger than a socket's usual buffer). Another step's ports read from the kernel
/// (`nftables::set_ports`) are those its script lists; with the libnftables of each release's
/// root.
#[test]
#[ignore = "needs a release's root (its libnftables and nft): run tests/run.sh"]
fn the_kernel_holds_what_libnftables_would_install() {
    let Some(_one) = library_test("the_kernel_holds_what_libnftables_would_install") else {
        return;
    };
    let two = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let many = plan(
        "worker:*",
        &["isolate=yes"],
        &step("m[1-3000]", "1(x3000)", None),
    );
    let numbered = |name: &str| -> Result<Vec<IpAddr>, String> {
        let n: u32 = name
            .trim_start_matches('m')
            .parse()
            .map_err(|_| name.to_string())?;
        let v4 = std::net::Ipv4Addr::from(0x0a00_0000 | n);
        let v6 = std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, (n >> 16) as u16, n as u16);
        Ok(vec![v4.into(), v6.into()])
    };
    // `persist` where the root's library and the kernel have it (as slurmstepd asks first).
    let owned = |script: String| match release::current().library_persists {
        true => tfcluster::core::isolation::rules::persistent(&script),
        false => script,
    };
    let mut scripts = Vec::new();
    for node in 0..2 {
        let firewall = two.isolation(12, 3, OWNER_UID, node).unwrap();
        let (running, ended) = firewall.scripts(resolve).unwrap();
        scripts.push((table_name(12, 3), owned(running)));
        scripts.push((ended_table_name(12, 3), ended));
    }
    let firewall = many.isolation(12, 4, OWNER_UID, 7).unwrap();
    let (running, ended) = firewall.scripts(numbered).unwrap();
    scripts.push((table_name(12, 4), owned(running)));
    scripts.push((ended_table_name(12, 4), ended));
    let listed = |table: &str| {
        // This process runs in the root already: its own `nft`, in this thread's namespace.
        let out = std::process::Command::new("nft")
            .args(["--debug=netlink", "list", "table", "inet", table])
            .output()
            .expect("nft");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Each rule's handle (and its predecessor's) numbers the table's objects in the order
        // they were made, and a set's elements come in its hash's order: neither says what the
        // table does, so handles are left out and each set's elements sorted.
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines: Vec<String> = Vec::new();
        let mut elements: Vec<&str> = Vec::new();
        for line in text.lines() {
            if line.starts_with("\telement ") {
                elements.push(line);
                continue;
            }
            elements.sort_unstable();
            lines.extend(elements.drain(..).map(str::to_string));
            let rule = line.starts_with("inet ") && !line.contains(" @");
            lines.push(match rule {
                true => line.split(' ').take(3).collect::<Vec<_>>().join(" "),
                false => line.to_string(),
            });
        }
        lines.join("\n")
    };
    let mut nft = Nft::open().expect("libnftables");
    for (table, script) in &scripts {
        nft.run(script).expect("installed by libnftables");
        let by_library = listed(table);
        nft.run(&removal(table)).unwrap();
        let socket = install(script)
            .expect("installed by the core's messages")
            .expect("a script the core writes");
        assert_eq!(listed(table), by_library, "{table}");
        let mut ports = set_ports(table).expect("the kernel's dump of the set");
        ports.sort_unstable();
        assert_eq!(ports, script_ports(script), "{table}");
        match script.contains("flags owner") {
            true => socket.delete(table).unwrap(),
            false => delete_table(table).unwrap(),
        }
    }
    assert_eq!(node_tables().unwrap(), Vec::<String>::new());
}
