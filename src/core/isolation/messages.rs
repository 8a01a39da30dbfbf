//! The scripts of [`super::rules`] as the kernel's own messages: one nfnetlink batch that makes
//! the table, its sets and their elements, its chains and their rules, as libnftables makes
//! them from the same script (each expression, attribute and flag as its `--debug=netlink`
//! shows), without loading libnftables, parsing with it, or reading the node's ruleset first.
//! slurmstepd installs each step's table this way (docs/performance.md says what it saves);
//! tests/firewall.rs checks, with the libnftables of each release's root, that the kernel then
//! holds what libnftables would have installed: the same listing, expression by expression.
//! The removal of a table ([`deletion_request`]) and the dump of another step's ports
//! ([`set_elements_request`]) are the kernel's messages too.
//!
//! The script stays the one description of the rules (the audit of tests/release/mutations.tsv
//! edits its text): this module reads the lines [`super::rules`] writes, and only those. Any
//! other line, word or value gives `None`, and the caller hands the script to libnftables
//! instead, so nothing the module does not know is ever installed differently.
//!
//! The numbers are the kernel's netlink interface for nftables (`linux/netfilter/nf_tables.h`,
//! `nfnetlink.h`): message and attribute types, expression keys, registers, verdicts.

use super::tables::{NEW_TABLE, NFPROTO_INET, NFTABLES, TABLE_NAME, TABLE_USERDATA};
use crate::core::netlink::{self, attribute};
use crate::core::text::decimal;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The messages that install the table `script` describes; `None`: the script has a line this
/// module does not write (see the module's doc).
pub fn install_request(script: &str) -> Option<Install> {
    let table = parse(script)?;
    let mut messages = vec![table.message()];
    for (id, set) in table.sets.iter().enumerate() {
        messages.push(set.message(table.name, id as u32 + 1));
        messages.extend(set.elements(table.name, id as u32 + 1));
    }
    for chain in &table.chains {
        messages.push(chain.message(table.name));
        let rules = chain.rules.iter();
        messages.extend(rules.map(|rule| rule_message(table.name, chain.name, rule)));
    }
    Some(Install(messages))
}

/// What [`install_request`] read: the batch's messages, numbered when sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install(Vec<Message>);

impl Install {
    /// The batch, every message under `seq`, the last one asking for the kernel's answer
    /// ([`netlink::acked`]): an error of any message, or of the commit (answered under the
    /// batch's first message), comes back under the same number, before that answer.
    pub fn batch(&self, seq: u32) -> Vec<u8> {
        let last = self.0.len() - 1;
        let mut out = batch(BATCH_BEGIN, seq);
        for (i, (kind, flags, body)) in self.0.iter().enumerate() {
            let ack = if i == last { ACK } else { 0 };
            out.extend(netlink::message(
                NFTABLES << 8 | kind,
                flags | ack,
                seq,
                body,
            ));
        }
        out.extend(batch(BATCH_END, seq));
        out
    }
}

/// [`super::tables::removal`] as the kernel's own transaction, for the socket that owns the table
/// (`crate::spank::isolation::nftables::OwnerSocket`, which keeps a step's table owned without
/// libnftables loaded): an nfnetlink batch (`NFNL_MSG_BATCH_BEGIN`, 0x10, and `_END`, 0x11,
/// whose resource id, big-endian, is the nftables subsystem) around one `NFT_MSG_DELTABLE` of
/// family `inet` naming the table, which asks for the kernel's answer under `seq`
/// ([`netlink::acked`]). An owned table's owner alone may delete it.
pub fn deletion_request(table: &str, seq: u32) -> Vec<u8> {
    let mut body = family_header();
    body.extend(attribute(TABLE_NAME, &text(table)));
    let mut out = batch(BATCH_BEGIN, seq);
    out.extend(netlink::acked_message(
        NFTABLES << 8 | DELETE_TABLE,
        seq,
        &body,
    ));
    out.extend(batch(BATCH_END, seq));
    out
}

/// The request for the elements of set `set` of table `table` (a dump of `NFT_MSG_GETSETELEM`,
/// family `inet`): another step's ports, which a new step's may not share
/// ([`super::tables::check_tables`]).
pub fn set_elements_request(table: &str, set: &str) -> Vec<u8> {
    let mut body = family_header();
    body.extend(attribute(ELEM_LIST_TABLE, &text(table)));
    body.extend(attribute(ELEM_LIST_SET, &text(set)));
    netlink::dump_request(NFTABLES << 8 | GET_SETELEM, &body)
}

/// One reply to [`set_elements_request`] for a set of ports: each element's key, two bytes in
/// network order.
pub fn set_ports_reply(buf: &[u8]) -> netlink::Reply<Vec<u16>> {
    netlink::reply(buf, NFTABLES << 8 | NEW_SETELEM, |message| {
        let mut ports = Vec::new();
        for (kind, value) in netlink::attributes(message.get(4..)?) {
            if kind != ELEM_LIST_ELEMENTS {
                continue;
            }
            for (_, element) in netlink::attributes(value) {
                let key = netlink::attributes(element)
                    .find(|&(k, _)| k == ELEM_KEY)?
                    .1;
                let data = netlink::attributes(key).find(|&(k, _)| k == DATA_VALUE)?.1;
                ports.push(u16::from_be_bytes(data.try_into().ok()?));
            }
        }
        Some(ports)
    })
}

/// A table as its script describes it.
struct Table<'s> {
    name: &'s str,
    flags: u32,
    comment: Option<&'s str>,
    sets: Vec<Set<'s>>,
    chains: Vec<Chain<'s>>,
}

struct Set<'s> {
    name: &'s str,
    kind: Kind,
    elements: Vec<Vec<u8>>,
}

/// The three kinds of set the rules use: nftables' datatype number and key length.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ipv4,
    Ipv6,
    Port,
}

struct Chain<'s> {
    name: &'s str,
    hook: u32,
    /// Each rule's expressions, encoded.
    rules: Vec<Vec<u8>>,
}

/// A message of the batch: its type within nftables, its flags, its body.
type Message = (u16, u16, Vec<u8>);

fn parse(script: &str) -> Option<Table<'_>> {
    let mut lines = script.lines().map(str::trim);
    let name = lines
        .next()?
        .strip_prefix("table inet ")?
        .strip_suffix(" {")?;
    let mut table = Table {
        name,
        flags: 0,
        comment: None,
        sets: Vec::new(),
        chains: Vec::new(),
    };
    let mut kinds: HashMap<&str, (u32, Kind)> = HashMap::new();
    loop {
        let line = lines.next()?;
        if line == "}" {
            break;
        } else if let Some(flags) = line.strip_prefix("flags ") {
            table.flags = table_flags(flags)?;
        } else if let Some(comment) = line.strip_prefix("comment \"") {
            let comment = comment.strip_suffix('"')?;
            // One user data record holds it, with its NUL, in 255 bytes.
            (!comment.contains('"') && comment.len() < 255).then_some(())?;
            table.comment = Some(comment);
        } else if let Some(set) = line.strip_prefix("set ") {
            let set = parse_set(set.strip_suffix(" {")?, &mut lines)?;
            kinds.insert(set.name, (table.sets.len() as u32 + 1, set.kind));
            table.sets.push(set);
        } else if let Some(chain) = line.strip_prefix("chain ") {
            let chain = parse_chain(chain.strip_suffix(" {")?, &mut lines, &kinds)?;
            table.chains.push(chain);
        } else {
            return None;
        }
    }
    // Nothing after the table's end but blank lines.
    lines.all(str::is_empty).then_some(table)
}

/// `owner` (`NFT_TABLE_F_OWNER`, 2) and `persist` (`NFT_TABLE_F_PERSIST`, 4, Linux 6.9).
fn table_flags(flags: &str) -> Option<u32> {
    flags.split(", ").try_fold(0, |all, flag| match flag {
        "owner" => Some(all | 2),
        "persist" => Some(all | 4),
        _ => None,
    })
}

fn parse_set<'s>(name: &'s str, lines: &mut impl Iterator<Item = &'s str>) -> Option<Set<'s>> {
    let kind = match lines.next()?.strip_prefix("type ")? {
        "ipv4_addr" => Kind::Ipv4,
        "ipv6_addr" => Kind::Ipv6,
        "inet_service" => Kind::Port,
        _ => return None,
    };
    let mut set = Set {
        name,
        kind,
        elements: Vec::new(),
    };
    let mut line = lines.next()?;
    if let Some(elements) = line.strip_prefix("elements = { ") {
        for element in elements.strip_suffix(" }")?.split(", ") {
            set.elements.push(kind.key(element)?);
        }
        line = lines.next()?;
    }
    (line == "}").then_some(set)
}

impl Kind {
    /// `NFTA_SET_KEY_TYPE` (nftables' datatypes `ipv4_addr`, 7, `ipv6_addr`, 8,
    /// `inet_service`, 13) and `NFTA_SET_KEY_LEN`.
    fn datatype(self) -> (u32, u32) {
        match self {
            Kind::Ipv4 => (7, 4),
            Kind::Ipv6 => (8, 16),
            Kind::Port => (13, 2),
        }
    }

    /// One element's key as the kernel compares it: network byte order.
    fn key(self, element: &str) -> Option<Vec<u8>> {
        match self {
            Kind::Ipv4 => Some(element.parse::<Ipv4Addr>().ok()?.octets().to_vec()),
            Kind::Ipv6 => Some(element.parse::<Ipv6Addr>().ok()?.octets().to_vec()),
            Kind::Port => Some(decimal::<u16>(element)?.to_be_bytes().to_vec()),
        }
    }
}

fn parse_chain<'s>(
    name: &'s str,
    lines: &mut impl Iterator<Item = &'s str>,
    sets: &HashMap<&str, (u32, Kind)>,
) -> Option<Chain<'s>> {
    let hook = match lines
        .next()?
        .strip_prefix("type filter hook ")?
        .strip_suffix(" priority 0; policy accept;")?
    {
        "input" => NF_INET_LOCAL_IN,
        "forward" => NF_INET_FORWARD,
        "output" => NF_INET_LOCAL_OUT,
        _ => return None,
    };
    let mut chain = Chain {
        name,
        hook,
        rules: Vec::new(),
    };
    loop {
        match lines.next()? {
            "}" => return Some(chain),
            rule => chain.rules.push(encode_rule(rule, sets)?),
        }
    }
}

/// `tcp flags & (syn | ack) == syn | ack`, a SYN-ACK; without the last two words, a SYN.
const FLAGS: [&str; 7] = ["tcp", "flags", "&", "(syn", "|", "ack)", "=="];

/// One rule's expressions, each word group as libnftables links it: the protocol each match
/// needs first (`meta nfproto` for `ip`/`ip6`, `meta l4proto tcp` for `tcp`), once per rule,
/// just before the first match that needs it; every value loaded into register 1.
fn encode_rule(rule: &str, sets: &HashMap<&str, (u32, Kind)>) -> Option<Vec<u8>> {
    let words: Vec<&str> = rule.split_whitespace().collect();
    let mut exprs = Vec::new();
    let (mut family, mut tcp) = (None, false);
    let need_tcp = |exprs: &mut Vec<u8>, tcp: &mut bool| {
        if !std::mem::replace(tcp, true) {
            exprs.extend(meta(META_L4PROTO));
            exprs.extend(cmp(CMP_EQ, &[IPPROTO_TCP]));
        }
    };
    let lookup = |exprs: &mut Vec<u8>, set: &str, kind: Kind| -> Option<()> {
        let (id, found) = sets.get(set.strip_prefix('@')?)?;
        (*found == kind).then_some(())?;
        exprs.extend(expression("lookup", |d| {
            d.extend(attribute(LOOKUP_SET, &text(&set[1..])));
            d.extend(attribute(LOOKUP_SREG, &REG_1.to_be_bytes()));
            d.extend(attribute(LOOKUP_SET_ID, &id.to_be_bytes()));
        }));
        Some(())
    };
    let mut at = 0;
    let mut verdict = false;
    while at < words.len() {
        if verdict {
            return None; // nothing after a verdict
        }
        match &words[at..] {
            [io @ ("iif" | "oif"), "\"lo\"", ..] => {
                exprs.extend(meta(if *io == "iif" { META_IIF } else { META_OIF }));
                exprs.extend(cmp(CMP_EQ, &LOOPBACK_IFINDEX.to_ne_bytes()));
                at += 2;
            }
            [proto @ ("ip" | "ip6"), field @ ("saddr" | "daddr"), set, ..] => {
                let (nfproto, kind, offset) = match (*proto, *field) {
                    ("ip", "saddr") => (NFPROTO_IPV4, Kind::Ipv4, 12),
                    ("ip", _) => (NFPROTO_IPV4, Kind::Ipv4, 16),
                    ("ip6", "saddr") => (NFPROTO_IPV6, Kind::Ipv6, 8),
                    _ => (NFPROTO_IPV6, Kind::Ipv6, 24),
                };
                match family {
                    None => {
                        exprs.extend(meta(META_NFPROTO));
                        exprs.extend(cmp(CMP_EQ, &[nfproto]));
                        family = Some(nfproto);
                    }
                    Some(f) if f != nfproto => return None,
                    Some(_) => {}
                }
                exprs.extend(payload(PAYLOAD_NETWORK, offset, kind.datatype().1));
                lookup(&mut exprs, set, kind)?;
                at += 3;
            }
            [w0, w1, w2, w3, w4, w5, w6, "syn", rest @ ..]
                if [*w0, *w1, *w2, *w3, *w4, *w5, *w6] == FLAGS =>
            {
                let answer = matches!(rest, ["|", "ack", ..]);
                need_tcp(&mut exprs, &mut tcp);
                exprs.extend(payload(PAYLOAD_TRANSPORT, 13, 1));
                exprs.extend(expression("bitwise", |d| {
                    d.extend(attribute(BITWISE_SREG, &REG_1.to_be_bytes()));
                    d.extend(attribute(BITWISE_DREG, &REG_1.to_be_bytes()));
                    d.extend(attribute(BITWISE_LEN, &1u32.to_be_bytes()));
                    d.extend(nested(
                        BITWISE_MASK,
                        &attribute(DATA_VALUE, &[SYN | ACK_FLAG]),
                    ));
                    d.extend(nested(BITWISE_XOR, &attribute(DATA_VALUE, &[0])));
                }));
                exprs.extend(cmp(CMP_EQ, &[if answer { SYN | ACK_FLAG } else { SYN }]));
                at += if answer { 10 } else { 8 };
            }
            ["tcp", port @ ("dport" | "sport"), set, ..] => {
                need_tcp(&mut exprs, &mut tcp);
                exprs.extend(payload(
                    PAYLOAD_TRANSPORT,
                    if *port == "sport" { 0 } else { 2 },
                    2,
                ));
                lookup(&mut exprs, set, Kind::Port)?;
                at += 3;
            }
            ["meta", "skuid", "!=", uid, ..] | ["meta", "skuid", uid, ..] => {
                let op = if words[at + 2] == "!=" {
                    CMP_NEQ
                } else {
                    CMP_EQ
                };
                exprs.extend(meta(META_SKUID));
                exprs.extend(cmp(op, &decimal::<u32>(uid)?.to_ne_bytes()));
                at += if op == CMP_NEQ { 4 } else { 3 };
            }
            ["accept", ..] | ["drop", ..] => {
                let code = if words[at] == "accept" {
                    NF_ACCEPT
                } else {
                    NF_DROP
                };
                exprs.extend(expression("immediate", |d| {
                    d.extend(attribute(IMMEDIATE_DREG, &REG_VERDICT.to_be_bytes()));
                    let verdict =
                        nested(DATA_VERDICT, &attribute(VERDICT_CODE, &code.to_be_bytes()));
                    d.extend(nested(IMMEDIATE_DATA, &verdict));
                }));
                verdict = true;
                at += 1;
            }
            ["reject", "with", "tcp", "reset", ..] if tcp => {
                exprs.extend(expression("reject", |d| {
                    d.extend(attribute(REJECT_TYPE, &REJECT_TCP_RST.to_be_bytes()));
                    d.extend(attribute(REJECT_ICMP_CODE, &[0]));
                }));
                verdict = true;
                at += 4;
            }
            _ => return None,
        }
    }
    Some(exprs)
}

impl Table<'_> {
    fn message(&self) -> Message {
        let mut body = family_header();
        body.extend(attribute(TABLE_NAME, &text(self.name)));
        body.extend(attribute(TABLE_FLAGS, &self.flags.to_be_bytes()));
        if let Some(comment) = self.comment {
            // One user data record: type 0 (the comment), its length, the text and its NUL.
            // (`parse` keeps it under 255 bytes with its NUL).
            let comment = text(comment);
            let mut records = vec![0, comment.len() as u8];
            records.extend(comment);
            body.extend(attribute(TABLE_USERDATA, &records));
        }
        // A table of that name already there fails the transaction: never merged into.
        (NEW_TABLE, CREATE | EXCL, body)
    }
}

impl Set<'_> {
    fn message(&self, table: &str, id: u32) -> Message {
        let (datatype, length) = self.kind.datatype();
        let mut body = family_header();
        body.extend(attribute(SET_TABLE, &text(table)));
        body.extend(attribute(SET_NAME, &text(self.name)));
        body.extend(attribute(SET_FLAGS, &0u32.to_be_bytes()));
        body.extend(attribute(SET_KEY_TYPE, &datatype.to_be_bytes()));
        body.extend(attribute(SET_KEY_LEN, &length.to_be_bytes()));
        body.extend(attribute(SET_ID, &id.to_be_bytes()));
        // nft's user data: the key's byte order (record 0), big-endian (2), as nft lists it.
        body.extend(attribute(SET_USERDATA, &[0, 4, 2, 0, 0, 0]));
        (NEW_SET, CREATE, body)
    }

    /// The set's elements, in as many messages as their attribute's 16-bit length needs.
    fn elements(&self, table: &str, id: u32) -> Vec<Message> {
        let mut messages = Vec::new();
        for chunk in self.elements.chunks(ELEMENTS_PER_MESSAGE) {
            let mut list = Vec::new();
            for key in chunk {
                let key = nested(ELEM_KEY, &attribute(DATA_VALUE, key));
                list.extend(nested(LIST_ELEM, &key));
            }
            let mut body = family_header();
            body.extend(attribute(ELEM_LIST_TABLE, &text(table)));
            body.extend(attribute(ELEM_LIST_SET, &text(self.name)));
            body.extend(attribute(ELEM_LIST_SET_ID, &id.to_be_bytes()));
            body.extend(nested(ELEM_LIST_ELEMENTS, &list));
            messages.push((NEW_SETELEM, CREATE, body));
        }
        messages
    }
}

/// Elements per `NFT_MSG_NEWSETELEM`: 28 bytes each at most (an IPv6 key), within an
/// attribute's 65535.
const ELEMENTS_PER_MESSAGE: usize = 2048;

impl Chain<'_> {
    fn message(&self, table: &str) -> Message {
        let mut body = family_header();
        body.extend(attribute(CHAIN_TABLE, &text(table)));
        body.extend(attribute(CHAIN_NAME, &text(self.name)));
        let mut hook = attribute(HOOK_HOOKNUM, &self.hook.to_be_bytes());
        hook.extend(attribute(HOOK_PRIORITY, &0u32.to_be_bytes()));
        body.extend(nested(CHAIN_HOOK, &hook));
        body.extend(attribute(CHAIN_POLICY, &NF_ACCEPT.to_be_bytes()));
        body.extend(attribute(CHAIN_TYPE, &text("filter")));
        (NEW_CHAIN, CREATE, body)
    }
}

fn rule_message(table: &str, chain: &str, exprs: &[u8]) -> Message {
    let mut body = family_header();
    body.extend(attribute(RULE_TABLE, &text(table)));
    body.extend(attribute(RULE_CHAIN, &text(chain)));
    body.extend(nested(RULE_EXPRESSIONS, exprs));
    (NEW_RULE, CREATE | APPEND, body)
}

/// One expression of a rule: its name, and its attributes as `data` writes them.
fn expression(name: &str, data: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut attributes = Vec::new();
    data(&mut attributes);
    let mut element = attribute(EXPR_NAME, &text(name));
    element.extend(nested(EXPR_DATA, &attributes));
    nested(LIST_ELEM, &element)
}

/// `meta load KEY => reg 1`.
fn meta(key: u32) -> Vec<u8> {
    expression("meta", |d| {
        d.extend(attribute(META_KEY, &key.to_be_bytes()));
        d.extend(attribute(META_DREG, &REG_1.to_be_bytes()));
    })
}

/// `cmp OP reg 1 VALUE`.
fn cmp(op: u32, value: &[u8]) -> Vec<u8> {
    expression("cmp", |d| {
        d.extend(attribute(CMP_SREG, &REG_1.to_be_bytes()));
        d.extend(attribute(CMP_OP, &op.to_be_bytes()));
        d.extend(nested(CMP_DATA, &attribute(DATA_VALUE, value)));
    })
}

/// `payload load LENb @ BASE header + OFFSET => reg 1`.
fn payload(base: u32, offset: u32, length: u32) -> Vec<u8> {
    expression("payload", |d| {
        d.extend(attribute(PAYLOAD_DREG, &REG_1.to_be_bytes()));
        d.extend(attribute(PAYLOAD_BASE, &base.to_be_bytes()));
        d.extend(attribute(PAYLOAD_OFFSET, &offset.to_be_bytes()));
        d.extend(attribute(PAYLOAD_LEN, &length.to_be_bytes()));
    })
}

/// A nested attribute (`NLA_F_NESTED` set, as libnftables sets it).
fn nested(kind: u16, value: &[u8]) -> Vec<u8> {
    attribute(kind | NLA_F_NESTED, value)
}

/// A name as the kernel takes it: NUL-terminated.
fn text(name: &str) -> Vec<u8> {
    let mut out = name.as_bytes().to_vec();
    out.push(0);
    out
}

/// `nfgenmsg`: family `inet`, version 0, resource id 0.
fn family_header() -> Vec<u8> {
    vec![NFPROTO_INET, 0, 0, 0]
}

/// `NFNL_MSG_BATCH_BEGIN`/`_END`, whose resource id (big-endian) is the nftables subsystem.
fn batch(kind: u16, seq: u32) -> Vec<u8> {
    let mut body = vec![0, 0];
    body.extend_from_slice(&NFTABLES.to_be_bytes());
    netlink::message(kind, 0, seq, &body)
}

const BATCH_BEGIN: u16 = 0x10;
const BATCH_END: u16 = 0x11;
const ACK: u16 = 0x4;
const EXCL: u16 = 0x200;
const CREATE: u16 = 0x400;
const APPEND: u16 = 0x800;
const NLA_F_NESTED: u16 = 0x8000;

const DELETE_TABLE: u16 = 2;
const NEW_CHAIN: u16 = 3;
const NEW_RULE: u16 = 6;
const NEW_SET: u16 = 9;
const NEW_SETELEM: u16 = 12;
const GET_SETELEM: u16 = 13;

const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;
const IPPROTO_TCP: u8 = 6;
const NF_INET_LOCAL_IN: u32 = 1;
const NF_INET_FORWARD: u32 = 2;
const NF_INET_LOCAL_OUT: u32 = 3;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;
/// The loopback device's index in every network namespace.
const LOOPBACK_IFINDEX: u32 = 1;
/// TCP's flags SYN and ACK, in the header's byte 13.
const SYN: u8 = 0x02;
const ACK_FLAG: u8 = 0x10;

const TABLE_FLAGS: u16 = 2;
const CHAIN_TABLE: u16 = 1;
const CHAIN_NAME: u16 = 3;
const CHAIN_HOOK: u16 = 4;
const CHAIN_POLICY: u16 = 5;
const CHAIN_TYPE: u16 = 7;
const HOOK_HOOKNUM: u16 = 1;
const HOOK_PRIORITY: u16 = 2;
const SET_TABLE: u16 = 1;
const SET_NAME: u16 = 2;
const SET_FLAGS: u16 = 3;
const SET_KEY_TYPE: u16 = 4;
const SET_KEY_LEN: u16 = 5;
const SET_ID: u16 = 10;
const SET_USERDATA: u16 = 13;
const ELEM_LIST_TABLE: u16 = 1;
const ELEM_LIST_SET: u16 = 2;
const ELEM_LIST_ELEMENTS: u16 = 3;
const ELEM_LIST_SET_ID: u16 = 4;
const ELEM_KEY: u16 = 1;
const LIST_ELEM: u16 = 1;
const DATA_VALUE: u16 = 1;
const DATA_VERDICT: u16 = 2;
const VERDICT_CODE: u16 = 1;
const RULE_TABLE: u16 = 1;
const RULE_CHAIN: u16 = 2;
const RULE_EXPRESSIONS: u16 = 4;
const EXPR_NAME: u16 = 1;
const EXPR_DATA: u16 = 2;

const REG_VERDICT: u32 = 0;
const REG_1: u32 = 1;
const META_DREG: u16 = 1;
const META_KEY: u16 = 2;
const META_IIF: u32 = 4;
const META_OIF: u32 = 5;
const META_SKUID: u32 = 10;
const META_NFPROTO: u32 = 15;
const META_L4PROTO: u32 = 16;
const CMP_SREG: u16 = 1;
const CMP_OP: u16 = 2;
const CMP_DATA: u16 = 3;
const CMP_EQ: u32 = 0;
const CMP_NEQ: u32 = 1;
const PAYLOAD_DREG: u16 = 1;
const PAYLOAD_BASE: u16 = 2;
const PAYLOAD_OFFSET: u16 = 3;
const PAYLOAD_LEN: u16 = 4;
const PAYLOAD_NETWORK: u32 = 1;
const PAYLOAD_TRANSPORT: u32 = 2;
const BITWISE_SREG: u16 = 1;
const BITWISE_DREG: u16 = 2;
const BITWISE_LEN: u16 = 3;
const BITWISE_MASK: u16 = 4;
const BITWISE_XOR: u16 = 5;
const LOOKUP_SET: u16 = 1;
const LOOKUP_SREG: u16 = 2;
const LOOKUP_SET_ID: u16 = 4;
const IMMEDIATE_DREG: u16 = 1;
const IMMEDIATE_DATA: u16 = 2;
const REJECT_TYPE: u16 = 1;
const REJECT_ICMP_CODE: u16 = 2;
const REJECT_TCP_RST: u32 = 1;
