//! A task's variables written straight into the entries of its environment, instead of through
//! Slurm's `spank_setenv`, which formats each value into a fresh 256 KB buffer and copies it
//! twice more: for a 94 KB TF_CONFIG, 55 to 210 µs per task and variable, and 26 µs for a short
//! one (docs/performance.md). slurmstepd makes each name the node's tasks will be given, empty,
//! in the step's environment before the forks ([`presets`]); each task's copy of that
//! environment then has an entry per name, which the task points at its own `NAME=value`
//! string, allocated as Slurm allocates every entry, so that Slurm (a TaskProlog that sets or
//! unsets the name) can still free it. A name with no entry is set through Slurm as before;
//! a preset name a task is not given is unset again ([`leftovers`]).

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
    fn an_entry_is_the_name_the_equals_sign_and_the_value_with_its_nul() {
        for (name, value) in [("TF_CONFIG", "{\"a\":1}\0"), ("X", "\0")] {
            let mut out = vec![0xffu8; entry_len(name, value)];
            write_entry(&mut out, name, value);
            assert_eq!(out, format!("{name}={value}").into_bytes());
        }
    }
}
