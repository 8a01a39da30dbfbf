//! Slurm's oci.conf, as far as it decides what reaches a `--container` step's tasks. From 23.02,
//! `EnvExclude` is a POSIX extended regular expression that slurmstepd matches against each
//! `NAME=value` string of the step's environment after every plugin's `task_init`, removing
//! every string it matches (Slurm's `env_array_exclude`, called in container.c as the runtime
//! starts), so a site's pattern can strip TF_CONFIG from every task: they would train alone, and
//! srun would exit 0. The file lies beside slurm.conf (also in configless mode, where slurmd
//! caches both). Each node reads its own, bounded as slurm.conf is; the pattern itself is run by
//! the shell (libc's regcomp and regexec, as Slurm does).

use super::topology::{ConfFile, MAX_CONF_BYTES};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// The file's name, beside slurm.conf.
pub const FILE: &str = "oci.conf";

/// Where the node's oci.conf is, given its slurm.conf.
pub fn path(slurm_conf: &Path) -> PathBuf {
    slurm_conf.parent().unwrap_or(Path::new("/")).join(FILE)
}

/// The `EnvExclude` pattern of oci.conf's text: keys are case-insensitive, `#` starts a
/// comment unless escaped (`\#`), a value in double quotes may hold spaces, and a later line
/// wins.
pub fn env_exclude(text: &str) -> Option<String> {
    let mut pattern = None;
    for line in text.lines() {
        let line = uncommented(line);
        let mut rest = line.trim_start();
        while !rest.is_empty() {
            let (word, after) = next_word(rest);
            if let Some((key, value)) = word.split_once('=') {
                if key.eq_ignore_ascii_case("EnvExclude") {
                    pattern = Some(value.to_string());
                }
            }
            rest = after.trim_start();
        }
    }
    pattern.filter(|p| !p.is_empty())
}

/// The node's `EnvExclude` pattern, from the oci.conf beside `slurm_conf` read through `read`;
/// `None` without the file, the key, or a readable file of at most [`MAX_CONF_BYTES`] (then
/// Slurm itself fails the container step).
pub fn node_env_exclude(slurm_conf: &Path, read: impl Fn(&Path) -> ConfFile) -> Option<String> {
    match read(&path(slurm_conf)) {
        ConfFile::Text(text) if text.len() <= MAX_CONF_BYTES => env_exclude(&text),
        _ => None,
    }
}

/// The names among a task's variables (`NAME`, `value` with its NUL) whose `NAME=value` string
/// `matches` (the pattern, run by the shell): what Slurm will remove before the program starts.
pub fn excluded(
    set: &[(&'static str, Cow<'_, str>)],
    mut matches: impl FnMut(&str) -> bool,
) -> Vec<&'static str> {
    set.iter()
        .filter(|(name, value)| {
            let value = value.strip_suffix('\0').unwrap_or(value);
            matches(&format!("{name}={value}"))
        })
        .map(|(name, _)| *name)
        .collect()
}

/// The line up to an unescaped `#` (a `\#` stays, as `#`).
fn uncommented(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'#') => {
                out.push('#');
                chars.next();
            }
            '#' => break,
            c => out.push(c),
        }
    }
    out
}

/// The first `Key=value` word of `text` and what follows it; a value in double quotes ends at
/// the closing quote (the quotes are not part of it).
fn next_word(text: &str) -> (String, &str) {
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    let Some(eq) = text[..end].find('=') else {
        return (text[..end].to_string(), &text[end..]);
    };
    let value = &text[eq + 1..];
    if let Some(quoted) = value.strip_prefix('"') {
        let close = quoted.find('"').unwrap_or(quoted.len());
        let word = format!("{}{}", &text[..=eq], &quoted[..close]);
        let after = quoted.get(close + 1..).unwrap_or("");
        return (word, after);
    }
    (text[..end].to_string(), &text[end..])
}
