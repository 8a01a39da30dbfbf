//! Slurm's hostlist grammar (one-dimensional clusters), expanded in Slurm's own order.
//!
//! - Separators are `,`, space, tab and newline, except inside `[...]`; runs of them are skipped.
//! - A token without `[` is a literal host name.
//! - In a token with brackets, the **last** group is the innermost loop; groups before it are
//!   expanded by recursion on the prefix, the last prefix group outermost. With two groups that
//!   is plain lexicographic order (`r[1-2]n[1-2]` -> r1n1 r1n2 r2n1 r2n2); with three it is
//!   Slurm's peculiar order (`a[1-2]b[3-4]c[5-6]` -> a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...).
//! - Text after the last `]` is a suffix (`node[1-2]-ib`), as Slurm allows since 23.11.
//! - A range is `N` or `LO-HI`; it is zero-padded to the width of the `LO` text (`[8-10]` ->
//!   8 9 10, `[08-10]` -> 08 09 10). `LO > HI`, an `x` (multi-dimensional box) and ranges over
//!   65536 are errors, as in Slurm.
//! - Order and duplicates are kept: Slurm's node index is the position in this list.
//!
//! The same range syntax is used for `SLURM_STEP_RESV_PORTS` (`12000-12003,12010`).

use super::error::{Error, Result};
use super::text::{is_decimal, push_decimal};

/// Slurm's `MAX_RANGE` (`MAX_SLURM_NODES`): the most hosts one range may produce. Also the cap
/// on a whole list, so that input like `a[1-65536]b[1-65536]` cannot exhaust memory.
pub const MAX_HOSTS: usize = 65536;

/// Expands a hostlist into host names in Slurm's order.
pub fn expand(list: &str) -> Result<Vec<String>> {
    let fail = |reason: String| Error::Hostlist {
        list: list.to_string(),
        reason,
    };
    // A C string never holds one; a host name with one would cut every plain-text value it is
    // written into (no_grpc_proxy, DTENSOR_JOBS) short.
    if list.contains('\0') {
        return Err(fail("a host name holds a NUL byte".into()));
    }
    let mut hosts = Vec::new();
    for token in tokens(list).map_err(fail)? {
        expand_token(token, &mut hosts).map_err(fail)?;
    }
    Ok(hosts)
}

/// A step's nodes from `SLURM_STEP_NODELIST`, in its order (never sorted: the node ids follow
/// it). Refuses an empty list and a node listed twice, which would give two nodes the same
/// endpoints; Slurm never does either.
pub fn step_nodes(list: &str) -> Result<Vec<String>> {
    let hosts = expand(list)?;
    if hosts.is_empty() {
        return Err(Error::NoNodes);
    }
    let mut seen = std::collections::HashSet::with_capacity(hosts.len());
    if let Some(host) = hosts.iter().find(|h| !seen.insert(h.as_str())) {
        return Err(Error::NodeListedTwice {
            list: list.to_string(),
            host: host.clone(),
        });
    }
    Ok(hosts)
}

/// The host of each of a step's `tasks` tasks from a `SLURM_HOSTFILE` (one host per line or
/// comma separated; hostlist ranges allowed): the first `tasks` entries, in file order.
pub fn hostfile_task_hosts(text: &str, tasks: u32) -> Result<Vec<String>> {
    let mut hosts = expand(text)?;
    if hosts.len() < tasks as usize {
        return Err(Error::HostfileTooShort {
            entries: hosts.len(),
            tasks,
        });
    }
    hosts.truncate(tasks as usize);
    Ok(hosts)
}

/// Splits on separators outside brackets.
fn tokens(list: &str) -> std::result::Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut start = None;
    let mut in_bracket = false;
    for (i, c) in list.char_indices() {
        match c {
            '[' if in_bracket => return Err("nested '[' inside a bracket group".into()),
            '[' => in_bracket = true,
            ']' if !in_bracket => return Err("']' without a matching '['".into()),
            ']' => in_bracket = false,
            ',' | ' ' | '\t' | '\n' if !in_bracket => {
                if let Some(s) = start.take() {
                    out.push(&list[s..i]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    if in_bracket {
        return Err("'[' without a matching ']'".into());
    }
    if let Some(s) = start {
        out.push(&list[s..]);
    }
    Ok(out)
}

fn expand_token(token: &str, out: &mut Vec<String>) -> std::result::Result<(), String> {
    match token.rfind('[') {
        None => push(out, token.to_string()),
        Some(open) => {
            // Brackets are balanced and un-nested (checked by `tokens`), so `]` follows.
            let close = open + token[open..].find(']').expect("balanced");
            let ranges = parse_ranges(&token[open + 1..close])?;
            expand_groups(&token[..open], &ranges, &token[close + 1..], out)
        }
    }
}

/// Expands `prefix` (which may hold more bracket groups) around the innermost `ranges`.
fn expand_groups(
    prefix: &str,
    ranges: &[Range],
    suffix: &str,
    out: &mut Vec<String>,
) -> std::result::Result<(), String> {
    match prefix.rfind('[') {
        None => {
            for range in ranges {
                for n in range.lo..=range.hi {
                    let mut host =
                        String::with_capacity(prefix.len() + range.width + suffix.len() + 4);
                    host.push_str(prefix);
                    range.push(&mut host, n);
                    host.push_str(suffix);
                    push(out, host)?;
                }
            }
            Ok(())
        }
        Some(open) => {
            let close = open + prefix[open..].find(']').expect("balanced");
            let (head, tail) = (&prefix[..open], &prefix[close + 1..]);
            for range in parse_ranges(&prefix[open + 1..close])? {
                for n in range.lo..=range.hi {
                    let mut next = String::with_capacity(prefix.len() + 8);
                    next.push_str(head);
                    range.push(&mut next, n);
                    next.push_str(tail);
                    expand_groups(&next, ranges, suffix, out)?;
                }
            }
            Ok(())
        }
    }
}

fn push(out: &mut Vec<String>, host: String) -> std::result::Result<(), String> {
    if out.len() >= MAX_HOSTS {
        return Err(format!("expands to more than {MAX_HOSTS} hosts"));
    }
    out.push(host);
    Ok(())
}

/// One `LO-HI` (or `N`) range with its zero-padding width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub lo: u64,
    pub hi: u64,
    pub width: usize,
}

impl Range {
    fn push(&self, out: &mut String, n: u64) {
        push_decimal(out, n, self.width);
    }
}

/// Parses `r1,r2-r3,...` (the inside of a bracket group, or a port list).
pub fn parse_ranges(text: &str) -> std::result::Result<Vec<Range>, String> {
    text.split(',').map(parse_range).collect()
}

fn parse_range(text: &str) -> std::result::Result<Range, String> {
    if text.contains(['x', 'X']) {
        return Err(format!(
            "'{text}' is a multi-dimensional box; only 1-D hostlists are supported"
        ));
    }
    let (lo_text, hi_text) = text.split_once('-').unwrap_or((text, text));
    let lo = number(lo_text, text)?;
    let hi = number(hi_text, text)?;
    if lo > hi {
        return Err(format!(
            "invalid range '{text}': the low end is above the high end"
        ));
    }
    if hi - lo >= MAX_HOSTS as u64 {
        return Err(format!("range '{text}' has more than {MAX_HOSTS} values"));
    }
    Ok(Range {
        lo,
        hi,
        width: lo_text.len(),
    })
}

fn number(digits: &str, range: &str) -> std::result::Result<u64, String> {
    if !is_decimal(digits) {
        return Err(format!("'{range}' is not a number or a LO-HI range"));
    }
    digits
        .parse()
        .map_err(|_| format!("'{range}' has a number that is too large"))
}
