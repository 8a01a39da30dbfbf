//! Slurm's oci.conf, as far as it decides what reaches a `--container` step's tasks. Two of
//! its settings can keep tfcluster's variables from the program, and srun would exit 0 while
//! every task trains alone:
//!
//! - From 23.02, `EnvExclude` is a POSIX extended regular expression that slurmstepd matches
//!   against each `NAME=value` string of the step's environment after every plugin's
//!   `task_init`, removing every string it matches (Slurm's `env_array_exclude`, called in
//!   container.c as the runtime starts). The pattern itself is run by the shell (libc's regcomp
//!   and regexec, as Slurm does).
//! - With `IgnoreFileConfigJson=true` (23.02 and later) no config.json carries the task's
//!   environment, and slurmstepd starts the runtime (`RunTimeRun`, or `RunTimeCreate` then
//!   `RunTimeStart`) with `execv`, that is with slurmstepd's own environment: the task's
//!   variables reach it only through the file `CreateEnvFile` writes (the pattern's `%e`).
//!   Slurm's own Singularity example (`singularity exec --userns %r %@`) is this case.
//!
//! The file lies beside slurm.conf (also in configless mode, where slurmd caches both). Each
//! node reads its own, bounded as slurm.conf is.

use super::topology::{ConfFile, MAX_CONF_BYTES};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// The file's name, beside slurm.conf.
pub const FILE: &str = "oci.conf";

/// Where the node's oci.conf is, given its slurm.conf.
pub fn path(slurm_conf: &Path) -> PathBuf {
    slurm_conf.parent().unwrap_or(Path::new("/")).join(FILE)
}

/// What a node's oci.conf says about its container steps' environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OciConf {
    /// `EnvExclude`, when set and not empty.
    pub env_exclude: Option<String>,
    /// `IgnoreFileConfigJson`, a boolean as Slurm reads one (`yes`, `true`, `up`, `1`, in any
    /// case; anything else is false here, and Slurm refuses what it cannot read).
    pub ignores_config_json: bool,
    /// `CreateEnvFile`: whether Slurm writes the task's environment to a file (`null`,
    /// `newline`, and the old `true`, `y`, `yes`, `1`; its default is `disabled`).
    pub creates_env_file: bool,
}

impl OciConf {
    /// oci.conf's text, as Slurm reads it: keys are case-insensitive, `#` starts a comment
    /// unless escaped (`\#`), a value in double quotes may hold spaces, and a later line wins.
    pub fn parse(text: &str) -> OciConf {
        let mut conf = OciConf::default();
        for line in text.lines() {
            let line = uncommented(line);
            let mut rest = line.trim_start();
            while !rest.is_empty() {
                let (word, after) = next_word(rest);
                if let Some((key, value)) = word.split_once('=') {
                    let is = |name: &str| key.eq_ignore_ascii_case(name);
                    let one_of =
                        |words: &[&str]| words.iter().any(|w| value.eq_ignore_ascii_case(w));
                    if is("EnvExclude") {
                        conf.env_exclude = Some(value.to_string()).filter(|p| !p.is_empty());
                    } else if is("IgnoreFileConfigJson") {
                        conf.ignores_config_json = one_of(&["yes", "true", "up", "1"]);
                    } else if is("CreateEnvFile") {
                        conf.creates_env_file =
                            one_of(&["null", "newline", "true", "y", "yes", "1"]);
                    }
                }
                rest = after.trim_start();
            }
        }
        conf
    }

    /// Whether the runtime starts with none of the task's variables: no config.json carries
    /// them and no file holds them.
    pub fn loses_task_env(&self) -> bool {
        self.ignores_config_json && !self.creates_env_file
    }
}

/// The node's oci.conf, beside `slurm_conf`, read through `read`; `None` without the file or a
/// readable file of at most [`MAX_CONF_BYTES`] (then Slurm itself fails the container step).
pub fn node_conf(slurm_conf: &Path, read: impl Fn(&Path) -> ConfFile) -> Option<OciConf> {
    match read(&path(slurm_conf)) {
        ConfFile::Text(text) if text.len() <= MAX_CONF_BYTES => Some(OciConf::parse(&text)),
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
