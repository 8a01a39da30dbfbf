//! `isolate=yes`: no one but the job's own processes on the step's own nodes reaches the step's
//! TensorFlow servers. First the rules as the core writes them, from plain values; then, on the
//! real test cluster, who can connect to what with and without the setting, what a node that
//! cannot isolate does, and that no rule outlives its job.

mod common;
use common::cluster::{cluster_sh, dir, records, sh, sh_ok, tool, PlugStack, CLUSTER_PGREP};
use common::*;
use std::net::IpAddr;
use tfcluster::core::claims::Owner;
use tfcluster::core::isolation::handover::{
    holder_of, holder_text, job_dir, legacy_slurmd_dir, no_holder_line, node_dir, stage_file,
    step_file, step_of, take_over, Stage, HELD_DIR, LEGACY_SLURMD_HOLDER, TOLD_FILE,
};
use tfcluster::core::isolation::holding::{next_to_ask, ASK, UNLOADED_LINE};
use tfcluster::core::isolation::messages::{
    install_request, set_elements_request, set_ports_reply,
};
use tfcluster::core::isolation::rules::{
    check_syncookies, persistent, OWNED, OWNED_PERSISTENT, SYNCOOKIES,
};
use tfcluster::core::isolation::tables::{
    check_table_count, check_tables, commented_owner, dump_reply, dump_request, ended_steps,
    ended_table_name, job_tables, other_tables, owner_comment, removal, table_jobs, table_name,
    Listed, MAX_TABLES, MAX_TABLES_PER_USER,
};
use tfcluster::core::netlink::Reply;
use tfcluster::core::topology::ConfFile::{self, Missing, Text, Unreadable};
use tfcluster::core::Error;
use tfcluster::core::StepInputs;
use tfcluster::spank::isolation::nftables::{Nft, LIBRARY};

/// The test cluster's addresses (tests/cluster/cluster.sh), one IPv6 address, and a duplicate
/// (a name listed twice in /etc/hosts).
fn resolve(address: &str) -> Result<Vec<IpAddr>, String> {
    let found: &[&str] = match address {
        "n9" => &["10.77.0.11"],
        "n10" => &["10.77.0.12", "fd00::12", "10.77.0.12"],
        _ => &[],
    };
    Ok(found.iter().map(|a| a.parse().unwrap()).collect())
}

/// The whole script node n9 runs for job 12's step 3 of 3 tasks (2 on n9, 1 on n10), owned by
/// uid 61001, in a table the installing process owns: n9's own ports admit new connections only
/// at n9's own step address and from the step's nodes; no connection to an endpoint of the step
/// is forwarded through n9; and only uid 61001 may open connections to any endpoint of the step
/// (the nodes with one task at the first slot's port, those with two at both), or to n9's ports
/// at any address over loopback: its attempts are accepted first, and every other one refused,
/// one whose sender has no uid included (fail closed).
#[test]
fn the_firewall_of_one_node_of_a_step() {
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let expected = format!(
        "table inet tfcluster_12_3 {{
flags owner
comment \"uid 61001\"
set peers4 {{
type ipv4_addr
elements = {{ 10.77.0.11, 10.77.0.12 }}
}}
set peers6 {{
type ipv6_addr
elements = {{ fd00::12 }}
}}
set self4 {{
type ipv4_addr
elements = {{ 10.77.0.11 }}
}}
set self6 {{
type ipv6_addr
}}
set ports {{
type inet_service
elements = {{ {a}, {b} }}
}}
set hosts4_0 {{
type ipv4_addr
elements = {{ 10.77.0.12 }}
}}
set hosts6_0 {{
type ipv6_addr
elements = {{ fd00::12 }}
}}
set ports_0 {{
type inet_service
elements = {{ {a} }}
}}
set hosts4_1 {{
type ipv4_addr
elements = {{ 10.77.0.11 }}
}}
set hosts6_1 {{
type ipv6_addr
}}
set ports_1 {{
type inet_service
elements = {{ {a}, {b} }}
}}
chain input {{
type filter hook input priority 0; policy accept;
iif \"lo\" accept
ip daddr @self4 ip saddr @peers4 accept
ip6 daddr @self6 ip6 saddr @peers6 accept
tcp flags & (syn | ack) == syn tcp dport @ports reject with tcp reset
}}
chain forward {{
type filter hook forward priority 0; policy accept;
tcp flags & (syn | ack) == syn ip daddr @hosts4_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip daddr @hosts4_1 tcp dport @ports_1 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_1 tcp dport @ports_1 reject with tcp reset
}}
chain output {{
type filter hook output priority 0; policy accept;
tcp flags & (syn | ack) == syn meta skuid 61001 accept
tcp flags & (syn | ack) == syn ip daddr @hosts4_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip daddr @hosts4_1 tcp dport @ports_1 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_1 tcp dport @ports_1 reject with tcp reset
tcp flags & (syn | ack) == syn oif \"lo\" tcp dport @ports reject with tcp reset
tcp flags & (syn | ack) == syn | ack tcp sport @ports meta skuid 61001 accept
tcp flags & (syn | ack) == syn | ack tcp sport @ports drop
}}
}}
",
        a = plan.endpoints.port(0),
        b = plan.endpoints.port(1)
    );
    assert_eq!(
        plan.firewall(12, 3, 61001, 0, resolve).unwrap().as_deref(),
        Some(expected.as_str())
    );
}

/// What n9 keeps for the same step once its own tasks have all ended while n10's still run: a
/// table of its own, not owned (it outlives n9's slurmstepd), with the forward and output rules
/// over every endpoint of the step, so that no other user on n9, and nothing forwarded through
/// it, reaches n10's servers, which still admit n9's address; n9's own ports (`own`) answering
/// no other user, since n10's tasks may still connect to them; every port of the step in its
/// `ports` set, for a later step's check. No input rule: n9 serves nothing of the step any more.
#[test]
fn what_a_node_keeps_after_its_tasks_ended() {
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let firewall = plan.isolation(12, 3, 61001, 0).unwrap();
    let (_, ended) = firewall.scripts(resolve).unwrap();
    let expected = format!(
        "table inet tfcluster_12_3_ended {{
comment \"uid 61001\"
set ports {{
type inet_service
elements = {{ {a}, {b} }}
}}
set own {{
type inet_service
elements = {{ {a}, {b} }}
}}
set hosts4_0 {{
type ipv4_addr
elements = {{ 10.77.0.12 }}
}}
set hosts6_0 {{
type ipv6_addr
elements = {{ fd00::12 }}
}}
set ports_0 {{
type inet_service
elements = {{ {a} }}
}}
set hosts4_1 {{
type ipv4_addr
elements = {{ 10.77.0.11 }}
}}
set hosts6_1 {{
type ipv6_addr
}}
set ports_1 {{
type inet_service
elements = {{ {a}, {b} }}
}}
chain forward {{
type filter hook forward priority 0; policy accept;
tcp flags & (syn | ack) == syn ip daddr @hosts4_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip daddr @hosts4_1 tcp dport @ports_1 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_1 tcp dport @ports_1 reject with tcp reset
}}
chain output {{
type filter hook output priority 0; policy accept;
tcp flags & (syn | ack) == syn meta skuid 61001 accept
tcp flags & (syn | ack) == syn ip daddr @hosts4_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_0 tcp dport @ports_0 reject with tcp reset
tcp flags & (syn | ack) == syn ip daddr @hosts4_1 tcp dport @ports_1 reject with tcp reset
tcp flags & (syn | ack) == syn ip6 daddr @hosts6_1 tcp dport @ports_1 reject with tcp reset
tcp flags & (syn | ack) == syn | ack tcp sport @own meta skuid 61001 accept
tcp flags & (syn | ack) == syn | ack tcp sport @own drop
}}
}}
",
        a = plan.endpoints.port(0),
        b = plan.endpoints.port(1)
    );
    assert_eq!(ended, expected);
    assert_eq!(ended_table_name(12, 3), "tfcluster_12_3_ended");
}

/// The holder's take-over of n9's ended table (job 12, step 3; [`what_a_node_keeps_after_its_tasks_ended`]):
/// one transaction removes the table slurmstepd left and installs the same rules again, owned;
/// where the table is gone meanwhile, the second script installs them alone.
#[test]
fn the_holder_takes_an_ended_table_over_in_one_transaction() {
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let firewall = plan.isolation(12, 3, 61001, 0).unwrap();
    let (_, ended) = firewall.scripts(resolve).unwrap();
    let body = ended
        .strip_prefix("table inet tfcluster_12_3_ended {\n")
        .unwrap();
    let install = format!("table inet tfcluster_12_3_ended {{\n{OWNED}{body}");
    let replace = format!("delete table inet tfcluster_12_3_ended\n{install}");
    assert_eq!(take_over(12, 3, &ended), Some([replace, install]));
    assert_eq!(take_over(12, 4, &ended), None, "another step's script");
    assert_eq!(take_over(12, 3, "table inet tfcluster_12_3 {\n}\n"), None);
}

/// The names in a holder's directory ([`HELD_DIR`]`/NODE/JOB`, the extern step's; `/NODE/slurmd`
/// was a 0.7.0 slurmd's, whose job files the epilog still removes): (file name, its job, step
/// and how far it has come). A name is its step's file at that stage.
#[test]
fn the_files_a_holder_and_its_steps_share() {
    /// A step's file: its job, step and how far it has come.
    type StepFile = (u32, u32, Stage);
    #[rustfmt::skip]
    let names: &[(&str, Option<StepFile>)] = &[
        ("step_12.3",          Some((12, 3, Stage::Left))),
        ("step_12.3.taking",   Some((12, 3, Stage::Taking))),
        ("step_12.3.held",     Some((12, 3, Stage::Held))),
        ("step_12.4294967290", Some((12, 4294967290, Stage::Left))),
        (".step_12.3",         None), // being written
        ("holder",             None),
        ("step_3",             None),
        ("step_12.",           None),
        ("step_.3",            None),
        ("step_12.3.held.x",   None),
        ("step_12.3.taking.held", None),
        ("step_12.x",          None),
    ];
    for &(name, expected) in names {
        assert_eq!(step_of(name), expected, "{name}");
        if let Some((job, step, stage)) = expected {
            assert_eq!(stage_file(job, step, stage), name);
        }
    }
    assert_eq!(step_file(12, 3), "step_12.3");
    assert_eq!(job_dir("n9", 12), format!("{HELD_DIR}/n9/12"));
    assert_eq!(job_dir("..", 12), format!("{HELD_DIR}/_/12"));
    assert_eq!(job_dir("a/b", 12), format!("{HELD_DIR}/_/12"));
    assert_eq!(
        legacy_slurmd_dir("n9"),
        format!("{HELD_DIR}/n9/{LEGACY_SLURMD_HOLDER}")
    );
    assert!(
        LEGACY_SLURMD_HOLDER.parse::<u32>().is_err(),
        "never a job's directory"
    );
    let owner = Owner {
        pid: 4242,
        start: 987654,
    };
    assert_eq!(holder_text(owner), "pid=4242 start=987654\n");
    assert_eq!(holder_of(&holder_text(owner)), Some(owner));
    assert_eq!(holder_of("pid=4242\n"), None);
    assert_eq!(holder_of("pid=x start=1\n"), None);
}

/// The tables of steps whose tasks ended on the node, which a later step's node removes once
/// slurmctld says their step has ended: (an inet table's name, its job and step).
#[rustfmt::skip]
#[test]
fn the_tables_of_steps_that_ended_on_a_node() {
    let cases: &[(&str, Option<(u32, u32)>)] = &[
        ("tfcluster_12_3_ended",          Some((12, 3))),
        ("tfcluster_12_4294967290_ended", Some((12, 4294967290))),
        ("tfcluster_12_3",                None),
        ("tfcluster_12__ended",           None),
        ("tfcluster__3_ended",            None),
        ("tfcluster_12_3_ended_x",        None),
        ("filter",                        None),
    ];
    for (name, ids) in cases {
        let got: Vec<(u32, u32)> = ended_steps(&[name.to_string()]).iter().map(|&(_, j, s)| (j, s)).collect();
        assert_eq!(got, ids.iter().copied().collect::<Vec<_>>(), "{name}");
    }
}

/// One netlink message as the kernel sends it: its type, flags and body (sequence and port 0),
/// padded to 4 bytes.
fn message(kind: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let mut m = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&[0; 8]);
    m.extend_from_slice(body);
    m.resize(m.len().next_multiple_of(4), 0);
    m
}

/// One netlink attribute: its type and value, padded to 4 bytes.
fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut a = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(value);
    a.resize(a.len().next_multiple_of(4), 0);
    a
}

/// The node's table names as the kernel's dump answers them (`NETLINK_NETFILTER`), one
/// reply at a time: (what, the reply's bytes, what it says). A table of another family names
/// nothing (the request asks for inet alone).
#[rustfmt::skip]
#[test]
fn the_kernels_table_dump_names_the_inet_tables() {
    // A table of `family`: nfgenmsg, then its name, flags and user data attributes (the user
    // data: records of type, length, value; a comment is type 0).
    let commented = |family: u8, name: &str, comment: Option<&str>| -> Vec<u8> {
        let mut body = vec![family, 0, 0, 0];
        body.extend(attribute(1, format!("{name}\0").as_bytes()));
        body.extend(attribute(2, &[0, 0, 0, 0]));
        if let Some(comment) = comment {
            let value = format!("{comment}\0");
            body.extend(attribute(6, &[[1, 1, 7].as_slice(), &[0, value.len() as u8], value.as_bytes()].concat()));
        }
        message(0x0a00, 2, &body)
    };
    let table = |family: u8, name: &str| commented(family, name, None);
    let names = |n: &[&str]| n.iter().map(|s| Listed { name: s.to_string(), uid: None }).collect::<Vec<_>>();
    let owned = |name: &str, uid| vec![Listed { name: name.to_string(), uid: Some(uid) }];
    let cases: Vec<(&str, Vec<u8>, Reply<Listed>)> = vec![
        ("two tables",                 [table(1, "tfcluster_12_3"), table(1, "filter")].concat(), Reply::More(names(&["tfcluster_12_3", "filter"]))),
        ("a table, then the end",      [table(1, "tfcluster_12_3_ended"), message(3, 2, &[0; 4])].concat(), Reply::Done(names(&["tfcluster_12_3_ended"]))),
        ("a table its comment owns",   commented(1, "tfcluster_12_3", Some("uid 61001")), Reply::More(owned("tfcluster_12_3", 61001))),
        ("another comment",            commented(1, "filter", Some("the site's")), Reply::More(names(&["filter"]))),
        ("an ip table",                table(2, "tfcluster_12_3"),      Reply::More(names(&[""]))),
        ("the end alone",              message(3, 2, &[0; 4]),          Reply::Done(vec![])),
        ("an error",                   message(2, 0, &[0xff; 4]),       Reply::Failed),
        ("a dump the changes cut",     message(0x0a00, 0x12, &table(1, "x")[16..]), Reply::Failed),
        ("a table with no name",       message(0x0a00, 2, &[1, 0, 0, 0]), Reply::Failed),
        ("a message cut short",        table(1, "tfcluster_12_3")[..24].to_vec(), Reply::Failed),
        ("another message type",       message(0x0a03, 2, &[1, 0, 0, 0]), Reply::Failed),
    ];
    for (what, reply, says) in cases {
        assert_eq!(dump_reply(&reply), says, "{what}");
    }
    // A dump of tables (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETTABLE), inet's alone.
    let request = dump_request();
    assert_eq!(request.len(), 20);
    assert_eq!(request[4..8], [0x01, 0x0a, 0x01, 0x03], "type and flags (little-endian here)");
    assert_eq!(request[16], 1, "NFPROTO_INET");
}

/// Each node admits connections to its own ports only (the peers and endpoints are the same on
/// every node). (node, its `ports` set)
#[rustfmt::skip]
#[test]
fn each_node_admits_to_its_own_ports() {
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let (a, b) = (plan.endpoints.port(0), plan.endpoints.port(1));
    let cases: &[(usize, String)] = &[
        (0, format!("elements = {{ {a}, {b} }}")),
        (1, format!("elements = {{ {a} }}")),
    ];
    for (node, ports) in cases {
        let script = plan.firewall(12, 3, 61001, *node, resolve).unwrap().unwrap();
        let set = script.split("set ports {\n").nth(1).unwrap();
        assert_eq!(set.lines().nth(1), Some(ports.as_str()), "node {node}: {set}");
    }
}

/// The scripts the kernel's own messages install (src/core/isolation/messages.rs): both tables
/// of each node of a step, owned, persistent or neither, and nothing else. A line, word or
/// value the rules do not write leaves the script to libnftables (`None`): one row per way.
/// tests/firewall.rs compares what the kernel then holds with what libnftables installs.
#[rustfmt::skip]
#[test]
fn the_kernels_messages_install_only_the_scripts_the_rules_write() {
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    for node in 0..2 {
        let firewall = plan.isolation(12, 3, 61001, node).unwrap();
        let (running, ended) = firewall.scripts(resolve).unwrap();
        for script in [persistent(&running), running, ended] {
            assert!(install_request(&script).is_some(), "{script}");
        }
    }
    let (script, _) = plan.isolation(12, 3, 61001, 0).unwrap().scripts(resolve).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("a rule that counts",               " drop\n",                          " counter\n"),
        ("another verdict",                  " drop\n",                          " queue\n"),
        ("words after the verdict",          " drop\n",                          " drop drop\n"),
        ("a table of another family",        "table inet ",                      "table ip "),
        ("another flag",                     "flags owner\n",                    "flags dormant\n"),
        ("a comment with a quote",           "comment \"uid 61001\"",            "comment \"uid \"61001\""),
        ("another set type",                 "type inet_service",                "type ether_addr"),
        ("an address that is not one",       "10.77.0.11",                       "10.77.0.311"),
        ("a set not declared",               "@ports_0",                         "@ports_9"),
        ("IPv4 matched against IPv6",        "ip daddr @hosts4_0",               "ip daddr @hosts6_0"),
        ("both families in one rule",        "ip daddr @self4 ip saddr @peers4", "ip daddr @self4 ip6 saddr @peers6"),
        ("a uid that is not a number",       "meta skuid 61001 accept",          "meta skuid alice accept"),
        ("another priority",                 "priority 0;",                      "priority 10;"),
        ("another hook",                     "hook forward",                     "hook prerouting"),
        ("another interface",                "iif \"lo\"",                       "iif \"eth0\""),
        ("a reset with no TCP match",        "iif \"lo\" accept",                "iif \"lo\" reject with tcp reset"),
        ("a deletion first",                 "table inet ",                      "delete table inet x\ntable inet "),
        ("another table after it",           "}\n}\n",                           "}\n}\ntable inet x {\n}\n"),
    ];
    for (what, from, to) in cases {
        assert!(script.contains(from), "{what}");
        let changed = script.replacen(from, to, 1);
        assert_eq!(install_request(&changed), None, "{what}: {changed}");
    }
}

/// The batch around a table's messages, byte by byte: `NFNL_MSG_BATCH_BEGIN` and `_END` for the
/// nftables subsystem, every message under one number, the table made only where none of its
/// name is (`NLM_F_CREATE | NLM_F_EXCL`), and the kernel's answer asked of the last message
/// alone, so that the first answer under that number is an error wherever one is.
#[test]
fn the_kernels_messages_frame_one_transaction() {
    let install = install_request("table inet t {\nflags owner\n}\n").unwrap();
    let header = |length: u32, kind: u16, flags: u16| -> Vec<u8> {
        [
            &length.to_ne_bytes()[..],
            &kind.to_ne_bytes(),
            &flags.to_ne_bytes(),
            &7u32.to_ne_bytes(),
            &[0; 4],
        ]
        .concat()
    };
    let expected = [
        header(20, 0x10, 0x1),
        vec![0, 0, 0, 10],
        header(36, 0x0a00, 0x1 | 0x4 | 0x200 | 0x400),
        vec![1, 0, 0, 0],
        [
            &6u16.to_ne_bytes()[..],
            &1u16.to_ne_bytes(),
            b"t\0",
            &[0, 0],
        ]
        .concat(),
        [
            &8u16.to_ne_bytes()[..],
            &2u16.to_ne_bytes(),
            &2u32.to_be_bytes(),
        ]
        .concat(),
        header(20, 0x11, 0x1),
        vec![0, 0, 0, 10],
    ]
    .concat();
    assert_eq!(install.batch(7), expected);
}

/// Another step's ports, as the kernel's dump of its set `ports` gives them: each element's key
/// (two bytes, network order), over as many messages as the kernel sends.
#[test]
fn another_steps_ports_are_its_sets_keys() {
    let nested = |kind: u16, value: &[u8]| attribute(kind | 0x8000, value);
    let elements = |ports: &[u16]| -> Vec<u8> {
        let mut list = Vec::new();
        for port in ports {
            list.extend(nested(1, &nested(1, &attribute(1, &port.to_be_bytes()))));
        }
        let mut body = vec![1, 0, 0, 0];
        body.extend(attribute(1, b"tfcluster_12_3\0"));
        body.extend(attribute(2, b"ports\0"));
        body.extend(nested(3, &list));
        message(0x0a0c, 2, &body)
    };
    // What one reply says: each message's ports.
    type Says = Reply<Vec<u16>>;
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, Says)> = vec![
        ("two ports",            elements(&[24000, 24001]),                           Reply::More(vec![vec![24000, 24001]])),
        ("then the end",         [elements(&[24002]), message(3, 2, &[0; 4])].concat(), Reply::Done(vec![vec![24002]])),
        ("no set of that name",  message(2, 0, &(-2i32).to_ne_bytes()),               Reply::Failed),
        ("a key of four bytes",  message(0x0a0c, 2, &[&[1u8, 0, 0, 0][..], &nested(3, &nested(1, &nested(1, &attribute(1, &[0, 0, 0x5d, 0xc0]))))].concat()), Reply::Failed),
    ];
    for (what, reply, says) in cases {
        assert_eq!(set_ports_reply(&reply), says, "{what}");
    }
    // A dump of the set's elements (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETSETELEM), inet's.
    let request = set_elements_request("tfcluster_12_3", "ports");
    assert_eq!(
        request[4..8],
        [0x0d, 0x0a, 0x01, 0x03],
        "type and flags (little-endian here)"
    );
    assert_eq!(request[16], 1, "NFPROTO_INET");
}

#[test]
fn without_isolate_there_is_no_firewall() {
    let plan = plan("worker:*", &[], &step("n9,n10", "2,1", None));
    assert_eq!(plan.firewall(12, 3, 61001, 0, resolve), Ok(None));
}

/// Nodes whose address template makes them one address (e.g. a gateway) are resolved once.
/// Which SYN cookie settings a node's firewall works with: the output chain drops an answer
/// with no owner, as a SYN cookie is, so a node that sends every answer as one (2) would drop
/// the owner's own handshakes, and refuses the step; one whose setting cannot be read refuses
/// it too. A kernel without SYN cookies has no such file.
#[test]
fn a_node_that_answers_every_attempt_with_a_syn_cookie_refuses_the_step() {
    let unknown = |reason: &str| {
        Some(Error::SynCookiesUnknown {
            reason: reason.into(),
        })
    };
    #[rustfmt::skip]
    let cases: [(ConfFile, Option<Error>); 7] = [
        (Missing,                             None),
        (Text("0\n".into()),                  None),
        (Text("1\n".into()),                  None),
        (Text("2\n".into()),                  Some(Error::SynCookiesAlways)),
        (Text("3\n".into()),                  unknown(&format!("{SYNCOOKIES} says '3', not 0, 1 or 2"))),
        (Text("".into()),                     unknown(&format!("{SYNCOOKIES} says '', not 0, 1 or 2"))),
        (Unreadable("Permission denied".into()), unknown(&format!("cannot read {SYNCOOKIES}: Permission denied"))),
    ];
    for (sysctl, refused) in cases {
        let what = format!("{sysctl:?}");
        assert_eq!(check_syncookies(sysctl).err(), refused, "{what}");
    }
}

/// libnftables 1.0.6 calls `exit()` where it cannot open its netlink socket: with no descriptor
/// free, the plugin does not call it, and says why (in a child process whose descriptors are all
/// taken: this test's binary again, as [`NO_DESCRIPTOR`] says).
#[test]
fn libnftables_is_not_called_without_a_free_descriptor() {
    if std::env::var_os(NO_DESCRIPTOR).is_some() {
        // The lowest free descriptor: the limit set there leaves none free below it.
        // SAFETY: dup and close of a descriptor this process holds (stdin).
        let free = unsafe { libc::dup(0) };
        assert!(free >= 0);
        unsafe { libc::close(free) };
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid rlimits for this process.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        limit.rlim_cur = free as libc::rlim_t;
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
        let error = Nft::open().err().expect("opened with no descriptor free");
        println!("{NO_DESCRIPTOR}: {error}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "libnftables_is_not_called_without_a_free_descriptor",
            "--nocapture",
        ])
        .args(["--test-threads=1"])
        .env(NO_DESCRIPTOR, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.contains(NO_DESCRIPTOR))
        .unwrap_or_default();
    assert!(
        line.contains("cannot open a netfilter netlink socket") && line.contains("not called"),
        "{stdout}"
    );
}

/// Set for the child of [`libnftables_is_not_called_without_a_free_descriptor`].
const NO_DESCRIPTOR: &str = "TFC_TEST_NO_DESCRIPTOR";

/// Each node's address is resolved once, however many of its tasks (endpoints) the rules name.
/// (Two nodes never share an address: `address=` needs `%h`, and a step names a node once.)
#[test]
fn an_address_is_resolved_once() {
    let plan = plan(
        "worker:*",
        &["isolate=yes", "address=%hgw"],
        &step("n9,n10", "3,3", None),
    );
    let mut asked = Vec::new();
    plan.firewall(1, 0, 0, 0, |a| {
        asked.push(a.to_string());
        Ok(vec!["10.0.0.1".parse().unwrap()])
    })
    .unwrap();
    assert_eq!(asked, ["n9gw", "n10gw"]);
}

/// The tables the job epilog removes: every table of that job's steps, and no other job's.
/// (an inet table's name, whether job 12's epilog removes it)
#[rustfmt::skip]
#[test]
fn the_job_epilog_removes_every_table_of_its_job_and_no_other() {
    let cases: &[(&str, bool)] = &[
        ("tfcluster_12_0",          true),
        ("tfcluster_12_4294967290", true),
        ("tfcluster_12_3_ended",    true),
        ("tfcluster_123_3_ended",   false),
        ("tfcluster_12__ended",     false),
        ("tfcluster_12_3_ended_",   false),

        ("tfcluster_123_0",         false),
        ("tfcluster_1_2",           false),
        ("tfcluster_12_",           false),
        ("tfcluster_12_0x",         false),
        ("filter",                  false),
        ("firewalld",               false),
    ];
    for (name, removed) in cases {
        assert_eq!(!job_tables(&[name.to_string()], 12).is_empty(), *removed, "{name}");
    }
    let listing: Vec<String> = cases.iter().map(|(name, _)| name.to_string()).collect();
    assert_eq!(
        job_tables(&listing, 12),
        ["tfcluster_12_0", "tfcluster_12_4294967290", "tfcluster_12_3_ended"]
    );
    assert_eq!(table_name(12, 4294967290), "tfcluster_12_4294967290");
    assert_eq!(removal("tfcluster_12_0"), "delete table inet tfcluster_12_0\n");
}

/// Which ports a node's rules may cover: tfcluster's own and a job's `port_base` only inside
/// the site's `port_range` (20000-32767 by default), Slurm's reservation for the step
/// (`MpiParams=ports`, the admin's range for steps) wherever it is. (the step's ports, covered)
#[rustfmt::skip]
#[test]
fn slurms_reserved_ports_need_not_be_in_port_range() {
    let cases: &[(&str, Option<&str>, bool)] = &[
        ("worker:*",                 None,                  true),
        ("worker:*,port_base=20000", None,                  true),
        ("worker:*,port_base=12000", None,                  false),
        ("worker:*",                 Some("12000-12001"),   true),
        ("worker:*",                 Some("6817,6818"),     true),
    ];
    for (spec, resv_ports, covered) in cases {
        let inputs = StepInputs { resv_ports: *resv_ports, ..step("n9", "2", None) };
        let script = plan(spec, &["isolate=yes"], &inputs).firewall(7, 0, 1000, 0, resolve_any);
        assert_eq!(script.is_ok(), *covered, "{spec} {resv_ports:?}: {script:?}");
        if let (Ok(Some(script)), Some(ports)) = (&script, resv_ports) {
            let first = ports.split([',', '-']).next().unwrap();
            assert!(script.contains(&format!("elements = {{ {first}, ")), "{script}");
        }
    }
}

fn resolve_any(_: &str) -> Result<Vec<IpAddr>, String> {
    Ok(vec![[10, 0, 0, 9].into()])
}

/// Where libnftables and the kernel can, the table outlives a killed owner: the same script,
/// with the one flags line changed.
#[test]
fn a_persistent_table_is_the_same_script_with_persist() {
    let plan = plan("worker:*", &["isolate=yes"], &step("n9,n10", "2,1", None));
    let script = plan.firewall(12, 3, 61001, 0, resolve).unwrap().unwrap();
    assert_eq!(script.matches(OWNED).count(), 1);
    assert_eq!(persistent(&script), script.replace(OWNED, OWNED_PERSISTENT));
    assert_ne!(persistent(&script), script);
}

/// The tables a node compares its ports with: every other step's, not its own step's (nor, in
/// a heterogeneous job, its other components' of the same step), and no one else's. Job 12's
/// step 3, whose components are jobs 12 and 13: (an inet table's name, compared).
#[rustfmt::skip]
#[test]
fn the_tables_a_step_compares_its_ports_with() {
    let cases: &[(&str, bool)] = &[
        ("tfcluster_57_0",  true),
        ("tfcluster_12_2",  true),
        ("tfcluster_13_0",  true),
        ("tfcluster_12_3",  false),
        ("tfcluster_13_3",  false),
        ("tfcluster_12_31", true),
        ("tfcluster_57_0_ended", true),
        ("tfcluster_12_3_ended", false),
        ("filter",          false),
    ];
    for (name, compared) in cases {
        assert_eq!(!other_tables(&[name.to_string()], &[12, 13], 3).is_empty(), *compared, "{name}");
    }
}

/// How many tables a node holds, and whose: a step's table is refused when the node holds
/// MAX_TABLES already, or its user's jobs MAX_TABLES_PER_USER. User 1001 runs the step (its
/// job 7); job 8 is user 1002's, job 9's owner slurmctld cannot say: (what, the node's other
/// tables' jobs, refused and whose).
#[rustfmt::skip]
#[test]
#[allow(clippy::type_complexity)] // a table of cases
fn a_node_holds_so_many_tables_and_a_user_so_many() {
    let owner = |job: u32| match job { 7 => Some(1001), 8 => Some(1002), _ => None };
    let tables = |job: u32, n: usize| vec![("tfcluster_J_S", job); n];
    let cases: Vec<(&str, Vec<(&str, u32)>, Option<bool>)> = vec![
        ("an empty node",                                 vec![],                                          None),
        ("the user's steps one short of their bound",     tables(7, MAX_TABLES_PER_USER - 1),              None),
        ("the user's steps at their bound",               tables(7, MAX_TABLES_PER_USER),                  Some(true)),
        ("another user's steps at the user's bound",      tables(8, MAX_TABLES_PER_USER),                  None),
        ("unknown owners count for the node alone",       tables(9, MAX_TABLES - 1),                       None),
        ("the node at its bound",                         [tables(8, MAX_TABLES / 2), tables(9, MAX_TABLES / 2)].concat(), Some(false)),
    ];
    for (what, jobs, refused) in cases {
        let mut asked = Vec::new();
        let got = check_table_count(&jobs, 1001, |job| { asked.push(job); owner(job) });
        match (refused, got) {
            (None, Ok(())) => {}
            (Some(yours), Err(Error::TooManyTables { yours: y, .. })) => assert_eq!(yours, y, "{what}"),
            (want, got) => panic!("{what}: {want:?} {got:?}"),
        }
        let mut once = asked.clone();
        once.sort();
        once.dedup();
        assert_eq!(once.len(), asked.len(), "{what}: each job's owner asked once: {asked:?}");
        assert!(once.len() <= 2, "{what}: only the tables' jobs asked: {asked:?}");
        if jobs.len() < MAX_TABLES_PER_USER {
            assert!(asked.is_empty(), "{what}: no one asked below the user's bound: {asked:?}");
        }
    }
    // Whose a job's tables are, where one's comment says (tfcluster's own, from 0.13.0).
    let listed = [("tfcluster_57_0", Some(1002)), ("tfcluster_57_1_ended", None), ("tfcluster_58_0", None), ("filter", Some(1001))]
        .map(|(name, uid)| Listed { name: name.to_string(), uid });
    assert_eq!((commented_owner(&listed, 57), commented_owner(&listed, 58)), (Some(1002), None));
    assert_eq!(owner_comment(1002), "comment \"uid 1002\"\n");
    // Each tfcluster table's job; others are passed over, and so are the tables just removed.
    let listing = ["tfcluster_57_0", "tfcluster_57_1_ended", "tfcluster_12_3", "filter", "tfcluster_x_1"].map(String::from);
    assert_eq!(table_jobs(&listing, &["tfcluster_12_3"]), [("tfcluster_57_0", 57), ("tfcluster_57_1_ended", 57)]);
}

/// Which other step's table refuses a node's step ports: (what, the step's ports here, other
/// steps' tables, the port refused or None).
#[rustfmt::skip]
#[test]
fn a_port_in_another_steps_table_refuses_the_step() {
    let table = |ports: &[u16]| vec![("tfcluster_57_0", ports.to_vec())];
    type Case<'a> = (&'a str, &'a [u16], Vec<(&'a str, Vec<u16>)>, Option<u16>);
    let cases: Vec<Case> = vec![
        ("no other table",                     &[20000, 20001], vec![],                 None),
        ("another step's table, other ports",  &[20000, 20001], table(&[20064, 20065]), None),
        ("another step's table over one port", &[20000, 20001], table(&[20001, 20002]), Some(20001)),
        ("the first port held is named",       &[20000, 20001], table(&[20001, 20000]), Some(20000)),
        ("no port on this node",               &[],             table(&[20000]),        None),
    ];
    for (what, ports, tables, refused) in &cases {
        let got = check_tables(ports, tables).err().map(|e| match e {
            tfcluster::core::Error::PortInOtherTable { port, .. } => port,
            e => panic!("{what}: {e}"),
        });
        assert_eq!(got, *refused, "{what}");
    }
}

/// docs/isolation.md's table of which kernels keep a killed slurmstepd's table says, for this
/// machine's kernel, what the cluster test finds on every release ([`release::kernel_persists`]).
#[test]
fn the_isolation_page_says_which_kernels_keep_the_table() {
    let guide = repo_file("docs/isolation.md");
    let (row, kept) = match release::kernel_persists() {
        true => ("| Linux 6.9 or later ", "kept until the job's epilog |"),
        false => ("| Linux 5.12 to 6.8 ", "removed with it |"),
    };
    let rows: Vec<&str> = guide.lines().filter(|l| l.starts_with(row)).collect();
    assert!(rows.len() == 1 && rows[0].ends_with(kept), "{rows:?}");
}

/// docs/isolation.md says how often the holder asks slurmctld about a held table's step (its
/// cost to slurmctld).
#[test]
fn the_isolation_page_says_how_often_the_holder_asks() {
    let guide = repo_file("docs/isolation.md");
    let phrase = format!("it asks about one held table every {} s", ASK.as_secs());
    assert_eq!(guide.matches(&phrase).count(), 1, "{phrase}");
}

/// Which held table's step the extern step's holder asks slurmctld about next (one request per
/// `ASK` per node, however many it holds): the one never asked first, else the one asked
/// longest ago, ties by job and step; nothing when it holds none.
#[test]
fn the_holder_asks_about_one_table_at_a_time() {
    let s = |secs: u64| Some(std::time::Duration::from_secs(secs));
    // Each held table's step and the time since the holder last asked about it; the next.
    #[rustfmt::skip]
    let cases = [
        (vec![],                                                None),
        (vec![((12, 3), s(1))],                                 Some((12, 3))),
        (vec![((12, 3), s(5)), ((12, 4), None)],                Some((12, 4))),
        (vec![((12, 4), None), ((12, 3), None)],                Some((12, 3))),
        (vec![((12, 3), s(1)), ((12, 4), s(3)), ((12, 5), s(2))], Some((12, 4))),
        (vec![((12, 4), s(2)), ((12, 3), s(2))],                Some((12, 3))),
    ];
    for (held, expected) in cases {
        assert_eq!(next_to_ask(&held), expected, "{held:?}");
    }
}

/// docs/isolation.md quotes the once-per-node line of a node where nothing holds an ended
/// table: each fragment of its quote (between `...`) is the line's own text.
#[test]
fn the_isolation_page_quotes_the_no_holder_line() {
    let flat = doc_words("docs/isolation.md");
    let quote = flat
        .split_once("reboots: `isolate=yes: nothing")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(quote, _)| format!("isolate=yes: nothing{quote}"))
        .expect("docs/isolation.md quotes the line");
    let line = no_holder_line(12, 3);
    for fragment in quote.split(" ... ") {
        assert!(line.contains(fragment), "{fragment:?} is not in: {line}");
    }
}

// ---- on the test cluster ---------------------------------------------------------------------

const OWNER: &str = "tfc-owner";
const OTHER: &str = "tfc-other";
const NODES: [&str; 4] = ["n9", "n10", "n011", "n012"];

/// A shell loop that prints `TABLES|node|count` of tfcluster's tables on each node, read inside
/// the node's network namespace.
fn tables_script() -> String {
    format!(
        "for n in {}; do echo \"TABLES|$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | grep -c tfcluster_)\"; done",
        NODES.join(" ")
    )
}

/// Where an attempt comes from.
#[derive(Clone, Copy)]
enum From {
    /// A job of the row's user on that node (srun).
    Node(&'static str),
    /// A network namespace behind n10 whose traffic n10 forwards and NATs to its own address:
    /// a container, VM or pod network of another user on a node of the step.
    NatBehindN10,
}

/// Who tries to connect to every endpoint of the owner's step (4 tasks on n9 and n10, in
/// partition `shared`, so that others' jobs can run beside it), from where, to which address,
/// and what each attempt gets with isolate=yes and without. Every path another user can take:
/// the step's own addresses, n9's other addresses (which TensorFlow listens on too: every
/// endpoint's port, at that address), forwarded traffic, and a ruleset flushed by the admin's
/// firewall service ([`OtherPaths`] makes the addresses and the NAT'd network).
struct Reach {
    /// The label the probe prints.
    who: &'static str,
    user: &'static str,
    from: From,
    /// The address dialled instead of each endpoint's own, and the source address bound.
    at: Option<&'static str>,
    source: Option<&'static str>,
    /// A command run as root on the host before the attempt (in the nodes' namespaces).
    before: &'static str,
    isolated: &'static str,
    open: &'static str,
}

const N9_SECOND_V4: &str = "10.77.0.250";
const N9_V6: &str = "fd77::11";
const N9_OTHER_NETWORK: &str = "10.78.0.11";
const N10_STEP_ADDRESS: &str = "10.77.0.12";
const FLUSH_N9: &str = "nsenter --net=/run/netns/tfc-n9 nft flush ruleset";
/// Root's attempt to delete every tfcluster table on n9 (an owned table refuses it).
const DELETE_N9: &str = "for t in $(nsenter --net=/run/netns/tfc-n9 nft list tables | awk '/tfcluster_/ {print $3}'); do nsenter --net=/run/netns/tfc-n9 nft delete table inet $t; done";

#[rustfmt::skip]
const WHO_REACHES: &[Reach] = &[
    Reach { who: "another user on a node of the step",          user: OTHER, from: From::Node("n9"),   at: None,                   source: None,                   before: "",       isolated: "refused", open: "open" },
    Reach { who: "another user on a node outside the step",     user: OTHER, from: From::Node("n011"), at: None,                   source: None,                   before: "",       isolated: "refused", open: "open" },
    Reach { who: "the owner's other job on a node of the step", user: OWNER, from: From::Node("n10"),  at: None,                   source: None,                   before: "",       isolated: "open",    open: "open" },
    Reach { who: "the owner's other job outside the step",      user: OWNER, from: From::Node("n012"), at: None,                   source: None,                   before: "",       isolated: "refused", open: "open" },
    Reach { who: "another user on n10, to n9's second IPv4",    user: OTHER, from: From::Node("n10"),  at: Some(N9_SECOND_V4),     source: None,                   before: "",       isolated: "refused", open: "open" },
    Reach { who: "another user on n9, to its second IPv4",      user: OTHER, from: From::Node("n9"),   at: Some(N9_SECOND_V4),     source: None,                   before: "",       isolated: "refused", open: "open" },
    Reach { who: "another user on n10, to n9's IPv6",           user: OTHER, from: From::Node("n10"),  at: Some(N9_V6),            source: None,                   before: "",       isolated: "refused", open: "open" },
    Reach { who: "another user on n10, to n9's other network",  user: OTHER, from: From::Node("n10"),  at: Some(N9_OTHER_NETWORK), source: Some(N10_STEP_ADDRESS), before: "",       isolated: "refused", open: "open" },
    Reach { who: "another user in a NAT'd network on n10",      user: OTHER, from: From::NatBehindN10, at: None,                   source: None,                   before: "",       isolated: "refused", open: "open" },
    Reach { who: "another user outside, after a flush on n9",   user: OTHER, from: From::Node("n011"), at: None,                   source: None,                   before: FLUSH_N9, isolated: "refused", open: "open" },
    Reach { who: "another user outside, after a delete on n9",  user: OTHER, from: From::Node("n011"), at: None,                   source: None,                   before: DELETE_N9, isolated: "refused", open: "open" },
];

/// The other ways into n9 that a real cluster has, made for one test and removed after it: a
/// second IPv4 address on its step network; IPv6 on n9 and n10; another network on n9 (an
/// InfiniBand or management network) that n10 routes to through n9, with reverse-path filtering
/// off on n9 (the kernel's default); and a network namespace behind n10, forwarded and NAT'd to
/// n10's address (rootful Docker or Podman, libvirt, a CNI network).
struct OtherPaths;

const NAT_NETNS: &str = "tfc-nat";

impl OtherPaths {
    fn make() -> OtherPaths {
        let paths = OtherPaths;
        sh_ok(&format!(
            "set -e
ip -n tfc-n9 addr add {N9_SECOND_V4}/24 dev eth0
ip -n tfc-n9 addr add {N9_V6}/64 dev eth0 nodad
ip -n tfc-n10 addr add fd77::12/64 dev eth0 nodad
ip -n tfc-n9 link add ib0 type veth peer name ib0peer
ip -n tfc-n9 addr add {N9_OTHER_NETWORK}/24 dev ib0
ip -n tfc-n9 link set ib0 up
ip -n tfc-n9 link set ib0peer up
ip -n tfc-n10 route add {N9_OTHER_NETWORK}/32 via 10.77.0.11
nsenter --net=/run/netns/tfc-n9 sh -c 'for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done'
ip netns add {NAT_NETNS}
ip -n tfc-n10 link add nat0 type veth peer name eth0 netns {NAT_NETNS}
ip -n tfc-n10 addr add 10.79.0.1/24 dev nat0
ip -n tfc-n10 link set nat0 up
ip -n {NAT_NETNS} addr add 10.79.0.2/24 dev eth0
ip -n {NAT_NETNS} link set eth0 up
ip -n {NAT_NETNS} link set lo up
ip -n {NAT_NETNS} route add default via 10.79.0.1
nsenter --net=/run/netns/tfc-n10 sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
nsenter --net=/run/netns/tfc-n10 nft 'add table ip tfctest_nat; add chain ip tfctest_nat post {{ type nat hook postrouting priority 100; }}; add rule ip tfctest_nat post ip saddr 10.79.0.0/24 oif eth0 masquerade'"
        ));
        paths
    }
}

impl Drop for OtherPaths {
    fn drop(&mut self) {
        sh(&format!(
            "ip -n tfc-n9 addr del {N9_SECOND_V4}/24 dev eth0
ip -n tfc-n9 addr del {N9_V6}/64 dev eth0
ip -n tfc-n10 addr del fd77::12/64 dev eth0
ip -n tfc-n9 link del ib0
ip -n tfc-n10 route del {N9_OTHER_NETWORK}/32
ip -n tfc-n10 link del nat0
ip netns del {NAT_NETNS}
nsenter --net=/run/netns/tfc-n10 sh -c 'echo 0 > /proc/sys/net/ipv4/ip_forward; nft delete table ip tfctest_nat'"
        ));
    }
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn only_the_jobs_own_processes_on_its_nodes_reach_its_servers() {
    let probe = format!("/usr/bin/python3 {}", tool("isolation_probe.py"));
    let _paths = OtherPaths::make();
    for isolate in [true, false] {
        let _plugstack = isolate.then(|| PlugStack::isolated(""));
        let d = dir().join(format!("isolation-{isolate}"));
        let d = d.display();
        let attempts: String = WHO_REACHES
            .iter()
            .map(|r| {
                let (user, who) = (r.user, r.who);
                let args = [r.at, r.source]
                    .iter()
                    .flatten()
                    .fold(String::new(), |a, s| a + " " + s);
                let run = format!("{probe} probe {d} \"{who}\"{args}");
                let attempt = match r.from {
                    From::Node(node) => {
                        format!("runuser -u {user} -- srun -p shared -w {node} -N1 -n1 -t 1 {run}")
                    }
                    From::NatBehindN10 => {
                        format!("nsenter --net=/run/netns/{NAT_NETNS} runuser -u {user} -- {run}")
                    }
                };
                format!("{}\n{attempt}\n", r.before)
            })
            .collect();
        let out = sh(&format!(
            "{pgrep}rm -rf {d}; mkdir -m 1777 {d}
runuser -u {OWNER} -- srun -p shared -w n9,n10 -N2 -n4 -t 2 --tf-cluster {probe} serve {d} >{d}/step.out 2>{d}/step.err &
step=$!
for i in $(seq 600); do [ -e {d}/endpoints ] && break; kill -0 $step 2>/dev/null || break; sleep 0.1; done
{tables}
echo \"STEPD|$(for p in $(cluster_pgrep '^slurmstepd: \\[[0-9]+\\.0\\]'); do grep -c libnftables /proc/$p/maps; done | paste -sd,)\"
{attempts}{tables}
touch {d}/stop; wait $step; echo \"SRUN|$?\"
cat {d}/step.out; cat {d}/step.err >&2
for i in $(seq 100); do left=$({tables} | grep -vc '|0$'); [ \"$left\" = 0 ] && break; sleep 0.1; done
echo \"LEFT|$left\"; [ \"$left\" = 0 ] || {leftover}",
            tables = tables_script(),
            leftover = leftover_script(),
            pgrep = CLUSTER_PGREP,
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("isolate={isolate}:\n{stdout}\n{stderr}");
        assert_eq!(records(&stdout, "SRUN"), [["0"]], "{what}");
        // The step's own tasks reach each other: 4 tasks x 4 endpoints.
        let step = records(&stdout, "STEP");
        assert_eq!(step.len(), 16, "{what}");
        assert!(step.iter().all(|r| r[2] == "open"), "{what}");
        // The step's two slurmstepds fork their tasks without libnftables mapped (it is let go
        // once the table is in: docs/performance.md), isolated or not.
        assert_eq!(records(&stdout, "STEPD"), [["0,0"]], "{what}");
        // No task inherits the socket that owns its node's table (root's, to nftables).
        let netlink: Vec<&str> = records(&stdout, "NETLINK").iter().map(|r| r[1]).collect();
        assert_eq!(netlink, ["0"; 4], "{what}");
        for r in WHO_REACHES {
            let expected = if isolate { r.isolated } else { r.open };
            let got: Vec<&str> = records(&stdout, r.who).iter().map(|f| f[1]).collect();
            assert_eq!(got, [expected; 4], "{}: {what}", r.who);
        }
        // While the step runs its nodes hold one table each, the others none, before the
        // attempts and after them (a flushed ruleset included).
        let tables: Vec<String> = records(&stdout, "TABLES")
            .iter()
            .map(|r| r.join("|"))
            .collect();
        let held: Vec<String> = NODES
            .iter()
            .map(|n| format!("{n}|{}", u8::from(isolate && ["n9", "n10"].contains(n))))
            .collect();
        assert_eq!(tables, [held.clone(), held].concat(), "{what}");
        assert_eq!(records(&stdout, "LEFT"), [["0"]], "{what}: rules left");
    }
}

/// A shell loop that prints `NAMES|node|table,table,...` of tfcluster's tables on each step node.
/// A shell loop that prints `LEFTOVER|node|tables` with every table tfcluster left on each
/// node, so that a failed "rules left" check says which.
fn leftover_script() -> String {
    format!(
        "for n in {}; do echo \"LEFTOVER|$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | awk '/tfcluster_/ {{print $3}}' | sort | paste -sd,)\"; done",
        NODES.join(" ")
    )
}

fn table_names_script() -> String {
    "for n in n9 n10; do echo \"NAMES|$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | awk '/tfcluster_/ {print $3}' | sort | paste -sd,)\"; done".to_string()
}

/// A node whose tasks ended first (n9's, while n10's still serve): another user on n9 still
/// reaches none of n10's servers, which admit n9's address. n9 keeps a table for that until
/// the step has ended everywhere. Without isolate=yes n10's servers are open from n9. Once n9's
/// slurmstepd has exited, the job's extern step (`PrologFlags=Contain`) owns that table (so
/// root's `nft flush ruleset` on n9, as nftables.service runs it, leaves it), through an
/// admin's routine day on n9 ([`ADMIN_DAY`]), and removes it once slurmctld says the step has
/// ended. Without an extern step the table is owned by no process: after the flush n10's
/// servers are open from n9 until the step ends, and each node's slurmd log says so once; the
/// job's next step on the node removes the table once slurmctld says its step has ended, and
/// the job's epilog removes the last.
struct EndedFirst {
    isolate: bool,
    /// slurm.conf's `PrologFlags=Contain`: the job has an extern step on each node.
    contain: bool,
    /// What another user on n9 gets at each endpoint, and again after the flush.
    reached: [&'static str; 4],
    reached_after_flush: [&'static str; 4],
    /// n9's and n10's tables (`J` the job id) while n10 still serves, after the step, after the
    /// job's next step.
    serving: Tables,
    after: Tables,
    next: Tables,
    /// How often n9's and n10's slurmd logs say nothing holds the table (each node says it
    /// once, until it reboots: the test removes its marker first).
    said: [usize; 2],
    /// What another user on n9 reaches after each of [`ADMIN_DAY`] on n9, each followed by
    /// root's flush of n9's ruleset (`None`: not done).
    admin_day: Option<[&'static str; 4]>,
    /// A plugin listed `required` before tfcluster fails its exit hook in the extern step
    /// (tests/cluster/failing_exit.c): Slurm then skips tfcluster's and unloads it.
    exit_fails: bool,
    /// How often n9's and n10's slurmd logs say a holder was stopped as the plugin unloaded:
    /// once per job's extern step on the node (the owner's job, and on n9 also the other
    /// user's two probe jobs).
    unloaded: [usize; 2],
}

type Tables = [&'static str; 2];

/// What an admin routinely does to a node while jobs run, as a script on the test cluster
/// (`{cluster}`: tests/cluster/cluster.sh, `{unit}`: how the release's slurmd.service starts
/// slurmd, `{pid}`: the pid file n9's slurmd writes, `{plugin}`: the plugin's file,
/// `{nftables_conf}`: Debian's /etc/nftables.conf): slurmd restarted as its unit starts it
/// (its munged kept: the extern step outlives slurmd, and keeps its munged, on a real node),
/// reconfigured and signalled (from 23.11, under `--systemd`, each starts a new slurmd process
/// and the old one exits), the plugin's file replaced as a package upgrade does (a new file
/// renamed over the old one), and nftables.service restarted (`nft -f` of a file that starts
/// with `flush ruleset`).
const ADMIN_DAY: &[(&str, &str)] = &[
    (
        "slurmd restarted as its unit starts it",
        "{cluster} restart-slurmd --busy --keep-munge --options '{unit}' n9 >&2",
    ),
    ("scontrol reconfigure", "{cluster} reconfigure >&2"),
    ("SIGHUP to slurmd", "kill -HUP $(cat {pid})"),
    (
        "the plugin upgraded",
        "cp {plugin} {plugin}.new && mv -f {plugin}.new {plugin}",
    ),
    (
        "nftables.service restarted",
        "nsenter --net=/run/netns/tfc-n9 nft -f {nftables_conf}",
    ),
];

/// Debian's /etc/nftables.conf as the nftables package installs it: what nftables.service
/// loads at start, restart and reload.
const NFTABLES_CONF: &str = "#!/usr/sbin/nft -f

flush ruleset

table inet filter {
\tchain input {
\t\ttype filter hook input priority filter;
\t}
\tchain forward {
\t\ttype filter hook forward priority filter;
\t}
\tchain output {
\t\ttype filter hook output priority filter;
\t}
}
";

#[rustfmt::skip]
const ENDED_FIRST: &[EndedFirst] = &[
    EndedFirst { isolate: true,  contain: false, reached: ["refused", "refused", "refused", "refused"],
                 reached_after_flush: ["refused", "refused", "open", "open"],
                 serving: ["J_0_ended", "J_0"], after: ["", "J_0_ended"], next: ["J_1_ended", "J_1_ended"], said: [1, 1],
                 admin_day: None, exit_fails: false, unloaded: [0, 0] },
    EndedFirst { isolate: false, contain: false, reached: ["refused", "refused", "open", "open"],
                 reached_after_flush: ["refused", "refused", "open", "open"],
                 serving: ["", ""], after: ["", ""], next: ["", ""], said: [0, 0],
                 admin_day: None, exit_fails: false, unloaded: [0, 0] },
    EndedFirst { isolate: true,  contain: true,  reached: ["refused", "refused", "refused", "refused"],
                 reached_after_flush: ["refused", "refused", "refused", "refused"],
                 serving: ["J_0_ended", "J_0"], after: ["", ""], next: ["", ""], said: [0, 0],
                 admin_day: Some(["refused", "refused", "refused", "refused"]), exit_fails: false, unloaded: [0, 0] },
    EndedFirst { isolate: true,  contain: true,  reached: ["refused", "refused", "refused", "refused"],
                 reached_after_flush: ["refused", "refused", "refused", "refused"],
                 serving: ["J_0_ended", "J_0"], after: ["", ""], next: ["", ""], said: [0, 0],
                 admin_day: None, exit_fails: true, unloaded: [3, 1] },
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_node_whose_tasks_ended_first_keeps_other_users_away() {
    let probe = format!("/usr/bin/python3 {}", tool("isolation_probe.py"));
    let cluster = cluster_sh();
    // The release's own unit, where its root has one (Debian's packages; SchedMD's sources
    // ship the same line in etc/slurmd.service.in), starts slurmd as the table says.
    let unit =
        sh("cat /usr/lib/systemd/system/slurmd.service || cat /lib/systemd/system/slurmd.service");
    let unit = String::from_utf8_lossy(&unit.stdout);
    if !unit.is_empty() {
        let start = format!("slurmd {} $SLURMD_OPTIONS", release::current().slurmd_unit);
        assert!(unit.contains(&start), "slurmd.service: {unit}");
    }
    let mut _contained = None;
    for EndedFirst {
        isolate,
        contain,
        reached,
        reached_after_flush,
        serving,
        after,
        next,
        said,
        admin_day,
        exit_fails,
        unloaded,
    } in ENDED_FIRST
    {
        let _plugstack = match (isolate, exit_fails) {
            (true, true) => Some(PlugStack::isolated_after(&failing_exit_plugin())),
            (true, false) => Some(PlugStack::isolated("")),
            (false, _) => None,
        };
        if *contain && _contained.is_none() {
            sh_ok(&format!("{cluster} prolog-flags Contain"));
            _contained = Some(Uncontained(cluster.clone()));
        }
        let logs = ["n9", "n10"].map(|n| dir().join(format!("log/slurmd-{n}.log")));
        let sizes = logs
            .each_ref()
            .map(|l| std::fs::metadata(l).map_or(0, |m| m.len()));
        sh_ok(&format!(
            "rm -f {}/{TOLD_FILE} {}/{TOLD_FILE}",
            node_dir("n9"),
            node_dir("n10")
        ));
        let d = dir().join(format!("ended-first-{isolate}-{contain}"));
        let d = d.display();
        let stepds = |step: u32, left: u32| {
            format!("{CLUSTER_PGREP}for i in $(seq 100); do [ $(cluster_pgrep \"^slurmstepd: \\[$job\\.{step}\\]\" | wc -l) -le {left} ] && break; sleep 0.1; done")
        };
        let out = sh(&format!(
            "rm -rf {d}; mkdir -m 1777 {d}
job=$(runuser -u {OWNER} -- salloc --no-shell -p shared -w n9,n10 -N2 --ntasks-per-node=2 -t 3 2>&1 | sed -n 's/.*Granted job allocation \\([0-9]*\\).*/\\1/p')
echo \"JOB|$job\"
runuser -u {OWNER} -- srun --jobid=$job -N2 --ntasks-per-node=2 -t 2 --tf-cluster {probe} serve {d} >{d}/step.out 2>{d}/step.err &
step=$!
for i in $(seq 600); do [ -e {d}/endpoints ] && break; kill -0 $step 2>/dev/null || break; sleep 0.1; done
touch {d}/stop.n9
{n9_gone}
{names}
runuser -u {OTHER} -- srun -p shared -w n9 -N1 -n1 -t 1 {probe} probe {d} ENDED
nsenter --net=/run/netns/tfc-n9 nft flush ruleset
runuser -u {OTHER} -- srun -p shared -w n9 -N1 -n1 -t 1 {probe} probe {d} FLUSHED
{restart}
touch {d}/stop; wait $step; echo \"SRUN|$?\"
{all_gone}
{settled_after}
{names}
runuser -u {OWNER} -- srun --jobid=$job -N2 -n2 -t 1 --tf-cluster true; echo \"NEXT|$?\"
{next_gone}
{settled_next}
{names}
scancel $job
for i in $(seq 100); do left=$({tables} | grep -vc '|0$'); [ \"$left\" = 0 ] && break; sleep 0.1; done
echo \"LEFT|$left\"; [ \"$left\" = 0 ] || {leftover}
cat {d}/step.err >&2
grep -h 'isolate=yes' {n9_log} >&2",
            n9_gone = stepds(0, 1),
            // What n9's holder said, for a failure's message.
            n9_log = logs[0].display(),
            all_gone = stepds(0, 0),
            next_gone = stepds(1, 0),
            names = table_names_script(),
            restart = match admin_day {
                Some(_) => admin_day_script(&cluster, &probe, &d.to_string()),
                None => String::new(),
            },
            tables = tables_script(),
            leftover = leftover_script(),
            // The extern step's holder asks slurmctld once a second whether a held table's step
            // has ended.
            settled_after = match *isolate && *contain {
                true => until_no_table("_ended"),
                false => String::new(),
            },
            settled_next = match *isolate && *contain {
                true => until_no_table("_ended"),
                false => String::new(),
            },
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("isolate={isolate} contain={contain}:\n{stdout}\n{stderr}");
        let job = records(&stdout, "JOB")[0][0].to_string();
        assert!(!job.is_empty(), "{what}");
        let got: Vec<&str> = records(&stdout, "ENDED").iter().map(|r| r[1]).collect();
        assert_eq!(got, reached, "{what}");
        let got: Vec<&str> = records(&stdout, "FLUSHED").iter().map(|r| r[1]).collect();
        assert_eq!(got, reached_after_flush, "{what}");
        for (k, (action, _)) in ADMIN_DAY.iter().enumerate() {
            let got: Vec<&str> = records(&stdout, &format!("ADMIN{k}"))
                .iter()
                .map(|r| r[1])
                .collect();
            let expected = admin_day.map_or(vec![], |r| r.to_vec());
            assert_eq!(got, expected, "after {action} and a flush: {what}");
        }
        assert_eq!(records(&stdout, "SRUN"), [["0"]], "{what}");
        assert_eq!(records(&stdout, "NEXT"), [["0"]], "{what}");
        let names: Vec<String> = records(&stdout, "NAMES")
            .iter()
            .map(|r| r.join("|"))
            .collect();
        let expected: Vec<String> = [serving, after, next]
            .iter()
            .flat_map(|tables| {
                ["n9", "n10"]
                    .iter()
                    .zip(tables.iter())
                    .map(|(n, t)| match t.is_empty() {
                        true => format!("{n}|"),
                        false => format!("{n}|tfcluster_{}", t.replace('J', &job)),
                    })
            })
            .collect();
        assert_eq!(names, expected, "{what}");
        assert_eq!(records(&stdout, "LEFT"), [["0"]], "{what}: rules left");
        let line = no_holder_line(job.parse().unwrap(), 0);
        // What each node's slurmd logged since the row began. The job's end (scancel) is
        // logged as slurmd gets to it: with the machine busy, a line came after the tables had
        // gone (2026-11-28, 23.11), so the logs are read until they say all (10 s at most).
        let told = |line: &str| {
            [0, 1].map(|i| {
                let log = std::fs::read(&logs[i]).unwrap_or_default();
                let new = log.get(sizes[i] as usize..).unwrap_or_default();
                String::from_utf8_lossy(new).matches(line).count()
            })
        };
        let started = std::time::Instant::now();
        while (told(&line) != *said || told(UNLOADED_LINE) != *unloaded)
            && started.elapsed().as_secs() < 10
        {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert_eq!(told(&line), *said, "{what}: slurmd's logs say: {line}");
        assert_eq!(
            told(UNLOADED_LINE),
            *unloaded,
            "{what}: slurmd's logs say: {UNLOADED_LINE}"
        );
    }
}

/// tests/cluster/failing_exit.c, built for the release under test from tfcluster's header, in
/// the cluster's folder (which every node sees): its path.
fn failing_exit_plugin() -> String {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let so = dir().join("failing_exit.so");
    let (major, minor) = release::current().version.split_once('.').unwrap();
    let version = (major.parse::<u32>().unwrap() << 16) | (minor.parse::<u32>().unwrap() << 8);
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-I"])
        .arg(repo.join("spank-headers"))
        .arg(format!("-DPLUGIN_VERSION={version}"))
        .arg("-o")
        .arg(&so)
        .arg(repo.join("tests/cluster/failing_exit.c"))
        .status()
        .unwrap();
    assert!(built.success(), "cc tests/cluster/failing_exit.c");
    so.display().to_string()
}

/// Each of [`ADMIN_DAY`] on n9, then root's flush of n9's ruleset, then another user's probe
/// from n9 (`ADMIN<k>` lines), tried again while n9's slurmd is not yet back to launch it.
fn admin_day_script(cluster: &str, probe: &str, d: &str) -> String {
    let pid = dir().join("slurmd-n9.pid");
    let plugin = std::env::var("TFC_PLUGIN").expect("TFC_PLUGIN: the plugin the cluster loads");
    let nftables_conf = dir().join("nftables.conf").display().to_string();
    std::fs::write(&nftables_conf, NFTABLES_CONF).unwrap();
    ADMIN_DAY
        .iter()
        .enumerate()
        .map(|(k, (_, action))| {
            let action = action
                .replace("{cluster}", cluster)
                .replace("{unit}", release::current().slurmd_unit)
                .replace("{pid}", &pid.display().to_string())
                .replace("{plugin}", &plugin)
                .replace("{nftables_conf}", &nftables_conf);
            format!(
                "{action}
nsenter --net=/run/netns/tfc-n9 nft flush ruleset
for i in $(seq 60); do runuser -u {OTHER} -- srun -p shared -w n9 -N1 -n1 -t 1 {probe} probe {d} ADMIN{k} >{d}/admin.out 2>{d}/admin.err && break; sleep 0.5; done
cat {d}/admin.out; cat {d}/admin.err >&2
"
            )
        })
        .collect()
}

/// Waits (5 s at most) until no table of n9 or n10 matches `pattern` (grep's, in the shell's
/// double quotes).
fn until_no_table(pattern: &str) -> String {
    format!(
        "for i in $(seq 50); do nsenter --net=/run/netns/tfc-n9 nft list tables | grep -q \"{pattern}\" || nsenter --net=/run/netns/tfc-n10 nft list tables | grep -q \"{pattern}\" || break; sleep 0.1; done"
    )
}

/// Puts slurm.conf's PrologFlags back (none), also when a row fails.
struct Uncontained(String);

impl Drop for Uncontained {
    fn drop(&mut self) {
        sh(&format!("{} prolog-flags ''", self.0));
    }
}

/// Another user who binds a step port on n9 after the node's check and before the owner's
/// server does (TensorFlow's import takes seconds; here the owner's task never binds it), while
/// the owner's task on n10 connects to that endpoint and sends "secret": what the owner's task
/// gets and what the other user's program receives. Also when n9's task has exited before the
/// other user binds its port: n9's table for after its tasks ended still lets no answer of
/// another user out of n9's own ports.
struct Squat {
    isolate: bool,
    /// n9's task exits first (n9's tasks have all ended while n10's runs), and the other user
    /// binds the port after that.
    n9_ended: bool,
    /// Run as root once the owner's step has started (a node that answers this way from the
    /// start refuses an isolated step: `CANNOT_ISOLATE`): n9 answering every connection
    /// attempt with a SYN cookie (as a listener whose queue is full does), which the kernel
    /// sends with no socket, so no uid.
    once_started: &'static str,
    owner_gets: &'static str,
    squatter_receives: &'static str,
}

const COOKIES_ON_N9: &str =
    "nsenter --net=/run/netns/tfc-n9 sh -c 'echo 2 > /proc/sys/net/ipv4/tcp_syncookies'";
const COOKIES_OFF_N9: &str =
    "nsenter --net=/run/netns/tfc-n9 sh -c 'echo 1 > /proc/sys/net/ipv4/tcp_syncookies'";

#[rustfmt::skip]
const SQUATS: &[Squat] = &[
    Squat { isolate: true,  n9_ended: false, once_started: "",            owner_gets: "timeout", squatter_receives: "nothing" },
    Squat { isolate: true,  n9_ended: false, once_started: COOKIES_ON_N9, owner_gets: "timeout", squatter_receives: "nothing" },
    Squat { isolate: true,  n9_ended: true,  once_started: "",            owner_gets: "timeout", squatter_receives: "nothing" },
    Squat { isolate: false, n9_ended: false, once_started: "",            owner_gets: "open",    squatter_receives: "secret" },
    Squat { isolate: false, n9_ended: false, once_started: COOKIES_ON_N9, owner_gets: "open",    squatter_receives: "secret" },
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_port_taken_before_the_owners_server_binds_it_serves_no_one() {
    let probe = format!("/usr/bin/python3 {}", tool("isolation_probe.py"));
    for (i, case) in SQUATS.iter().enumerate() {
        let _plugstack = case.isolate.then(|| PlugStack::isolated(""));
        let d = dir().join(format!("squat-{i}"));
        let d = d.display();
        let out = sh(&format!(
            "rm -rf {d}; mkdir -m 1777 {d}
runuser -u {OWNER} -- srun -p shared -w n9,n10 -N2 -n2 -t 1 --tf-cluster {probe} victim {d} {leave} >{d}/step.out 2>{d}/step.err &
step=$!
for i in $(seq 600); do [ -e {d}/endpoints ] && break; kill -0 $step 2>/dev/null || break; sleep 0.1; done
{once_started}
{n9_gone}
runuser -u {OTHER} -- srun -p shared -w n9 -N1 -n1 -t 1 {probe} squat {d}
wait $step; echo \"SRUN|$?\"
{COOKIES_OFF_N9}
cat {d}/step.out; cat {d}/step.err >&2",
            once_started = case.once_started,
            leave = if case.n9_ended { "leave" } else { "" },
            n9_gone = if case.n9_ended {
                format!("{CLUSTER_PGREP}for i in $(seq 100); do [ $(cluster_pgrep \"^slurmstepd: \\[$(squeue -h -u {OWNER} -o %i | head -1)\\.0\\]\" | wc -l) -le 1 ] && break; sleep 0.1; done")
            } else {
                String::new()
            },
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("case {i}:\n{stdout}\n{stderr}");
        assert_eq!(records(&stdout, "SRUN"), [["0"]], "{what}");
        assert_eq!(records(&stdout, "VICTIM"), [[case.owner_gets]], "{what}");
        assert_eq!(
            records(&stdout, "SQUAT"),
            [[case.squatter_receives]],
            "{what}"
        );
    }
}

/// Another user's program on a worker's node: connects to the address in the file `argv[1]`
/// again and again for 4 s, holding each connection 2 s (two of the watcher's looks); prints
/// `CONNECT|open` if one got through, else `CONNECT|refused`.
const CONNECT_AGAIN: &str = r#"import socket, sys, time
host, port = open(sys.argv[1]).read().rsplit(":", 1)
got, end = "refused", time.time() + 4
while time.time() < end:
    try:
        c = socket.create_connection((host, int(port)), timeout=1)
        got = "open"
        time.sleep(2)
        c.close()
    except OSError:
        time.sleep(0.2)
print("CONNECT|" + got)"#;

/// From the attacker's side, `fail_fast=auto`'s watcher cannot be made to keep a step running
/// where isolate=yes keeps other users out: another user's connections to a worker's server,
/// from the worker's own node while it listens (6 s), are refused, so the worker's failure,
/// which no task of the step ever reached, still ends the step at once. Without isolate=yes
/// the same connections reach the server, and the watcher, which sees only the server's side of
/// them (the job's uid), counts them: the step goes on until its other tasks end (the user
/// guide's limit). (isolate, what the other user's connections get, whether the worker's
/// failure ends the step)
#[rustfmt::skip]
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn another_users_connection_to_a_worker_keeps_no_isolated_step_running() {
    let rows: &[(bool, &str, bool)] = &[
        (true,  "refused", true),
        (false, "open",    false),
    ];
    for &(isolate, gets, ends) in rows {
        let _plugstack = isolate.then(|| PlugStack::isolated(""));
        let d = dir().join(format!("watcher-{isolate}"));
        let d = d.display();
        let started = std::time::Instant::now();
        let out = sh(&format!(
            "rm -rf {d}; mkdir -m 1777 {d}
runuser -u {OWNER} -- srun -p shared -w n9,n10 -N2 -n4 --ntasks-per-node=2 -t 2 --tf-cluster='chief:1,ps:1,worker:*' {ending} 'worker:1=listen 6 3 {d}/worker' 'default=sleep 20' >{d}/step.out 2>{d}/step.err &
step=$!
for i in $(seq 300); do [ -e {d}/worker ] && break; sleep 0.1; done
runuser -u {OTHER} -- srun -p shared -w n10 -N1 -n1 -t 1 python3 -c '{CONNECT_AGAIN}' {d}/worker
wait $step; echo \"SRUN|$?\"
cat {d}/step.err >&2",
            ending = tool("ending.sh"),
        ));
        let seconds = started.elapsed().as_secs();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let what = format!("isolate={isolate}, {seconds} s:\n{stdout}\n{stderr}");
        assert_eq!(records(&stdout, "CONNECT"), [[gets]], "{what}");
        assert_eq!(records(&stdout, "SRUN").len(), 1, "{what}");
        assert_ne!(records(&stdout, "SRUN"), [["0"]], "the worker's failure: {what}");
        // The worker fails 6 s after it starts listening; the other tasks would sleep 20.
        assert_eq!(seconds < 17, ends, "{what}");
    }
}

/// A heterogeneous job's components (one on a CPU-only node, one on a GPU node) reach each
/// other's servers with isolate=yes, another user reaches none, each component's node holds
/// one table while the step runs, and none is left after it.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_heterogeneous_jobs_components_reach_each_other_and_no_one_else() {
    let probe = format!("/usr/bin/python3 {}", tool("isolation_probe.py"));
    let _plugstack = PlugStack::isolated("");
    let d = dir().join("isolation-het");
    let d = d.display();
    let tables = "for n in cpu1 n9 n10; do echo \"TABLES|$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | grep -c tfcluster_)\"; done";
    let out = sh(&format!(
        "rm -rf {d}; mkdir -m 1777 {d}
runuser -u {OWNER} -- srun -p cpu -w cpu1 -n2 -t 2 --tf-cluster {probe} serve {d} : -p gpu -w n9 -n2 {probe} serve {d} >{d}/step.out 2>{d}/step.err &
step=$!
for i in $(seq 600); do [ -e {d}/endpoints ] && break; kill -0 $step 2>/dev/null || break; sleep 0.1; done
{tables}
runuser -u {OTHER} -- srun -p gpu -w n10 -N1 -n1 -t 1 {probe} probe {d} other
touch {d}/stop; wait $step; echo \"SRUN|$?\"
cat {d}/step.out; cat {d}/step.err >&2
for i in $(seq 100); do left=$({tables} | grep -vc '|0$'); [ \"$left\" = 0 ] && break; sleep 0.1; done
echo \"LEFT|$left\"; [ \"$left\" = 0 ] || {leftover}",
        leftover = leftover_script(),
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let what = format!("{stdout}\n{stderr}");
    assert_eq!(records(&stdout, "SRUN"), [["0"]], "{what}");
    let step = records(&stdout, "STEP");
    assert_eq!(step.len(), 16, "4 tasks x 4 endpoints: {what}");
    assert!(step.iter().all(|r| r[2] == "open"), "{what}");
    let other: Vec<&str> = records(&stdout, "other").iter().map(|r| r[1]).collect();
    assert_eq!(other, ["refused"; 4], "{what}");
    let during: Vec<String> = records(&stdout, "TABLES")
        .iter()
        .map(|r| r.join("|"))
        .collect();
    assert_eq!(during, ["cpu1|1", "n9|1", "n10|0"], "{what}");
    assert_eq!(records(&stdout, "LEFT"), [["0"]], "{what}: rules left");
}

/// A connection attempt whose sender has no uid the kernel can read (a kernel-internal socket's
/// SYN, as `AF_SMC` sends before it falls back to TCP; here made by root on n9 with nftables'
/// `dup`, which sends a copy of the owner's SYN with no socket at all) to n10's step port: how
/// many of the two SYNs (the owner's and its copy) reach n10 (a counter in n10's input). The
/// rules fail closed: the owner's arrives, its copy without an owner does not. With the rule
/// that refused `meta skuid != UID` instead, the copy matched neither `==` nor `!=` and went
/// out too.
struct NoOwner {
    isolate: bool,
    arrived: u32,
}

#[rustfmt::skip]
const NO_OWNER: &[NoOwner] = &[
    NoOwner { isolate: false, arrived: 2 },
    NoOwner { isolate: true,  arrived: 1 },
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_packet_whose_sender_has_no_uid_is_refused() {
    let probe = format!("/usr/bin/python3 {}", tool("isolation_probe.py"));
    for NoOwner { isolate, arrived } in NO_OWNER {
        let _plugstack = isolate.then(|| PlugStack::isolated(""));
        let d = dir().join(format!("no-owner-{isolate}"));
        let d = d.display();
        let out = sh(&format!(
            "rm -rf {d}; mkdir -m 1777 {d}
runuser -u {OWNER} -- srun -p shared -w n9,n10 -N2 -n2 -t 1 --tf-cluster {probe} serve {d} >{d}/step.out 2>{d}/step.err &
step=$!
for i in $(seq 600); do [ -e {d}/endpoints ] && break; kill -0 $step 2>/dev/null || break; sleep 0.1; done
port=$(sed -n 2p {d}/endpoints | sed 's/.*://')
n9=$(getent hosts n9 | awk '{{print $1}}'); n10=$(getent hosts n10 | awk '{{print $1}}')
nsenter --net=/run/netns/tfc-n10 nft \"add table ip tfctest_count; add chain ip tfctest_count in {{ type filter hook input priority -10; }}; add rule ip tfctest_count in ip saddr $n9 tcp dport $port tcp flags & (syn | ack) == syn counter\"
nsenter --net=/run/netns/tfc-n9 nft \"add table ip tfctest_dup; add chain ip tfctest_dup out {{ type filter hook output priority -10; }}; add rule ip tfctest_dup out ip daddr $n10 tcp dport $port tcp flags & (syn | ack) == syn dup to $n10\"
nsenter --net=/run/netns/tfc-n9 runuser -u {OWNER} -- timeout 3 bash -c \"exec 3<>/dev/tcp/$n10/$port\" 2>/dev/null
count() {{ nsenter --net=/run/netns/tfc-n10 nft list chain ip tfctest_count in | sed -n 's/.*counter packets \\([0-9]*\\).*/\\1/p'; }}
# Until the packets expected have arrived; then 0.3 s more, for one that should not.
for i in $(seq 30); do [ \"$(count)\" -ge {arrived} ] && break; sleep 0.1; done
sleep 0.3
echo \"ARRIVED|$(count)\"
nsenter --net=/run/netns/tfc-n9 nft delete table ip tfctest_dup
nsenter --net=/run/netns/tfc-n10 nft delete table ip tfctest_count
touch {d}/stop; wait $step; echo \"SRUN|$?\"
cat {d}/step.err >&2"
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("isolate {isolate}:\n{stdout}\n{stderr}");
        assert_eq!(
            records(&stdout, "ARRIVED"),
            [[arrived.to_string()]],
            "{what}"
        );
        assert_eq!(records(&stdout, "SRUN"), [["0"]], "{what}");
    }
}

/// `net.ipv4.tcp_syncookies` in some nodes' network namespaces, back to 1 when dropped.
struct SynCookies(Vec<&'static str>);

impl SynCookies {
    fn set(nodes: &[&'static str], value: u8) -> SynCookies {
        let changed = if value == 1 { vec![] } else { nodes.to_vec() };
        for node in &changed {
            sh_ok(&syncookies(node, value));
        }
        SynCookies(changed)
    }
}

impl Drop for SynCookies {
    fn drop(&mut self) {
        for node in &self.0 {
            sh_ok(&syncookies(node, 1));
        }
    }
}

fn syncookies(node: &str, value: u8) -> String {
    format!("nsenter --net=/run/netns/tfc-{node} sh -c 'echo {value} > {SYNCOOKIES}'")
}

/// `from` bound over `path` in one node's slurmd's mount namespace (which its slurmstepds
/// inherit), until dropped.
struct HiddenOn(String);

impl HiddenOn {
    fn node(name: &str, from: &str, path: &str) -> HiddenOn {
        let pid = std::fs::read_to_string(dir().join(format!("slurmd-{name}.run.pid"))).unwrap();
        let ns = format!("nsenter --mount --target {}", pid.trim());
        sh_ok(&format!("{ns} mount --bind {from} {path}"));
        // A slurmstepd of the step just run may still map the file for a moment ("target is
        // busy", seen on 25.11): tries for 5 s, then detaches it (lazily), so that no later
        // suite runs with it.
        HiddenOn(format!(
            "for i in $(seq 50); do {ns} umount {path} 2>/dev/null && exit 0; sleep 0.1; done; {ns} umount -l {path}"
        ))
    }
}

impl Drop for HiddenOn {
    fn drop(&mut self) {
        sh_ok(&self.0);
    }
}

/// Where the root's libnftables is.
fn libnftables() -> String {
    let path = sh_ok(&format!(
        "ldconfig -p | awk '$1 == \"{LIBRARY}\" {{print $NF; exit}}'"
    ));
    let path = path.trim().to_string();
    assert!(!path.is_empty(), "{LIBRARY} is not installed in this root");
    path
}

/// Hides the nodes' libnftables from one node's slurmd alone (its mount namespace, which its
/// slurmstepds inherit), until dropped.
fn no_libnftables_on(name: &str) -> HiddenOn {
    HiddenOn::node(name, "/dev/null", &libnftables())
}

/// What is made wrong on the test cluster for one row of the check.
#[derive(Debug, Clone, Copy)]
enum Wrong {
    Nothing,
    /// `tcp_syncookies=2` in the node's network namespace.
    SynCookiesAlways(&'static str),
    /// libnftables hidden from the node's slurmd (and its slurmstepds).
    NoLibnftables(&'static str),
    /// The plugin's file replaced (by rename, as a package upgrade does) and slurmd not
    /// restarted: every slurmd runs the replaced file.
    PluginReplaced,
    /// A file of another user under /run/tfcluster (shared by the test cluster's nodes).
    ForeignFile,
    /// tfcluster not loaded on the node: its plugstack.conf empty, as a node the enable step
    /// missed (hidden from its slurmd's mount namespace, which its slurmstepds inherit).
    NotLoaded(&'static str),
    /// The node's plugin file built for another Slurm release, which slurmstepd refuses to load
    /// and `optional` skips: a node upgraded to another release, the plugin not rebuilt.
    OtherRelease(&'static str),
    /// The node's plugstack.conf line sets one more setting than srun's host's
    /// (`fail_fast=yes`): a node the last edit missed.
    OtherLine(&'static str),
}

/// A row of the check: what is wrong, what each node's line then says, whether srun fails.
struct CheckRow<'a> {
    wrong: Wrong,
    /// `(node, what its line says)`; a node named here says `NOT OK` when the row fails, and
    /// every other node's line ends `| ok`.
    says: &'a [(&'a str, &'a str)],
    fails: bool,
}

/// Undoes a [`Wrong`] when dropped.
enum Undo {
    Nothing,
    SynCookies(#[allow(dead_code)] SynCookies),
    Hidden(#[allow(dead_code)] HiddenOn),
    /// The plugin's original file, kept by a hard link, renamed back.
    Plugin(String),
    File(String),
}

impl Wrong {
    fn make(self) -> Undo {
        match self {
            Wrong::Nothing => Undo::Nothing,
            Wrong::SynCookiesAlways(node) => Undo::SynCookies(SynCookies::set(&[node], 2)),
            Wrong::NoLibnftables(node) => Undo::Hidden(no_libnftables_on(node)),
            Wrong::PluginReplaced => {
                let p = common::cluster::plugin();
                sh_ok(&format!(
                    "ln -f {p} {p}.kept && cp {p} {p}.new && mv {p}.new {p}"
                ));
                Undo::Plugin(p)
            }
            Wrong::NotLoaded(node) => Undo::Hidden(HiddenOn::node(
                node,
                "/dev/null",
                &dir().join("etc/plugstack.conf").display().to_string(),
            )),
            Wrong::OtherLine(node) => {
                let conf = dir().join("etc/plugstack.conf");
                let other = dir().join("plugstack-other-line.conf");
                let line = std::fs::read_to_string(&conf).unwrap();
                std::fs::write(&other, format!("{} fail_fast=yes\n", line.trim_end())).unwrap();
                Undo::Hidden(HiddenOn::node(
                    node,
                    &other.display().to_string(),
                    &conf.display().to_string(),
                ))
            }
            Wrong::OtherRelease(node) => {
                let (other, _) = common::release::built_for_another_release();
                Undo::Hidden(HiddenOn::node(
                    node,
                    &other.display().to_string(),
                    &common::cluster::plugin(),
                ))
            }
            Wrong::ForeignFile => {
                let f = format!("{}/check-foreign", tfcluster::core::run_dir::RUN_DIR);
                sh_ok(&format!(
                    "mkdir -p $(dirname {f}) && touch {f} && chown {OTHER} {f}"
                ));
                Undo::File(f)
            }
        }
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        match self {
            Undo::Plugin(p) => drop(sh_ok(&format!("mv {p}.kept {p}"))),
            Undo::File(f) => drop(sh_ok(&format!("rm -f {f}"))),
            _ => {}
        }
    }
}

/// `srun --tf-cluster=check printenv TFCLUSTER_CHECKED` on n9 and n10 under the packaged line
/// (`optional`, isolate=yes): one line per node, `| ok` where all is well, and srun fails when a
/// node would refuse a step or run one unprotected, with that node's line naming why, or when
/// tfcluster is not loaded on a node (no line from it; Slurm names it: its task exited 1). One
/// row per way a node is made wrong; the test cluster has no `PrologFlags=Contain`, so ended
/// tables are held by no process, which every line warns of.
/// Both slurmd are restarted first: earlier tests replace the plugin's file or take it out of
/// plugstack.conf, and a slurmd that has not been restarted since is what the check names.
#[rustfmt::skip]
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn the_check_names_what_is_wrong_with_each_node() {
    let _plugstack = PlugStack::isolated_as("optional", "");
    sh_ok(&format!("{} restart-slurmd n9 n10 >&2", cluster_sh()));
    let syncookies = Error::SynCookiesAlways.to_string();
    let syncookies = syncookies.as_str();
    let rows = [
        CheckRow { wrong: Wrong::Nothing,
                   says: &[("n9", "srun: the same | slurmd: this file | plugstack.conf: the same line as srun's host | steps using tfcluster: none | isolate=yes: works; WARNING: no PrologFlags=Contain")], fails: false },
        CheckRow { wrong: Wrong::OtherLine("n10"),         says: &[("n10", "line differs from srun's host's: fail_fast (srun's host: unset, here: yes)")], fails: true },
        CheckRow { wrong: Wrong::SynCookiesAlways("n9"),  says: &[("n9", syncookies)], fails: true },
        CheckRow { wrong: Wrong::NoLibnftables("n10"),    says: &[("n10", LIBRARY)], fails: true },
        CheckRow { wrong: Wrong::PluginReplaced,          says: &[("n9", "NOT OK: slurmd runs another copy: restart slurmd"),
                                                                  ("n10", "NOT OK: slurmd runs another copy: restart slurmd")], fails: true },
        CheckRow { wrong: Wrong::ForeignFile,             says: &[("n9", "check-foreign belongs to uid"), ("n10", "check-foreign belongs to uid")], fails: true },
        CheckRow { wrong: Wrong::NotLoaded("n10"),        says: &[], fails: true },
        CheckRow { wrong: Wrong::OtherRelease("n10"),     says: &[], fails: true },
    ];
    for row in rows {
        let undo = row.wrong.make();
        let out = sh("srun -p shared -w n9,n10 -N2 --ntasks-per-node=1 -t 1 --tf-cluster=check printenv TFCLUSTER_CHECKED");
        drop(undo);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let what = format!("{:?}: srun {:?}\n{stdout}\n{stderr}", row.wrong, out.status.code());
        assert_eq!(!out.status.success(), row.fails, "{what}");
        let unloaded = match row.wrong {
            Wrong::NotLoaded(node) | Wrong::OtherRelease(node) => Some(node),
            _ => None,
        };
        if let Some(node) = unloaded {
            // Whatever that node's slurmd loaded from the hidden files meanwhile (its job
            // epilog), the suites after this one get a slurmd started as installed.
            sh_ok(&format!("{} restart-slurmd {node} >&2", cluster_sh()));
        }
        // Each node that answered prints its name; Slurm names the one that did not.
        let answered: Vec<&str> = ["n9", "n10"].into_iter().filter(|n| Some(*n) != unloaded).collect();
        let mut printed: Vec<&str> = stdout.lines().collect();
        printed.sort_unstable_by_key(|n| n.len());
        if !row.fails || unloaded.is_some() {
            assert_eq!(printed, answered, "{what}");
        }
        if let Some(node) = unloaded {
            assert!(stderr.contains(&format!("{node}: task 1: Exited with exit code 1")), "{what}");
            assert!(!stderr.contains(&format!("check {node}: ")), "{what}");
        }
        for node in answered {
            let head = format!("check {node}: ");
            let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(&head)).collect();
            assert!(!lines.is_empty(), "no line of {node}: {what}");
            let named: Vec<&str> = row.says.iter().filter(|(n, _)| *n == node).map(|(_, s)| *s).collect();
            let not_ok = row.fails && !named.is_empty();
            // Each copy of the line (a release may forward a failing task's error twice).
            for line in lines {
                for says in &named {
                    assert!(line.contains(says), "{node} does not say {says:?}: {what}");
                }
                assert_eq!(line.contains("NOT OK"), not_ok, "{node}: {what}");
                assert_eq!(line.ends_with("| ok"), !not_ok, "{node}: {what}");
            }
        }
    }
}

/// A heterogeneous step whose second component, on cpu1, cannot isolate (`tcp_syncookies=2` in
/// cpu1's network namespace alone) while the first, on n9, can: cpu1 stops every component, so n9's
/// task, which started, ends within seconds rather than when its program does (120 s). When
/// cpu1 stopped its own component's job only, n9's task ran its 120 s (checked once,
/// 2026-11-26, 22.05).
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_heterogeneous_step_whose_node_cannot_isolate_stops_every_component() {
    let _plugstack = PlugStack::isolated("");
    let _cookies = SynCookies::set(&["cpu1"], 2);
    let started = std::time::Instant::now();
    let out = sh(&format!(
        "runuser -u {OWNER} -- srun -t 3 -p gpu -w n9 -n1 --tf-cluster sleep 120 : -p cpu -w cpu1 -n1 sleep 120"
    ));
    let seconds = started.elapsed().as_secs();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("{seconds} s, status {:?}:\n{stderr}", out.status.code());
    assert!(
        stderr.contains(&format!(
            "tfcluster: isolate=yes: node cpu1 cannot install the step's firewall: {}",
            Error::SynCookiesAlways
        )),
        "{what}"
    );
    assert!(seconds < 60, "{what}");
}

/// From the attacker's side, `--tf-cluster=check` takes nothing from the user: a
/// `SLURMD_NODENAME` they export does not rename the node in its line (or the files it looks
/// at), and their process called `slurmd` in n9's namespaces is not taken for n9's slurmd (two
/// slurmd there would make the line say so instead of "this file").
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn the_check_takes_the_node_and_slurmd_from_slurm_not_the_user() {
    let _plugstack = PlugStack::isolated_as("optional", "");
    // Earlier tests replace the plugin's file: n9's slurmd then runs another copy.
    sh_ok(&format!("{} restart-slurmd n9 >&2", cluster_sh()));
    let d = dir().join("fake-slurmd");
    let d = d.display();
    let pid = dir().join("slurmd-n9.pid");
    let pid = pid.display();
    // Another user's process called slurmd, in n9's network and host name namespaces.
    sh_ok(&format!(
        "mkdir -p {d} && cp /bin/sleep {d}/slurmd && chmod 755 {d} {d}/slurmd && \
         (setsid nsenter --target $(cat {pid}) --net --uts setpriv --reuid=$(id -u {OTHER}) \
          --regid=$(id -g {OTHER}) --clear-groups {d}/slurmd 120 >/dev/null 2>&1 </dev/null &)"
    ));
    let out = sh(&format!(
        "runuser -u {OWNER} -- srun --export=ALL,SLURMD_NODENAME=n10 -p shared -w n9 -N1 -n1 -t 1 --tf-cluster=check true"
    ));
    sh(&format!("pkill -f '^{d}/slurmd 120$'"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("srun {:?}\n{stderr}", out.status.code());
    assert!(stderr.contains("check n9: "), "{what}");
    assert!(!stderr.contains("check n10: "), "{what}");
    assert!(stderr.contains("slurmd: this file"), "{what}");
}

/// From the attacker's side: a user whose jobs already hold MAX_TABLES_PER_USER tables on n9
/// (made here as root: half named for the user's running job, as steps of it would leave them,
/// without the comment that names their user, as tfcluster before 0.13.0 made them, so that
/// slurmctld says whose they are; half for a job slurmctld does not know, whose comment alone
/// says they are the user's) is refused one more with a line and no task, while another user's
/// isolated step on n9 runs; the job's epilog removes the user's tables when the job ends.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_user_gets_no_more_tables_on_a_node_than_the_bound() {
    let _plugstack = PlugStack::isolated("");
    let job = sh_ok(&format!(
        "runuser -u {OWNER} -- salloc --no-shell -p shared -w n9 -n1 -t 3 2>&1 \
         | sed -n 's/.*Granted job allocation \\([0-9]*\\).*/\\1/p'"
    ));
    let job = job.trim().to_string();
    assert!(!job.is_empty(), "the user's job was not granted");
    let uid: u32 = sh_ok(&format!("id -u {OWNER}")).trim().parse().unwrap();
    // A job id slurmctld has never given.
    const UNKNOWN_JOB: u32 = 3_999_999;
    let half = MAX_TABLES_PER_USER / 2;
    let commented: Vec<String> = (0..half)
        .map(|i| table_name(UNKNOWN_JOB, i as u32))
        .collect();
    let script: String = (0..MAX_TABLES_PER_USER - half)
        .map(|i| {
            format!(
                "add table inet {}\n",
                table_name(job.parse().unwrap(), 1000 + i as u32)
            )
        })
        .chain(commented.iter().map(|t| {
            format!(
                "add table inet {t} {{ {}; }}\n",
                owner_comment(uid).trim_end()
            )
        }))
        .collect();
    std::fs::write(dir().join("tables.nft"), script).unwrap();
    sh_ok(&format!(
        "nsenter --net=/run/netns/tfc-n9 nft -f {}",
        dir().join("tables.nft").display()
    ));
    let out = sh(&format!(
        "runuser -u {OWNER} -- srun --jobid={job} -n1 -t 1 --tf-cluster echo RAN"
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let refused = Error::TooManyTables {
        count: MAX_TABLES_PER_USER,
        max: MAX_TABLES_PER_USER,
        yours: true,
    };
    let what = format!("{}\n{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(
        stderr.contains(&format!(
            "tfcluster: isolate=yes: node n9 cannot install the step's firewall: {refused}"
        )),
        "{what}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("RAN"),
        "{what}"
    );
    let other = sh(&format!(
        "runuser -u {OTHER} -- srun -p shared -w n9 -n1 -t 1 --tf-cluster echo RAN"
    ));
    assert!(
        String::from_utf8_lossy(&other.stdout).contains("RAN"),
        "another user's step on n9: {}",
        String::from_utf8_lossy(&other.stderr)
    );
    sh_ok(&format!("scancel {job}"));
    let removal: String = commented.iter().map(|t| removal(t)).collect();
    std::fs::write(dir().join("tables.nft"), removal).unwrap();
    sh_ok(&format!(
        "nsenter --net=/run/netns/tfc-n9 nft -f {}",
        dir().join("tables.nft").display()
    ));
    let left = || {
        sh_ok("nsenter --net=/run/netns/tfc-n9 nft list tables")
            .lines()
            .filter(|l| l.contains(&format!("tfcluster_{job}_")))
            .count()
    };
    common::cluster::wait_for("the job's epilog to remove its tables", 60, || left() == 0);
}

/// A node that cannot install the step's firewall fails the step before any task starts, with
/// one line naming the node and why, even where the plugin is `optional` (Slurm would run a task
/// whose hook failed).
struct CannotIsolate {
    what: &'static str,
    /// `required` or `optional`.
    kind: &'static str,
    words: &'static str,
    /// `net.ipv4.tcp_syncookies` on n9 and n10 for the row (the kernel's default is 1).
    syncookies: u8,
    /// The line each node prints, up to where the resolver's or the loader's own words begin;
    /// `{syncookies}` stands for the core's [`Error::SynCookiesAlways`].
    line: &'static str,
}

#[rustfmt::skip]
const CANNOT_ISOLATE: &[CannotIsolate] = &[
    CannotIsolate { what: "an address that does not resolve", kind: "required", words: "address=%h-ib", syncookies: 1,
                    line: "isolate=yes: node {node} cannot install the step's firewall: node address 'n9-ib' does not resolve (" },
    CannotIsolate { what: "every answer a SYN cookie", kind: "required", words: "", syncookies: 2,
                    line: "isolate=yes: node {node} cannot install the step's firewall: {syncookies}" },
    CannotIsolate { what: "every answer a SYN cookie, the plugin optional", kind: "optional", words: "", syncookies: 2,
                    line: "isolate=yes: node {node} cannot install the step's firewall: {syncookies}" },
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_node_that_cannot_isolate_fails_the_step_before_any_task_starts() {
    for CannotIsolate {
        what,
        kind,
        words,
        syncookies,
        line,
    } in CANNOT_ISOLATE
    {
        let _plugstack = PlugStack::isolated_as(kind, words);
        let _cookies = SynCookies::set(&["n9", "n10"], *syncookies);
        let stderr = no_task_runs(what, "");
        for node in ["n9", "n10"] {
            let line = line
                .replace("{node}", node)
                .replace("{syncookies}", &Error::SynCookiesAlways.to_string());
            let line = format!("tfcluster: {line}");
            assert_eq!(
                stderr.matches(&line).count(),
                1,
                "{what}: expected once: {line}\n{stderr}"
            );
        }
        let why =
            "; the step is stopped, so that no TensorFlow server of it runs open to other users";
        assert_eq!(stderr.matches(why).count(), 2, "{what}: {stderr}");
    }
}

/// With isolate=yes a job cannot put its ports outside the site's port_range (the firewall would
/// close whatever else listens there for other users): srun refuses before launch.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_port_outside_the_sites_range_is_refused_before_launch() {
    let _plugstack = PlugStack::isolated("");
    let stderr = no_task_runs("port_base=22", "=worker:*,port_base=22");
    let line = format!(
        "srun: error: tfcluster: {}",
        tfcluster::core::Error::PortOutsideIsolatedRange {
            port: 22,
            lo: 12000,
            hi: 32767
        }
    );
    assert!(stderr.contains(&line), "expected {line}\n{stderr}");
}

/// The owner's 4-task step on n9 and n10 with `--tf-cluster{spec}`, which must fail with no task
/// started; srun's stderr.
fn no_task_runs(what: &str, spec: &str) -> String {
    let out = sh(&format!(
        "runuser -u {OWNER} -- srun -w n9,n10 -N2 -n4 -t 1 --tf-cluster{spec} sh -c 'echo RAN'"
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_ne!(out.status.code(), Some(0), "{what}: {stderr}");
    assert!(
        !stdout.contains("RAN"),
        "{what}: a task ran:\n{stdout}\n{stderr}"
    );
    stderr
}

/// 50 steps of one job: 48 that end, one whose slurmstepd is killed with SIGKILL (it removes
/// nothing: its table stays until the job's epilog where libnftables can keep it after its
/// owner, else goes with it), and one cancelled with scancel (its slurmstepd removes its rules).
/// Once the job is cancelled, nothing of it is left on any node.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn no_rule_outlives_its_job() {
    let _plugstack = PlugStack::isolated("");
    let d = dir().join("isolation-steps");
    let d = d.display();
    std::fs::write(
        format!("{d}.sh"),
        "#!/bin/bash\n\
         for i in $(seq 48); do srun --tf-cluster true || echo \"STEP_FAILED|$i\"; done\n\
         echo STEPS_DONE\n\
         srun --overlap --tf-cluster sleep 300 &\n\
         srun --overlap --tf-cluster sleep 300 &\n\
         wait\n",
    )
    .unwrap();
    sh_ok(&format!("rm -rf {d}; mkdir -m 1777 {d}; chmod a+rx {d}.sh"));
    let job = sh_ok(&format!(
        "runuser -u {OWNER} -- sbatch --parsable -p shared -w n9,n10 -N2 -n2 -t 5 -o {d}/job.out {d}.sh"
    ));
    let job = job.trim();
    // `node|count` of tables named `table` on n9 and n10.
    let count = |table: &str| -> Vec<String> {
        sh_ok(&format!(
            "for n in n9 n10; do echo \"$n|$(nsenter --net=/run/netns/tfc-$n nft list tables | grep -c ' {table}$')\"; done"
        ))
        .lines()
        .map(str::to_string)
        .collect()
    };
    let both = |n: u8| vec![format!("n9|{n}"), format!("n10|{n}")];
    let (killed, cancelled) = (format!("{job}.48"), format!("{job}.49"));
    let table_of = |step: &str| format!("tfcluster_{}", step.replace('.', "_"));
    let running = |step: &str| {
        sh_ok(&format!("squeue -h -s -j {job} -o %i"))
            .lines()
            .any(|l| l == step)
            && count(&table_of(step)) == both(1)
    };
    assert!(
        within(120, || running(&killed) && running(&cancelled)),
        "steps 48 and 49 never ran:\n{}",
        sh_ok(&format!("cat {d}/job.out; squeue -s"))
    );
    // SIGKILL to step 48's slurmstepds, and to their tasks (which no slurmstepd ends now).
    let pids = sh_ok(&format!(
        "for n in n9 n10; do for p in $(ip netns pids tfc-$n); do
            if tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q '^slurmstepd: \\[{killed}\\]'; then echo $p; pgrep -P $p; fi
         done; done"
    ));
    let pids: Vec<&str> = pids.split_whitespace().collect();
    assert!(pids.len() >= 2, "no slurmstepd of {killed}: {pids:?}");
    sh_ok(&format!("kill -9 {}", pids.join(" ")));
    std::thread::sleep(std::time::Duration::from_secs(2));
    // A killed slurmstepd removes nothing: its table stays for the epilog where it persists,
    // and goes with the slurmstepd's socket where it is only owned.
    let kept = u8::from(release::kernel_persists());
    assert_eq!(count(&table_of(&killed)), both(kept), "after SIGKILL");
    sh_ok(&format!("scancel {cancelled}"));
    assert!(
        within(30, || count(&table_of(&cancelled)) == both(0)),
        "the cancelled step's rules stayed"
    );
    assert_eq!(count(&table_of(&killed)), both(kept));
    sh_ok(&format!("scancel {job}"));
    let left = || {
        sh_ok(&tables_script())
            .lines()
            .filter(|l| !l.ends_with("|0"))
            .count()
    };
    assert!(
        within(60, || left() == 0),
        "rules left after job {job}:\n{}",
        sh_ok(&leftover_script())
    );
    let out = sh_ok(&format!("cat {d}/job.out"));
    assert!(
        out.contains("STEPS_DONE") && !out.contains("STEP_FAILED"),
        "{out}"
    );
}

/// slurmd decides when it starts whether any SPANK plugin has a job epilog: a plugin added to
/// plugstack.conf while slurmd runs gets no epilog until slurmd restarts (the admin guide says
/// so). Shown with a table named as one of the job's (`tfcluster_JOB_99`, made by root while the
/// job runs), which only the epilog removes.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn the_job_epilog_runs_once_slurmd_has_restarted_with_the_plugin() {
    let cluster = cluster_sh();
    let epilog_ran = || -> bool {
        let job = sh_ok(&format!(
            "runuser -u {OWNER} -- sbatch --parsable -p shared -w n9 -N1 -n1 -t 2 -o /dev/null --wrap 'sleep 300'"
        ));
        let job = job.trim();
        let marker = format!("tfcluster_{job}_99");
        let nft = "nsenter --net=/run/netns/tfc-n9 nft";
        sh_ok(&format!(
            "for i in $(seq 300); do [ \"$(squeue -h -j {job} -o %t)\" = R ] && break; sleep 0.1; done
{nft} add table inet {marker}; scancel {job}"
        ));
        // A job leaves squeue once its epilog has run on its nodes: whether that removed the
        // table is then decided (no wait for a removal that is not coming).
        let ended = within(30, || {
            sh_ok(&format!("squeue -h -j {job}")).trim().is_empty()
        });
        let gone = !sh_ok(&format!("{nft} list tables")).contains(&marker);
        sh(&format!("{nft} delete table inet {marker}"));
        assert!(ended, "job {job} did not end");
        gone
    };
    {
        let _none = PlugStack::set("# tfcluster not loaded yet");
        sh_ok(&format!("{cluster} restart-slurmd n9"));
    }
    let _isolated = PlugStack::isolated("");
    let before = epilog_ran();
    sh_ok(&format!("{cluster} restart-slurmd n9"));
    let after = epilog_ran();
    assert_eq!(
        (before, after),
        (false, true),
        "(epilog before slurmd's restart, after it)"
    );
}

/// Polls `done` every 0.2 s for up to `seconds`; whether it came true.
fn within(seconds: u64, mut done: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while std::time::Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    done()
}
