//! A task's variables written straight into the entries of its environment, instead of through
//! Slurm's `spank_setenv`, which formats each value into a fresh, zeroed 256 KB buffer and then
//! copies it into a `NAME=value` string (what that cost each task: docs/performance.md, "Cut in
//! 0.16.1"). slurmstepd makes each name the node's tasks will be given, empty,
//! in the step's environment before the forks ([`presets`]); each task's copy of that
//! environment then has an entry per name, which the task points at its own `NAME=value`
//! string, allocated as Slurm allocates every entry, so that Slurm (a TaskProlog that sets or
//! unsets the name) can still free it. A name with no entry is set through Slurm as before;
//! a preset name a task is not given is unset again ([`leftovers`]).
//!
//! A large value's string is made before the forks too, holding the first task's value
//! ([`PREMADE_BYTES`]): each task rewrites only the bytes where its own value differs
//! ([`rewrite`]; a task's TF_CONFIG differs from the first task's in its last few dozen bytes)
//! and hands that string over. The pages it leaves alone stay shared with slurmstepd: a fresh
//! 94 KB string cost each task two dozen page faults, most of its cost.

/// Whether `entry`, one `NAME=value` string of an environment, is `name`'s.
pub fn is_entry_of(entry: &[u8], name: &str) -> bool {
    entry.len() > name.len() && entry.starts_with(name.as_bytes()) && entry[name.len()] == b'='
}

/// Whether `entry` is `name`'s, still empty: the preset no one has written.
pub fn is_empty_entry_of(entry: &[u8], name: &str) -> bool {
    entry.len() == name.len() + 1 && is_entry_of(entry, name)
}

/// The names to make in the step's environment before the forks: each name the node's tasks
/// will be given (`given`, in their order, a name once) that the environment does not have
/// yet (`in_env`). A name the job has (its own TF_CONFIG, say) has its entry already, and a
/// preset must never replace a value of the job's.
pub fn presets<'a>(
    given: impl IntoIterator<Item = &'a str>,
    in_env: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in given {
        if !in_env(name) && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// The presets a task was not given (`given`): the task unsets each that is still empty, so
/// that its program sees no name tfcluster made and did not set.
pub fn leftovers<'a>(
    presets: &'a [String],
    given: &'a [&'a str],
) -> impl Iterator<Item = &'a str> + 'a {
    presets
        .iter()
        .map(String::as_str)
        .filter(move |name| !given.contains(name))
}

/// The values from which a string is made before the forks ([`rewrite`]): TF_CONFIG at any
/// scale worth it; short values cost less to copy than to compare.
pub const PREMADE_BYTES: usize = 4096;

/// Room left in a string made before the forks for a task whose value is longer than the
/// first task's (a larger index, a longer role name).
pub const PREMADE_SLACK: usize = 256;

/// Rewrites `entry`, whose first bytes are `name=` and whose length is its capacity, to hold
/// `name=value` and its NUL (`value_with_nul`), writing only from the first byte of the value
/// that differs from what it holds. The value's first `known_same` bytes are the caller's word
/// that they equal what the entry holds, and are neither read nor written: TF_CONFIG's head,
/// the same in every task rendered in one buffer (`tf_config_head` in
/// [`crate::core::plan::TaskEnv`]), which reading cost each task 50 to 100 µs (94 KB, twice).
/// `false`, and nothing written, where it does not fit.
pub fn rewrite(entry: &mut [u8], name: &str, value_with_nul: &str, known_same: usize) -> bool {
    let len = entry_len(name, value_with_nul);
    if len > entry.len() {
        return false;
    }
    let (start, value) = (name.len() + 1, value_with_nul.as_bytes());
    // The NUL is always compared: a head never holds it.
    let known = known_same.min(value.len().saturating_sub(1));
    let same = known + common_prefix(&entry[start + known..len], &value[known..]);
    entry[start + same..len].copy_from_slice(&value[same..]);
    true
}

/// The length of the longest common prefix of `a` and `b`, found a block at a time (slice
/// equality is the C library's `memcmp`): byte by byte, 94 KB took a task tens of µs.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 1024;
    let whole = a
        .chunks(BLOCK)
        .zip(b.chunks(BLOCK))
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len())
        .sum::<usize>();
    whole
        + a[whole..]
            .iter()
            .zip(&b[whole..])
            .take_while(|(x, y)| x == y)
            .count()
}

/// The length of `name=value` with its NUL, for `value_with_nul` (which ends in its NUL).
pub fn entry_len(name: &str, value_with_nul: &str) -> usize {
    name.len() + 1 + value_with_nul.len()
}

/// Writes `name=value` and its NUL into `out`, exactly [`entry_len`] bytes long.
pub fn write_entry(out: &mut [u8], name: &str, value_with_nul: &str) {
    let (head, value) = out.split_at_mut(name.len() + 1);
    head[..name.len()].copy_from_slice(name.as_bytes());
    head[name.len()] = b'=';
    value.copy_from_slice(value_with_nul.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_a_names_when_its_name_is_followed_by_the_equals_sign() {
        #[rustfmt::skip]
        let rows: [(&str, &str, bool, bool); 7] = [
            // entry,            name,         is_entry_of, is_empty_entry_of
            ("TF_CONFIG={}",     "TF_CONFIG",  true,        false),
            ("TF_CONFIG=",       "TF_CONFIG",  true,        true),
            ("TF_CONFIG_X=1",    "TF_CONFIG",  false,       false),
            ("TF_CONFIG",        "TF_CONFIG",  false,       false),
            ("TF_CONFI=1",       "TF_CONFIG",  false,       false),
            ("X_TF_CONFIG=1",    "TF_CONFIG",  false,       false),
            ("",                 "TF_CONFIG",  false,       false),
        ];
        for (entry, name, of, empty) in rows {
            assert_eq!(is_entry_of(entry.as_bytes(), name), of, "{entry} {name}");
            assert_eq!(
                is_empty_entry_of(entry.as_bytes(), name),
                empty,
                "{entry} {name}"
            );
        }
    }

    #[test]
    fn presets_are_the_given_names_the_environment_lacks_each_once() {
        #[rustfmt::skip]
        let rows: [(&[&str], &[&str], &[&str]); 4] = [
            // given,                                   in the environment,  presets
            (&["TF_CONFIG", "CUDA_VISIBLE_DEVICES"],    &[],                 &["TF_CONFIG", "CUDA_VISIBLE_DEVICES"]),
            (&["TF_CONFIG", "CUDA_VISIBLE_DEVICES"],    &["TF_CONFIG"],      &["CUDA_VISIBLE_DEVICES"]),
            (&["TF_CONFIG", "TF_CONFIG"],               &[],                 &["TF_CONFIG"]),
            (&[],                                       &[],                 &[]),
        ];
        for (given, env, want) in rows {
            let got = presets(given.iter().copied(), |n| env.contains(&n));
            assert_eq!(got, want, "{given:?} {env:?}");
        }
    }

    #[test]
    fn a_preset_a_task_was_not_given_is_left_over() {
        #[rustfmt::skip]
        let rows: [(&[&str], &[&str], &[&str]); 3] = [
            // presets,                                  given,            left over
            (&["TF_CONFIG", "APPTAINERENV_TF_CONFIG"],   &["TF_CONFIG"],   &["APPTAINERENV_TF_CONFIG"]),
            (&["TF_CONFIG"],                             &["TF_CONFIG"],   &[]),
            (&[],                                        &["TF_CONFIG"],   &[]),
        ];
        for (presets, given, want) in rows {
            let presets: Vec<String> = presets.iter().map(|s| s.to_string()).collect();
            let got: Vec<&str> = leftovers(&presets, given).collect();
            assert_eq!(got, want, "{presets:?} {given:?}");
        }
    }

    #[test]
    fn the_common_prefix_is_found_across_blocks() {
        let long: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for at in [0, 1, 1023, 1024, 1025, 4096, 4999] {
            let mut other = long.clone();
            other[at] ^= 0xff;
            assert_eq!(common_prefix(&long, &other), at, "{at}");
            assert_eq!(
                common_prefix(&long[..at], &long),
                at,
                "{at}: one is shorter"
            );
        }
        assert_eq!(common_prefix(&long, &long), long.len());
    }

    #[test]
    fn a_rewrite_writes_only_where_the_value_differs() {
        // held (name=value\0), capacity, the new value, known the same, the entry after, bytes
        // written
        type Row = (
            &'static str,
            usize,
            &'static str,
            usize,
            Option<&'static str>,
            usize,
        );
        #[rustfmt::skip]
        let rows: [Row; 9] = [
            ("X=abcd\0",             8,        "abXY\0",      0,  Some("X=abXY\0"),   3),
            ("X=abcd\0",             8,        "abcd\0",      0,  Some("X=abcd\0"),   0),
            ("X=abcd\0",             9,        "abcdef\0",    0,  Some("X=abcdef\0"), 3),
            ("X=abcd\0",             8,        "ab\0",        0,  Some("X=ab\0"),     1),
            ("X=abcd\0",             8,        "abcdefg\0",   0,  None,               0),
            // TF_CONFIG's head, known the same: the rest is compared as before.
            ("X=abcd\0",             8,        "abXY\0",      2,  Some("X=abXY\0"),   3),
            ("X=abcd\0",             8,        "abcd\0",      2,  Some("X=abcd\0"),   0),
            // The caller's word is kept: the known bytes are not read, nor written.
            ("X=abcd\0",             8,        "zzXY\0",      2,  Some("X=abXY\0"),   3),
            // A word longer than the value is cut to it, short of its NUL.
            ("X=abcd\0",             8,        "ab\0",        9,  Some("X=ab\0"),     1),
        ];
        for (held, capacity, value, known, after, written) in rows {
            let mut entry = vec![0xffu8; capacity];
            entry[..held.len()].copy_from_slice(held.as_bytes());
            let before = entry.clone();
            let fits = rewrite(&mut entry, "X", value, known);
            assert_eq!(fits, after.is_some(), "{held} {value}");
            if let Some(after) = after {
                assert_eq!(&entry[..after.len()], after.as_bytes(), "{held} {value}");
            }
            let changed = entry.iter().zip(&before).filter(|(a, b)| a != b).count();
            assert!(
                changed <= written,
                "{held} {value}: {changed} bytes changed"
            );
        }
    }

    #[test]
    fn an_entry_is_the_name_the_equals_sign_and_the_value_with_its_nul() {
        for (name, value) in [("TF_CONFIG", "{\"a\":1}\0"), ("X", "\0")] {
            let mut out = vec![0xffu8; entry_len(name, value)];
            write_entry(&mut out, name, value);
            assert_eq!(out, format!("{name}={value}").into_bytes());
        }
    }
}
