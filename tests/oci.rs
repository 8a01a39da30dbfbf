//! oci.conf's `EnvExclude` ([`tfcluster::core::oci`]): the pattern as Slurm reads it from the
//! file, and which of a task's variables it removes, matched by libc's POSIX extended
//! expressions as slurmstepd matches them (the cluster test is in tests/containers.rs).

use std::borrow::Cow;
use std::path::Path;
use tfcluster::core::oci;
use tfcluster::core::topology::ConfFile;
use tfcluster::spank::regex::Regex;

/// (oci.conf's text, the pattern Slurm reads from it)
#[rustfmt::skip]
const FILES: &[(&str, Option<&str>)] = &[
    ("",                                                        None),
    ("RunTimeRun=\"runc run %n.%u.%j -b %b\"\n",                None),
    ("EnvExclude=^TF_\n",                                       Some("^TF_")),
    ("envexclude=\"^(TF_|CUDA_)\"\n",                           Some("^(TF_|CUDA_)")),
    ("EnvExclude=\"^(A|B) C=\" RunTimeEnvExclude=^X\n",         Some("^(A|B) C=")),
    ("RunTimeEnvExclude=^TF_\n",                                None),
    ("# EnvExclude=^TF_\n",                                     None),
    ("EnvExclude=^TF_ # a comment\n",                           Some("^TF_")),
    ("EnvExclude=^A\\#B\n",                                     Some("^A#B")),
    ("EnvExclude=^A\nEnvExclude=^B\n",                          Some("^B")),
    ("EnvExclude=\n",                                           None),
];

#[test]
fn the_pattern_is_read_as_slurm_reads_it() {
    for (text, want) in FILES {
        assert_eq!(oci::env_exclude(text).as_deref(), *want, "{text:?}");
    }
}

#[test]
fn the_file_lies_beside_slurm_conf_and_may_be_missing() {
    let read = |path: &Path| match path.to_str() {
        Some("/etc/slurm/oci.conf") => ConfFile::Text("EnvExclude=^TF_\n".into()),
        Some("/var/spool/slurmd/conf-cache/oci.conf") => ConfFile::Missing,
        _ => ConfFile::Unreadable("permission denied".into()),
    };
    #[rustfmt::skip]
    let cases: &[(&str, Option<&str>)] = &[
        ("/etc/slurm/slurm.conf",                      Some("^TF_")),
        ("/var/spool/slurmd/conf-cache/slurm.conf",    None),
        ("/elsewhere/slurm.conf",                      None),
    ];
    for (slurm_conf, want) in cases {
        assert_eq!(
            oci::node_env_exclude(Path::new(slurm_conf), read).as_deref(),
            *want,
            "{slurm_conf}"
        );
    }
}

/// (EnvExclude, the names it removes from a task that has these variables)
#[rustfmt::skip]
const MATCHES: &[(&str, &[&str])] = &[
    ("^TF_",                              &["TF_CONFIG", "TF_USE_LEGACY_KERAS"]),
    ("^TF_CONFIG=",                       &["TF_CONFIG"]),
    ("TF_CONFIG",                         &["TF_CONFIG", "APPTAINERENV_TF_CONFIG"]),
    ("^(TF_|CUDA_)",                      &["TF_CONFIG", "CUDA_VISIBLE_DEVICES", "TF_USE_LEGACY_KERAS"]),
    ("^(SLURM_CONF|SLURM_CONF_SERVER)=",  &[]),
    ("worker",                            &["TF_CONFIG", "APPTAINERENV_TF_CONFIG"]),
    ("^CUDA_VISIBLE_DEVICES=$",           &[]),
    ("^CUDA_VISIBLE_DEVICES=[0-9]+$",     &["CUDA_VISIBLE_DEVICES"]),
];

#[test]
fn each_variable_is_matched_as_name_equals_value() {
    let set: Vec<(&'static str, Cow<str>)> = vec![
        (
            "TF_CONFIG",
            Cow::Borrowed("{\"cluster\":{\"worker\":[\"a:1\"]}}\0"),
        ),
        ("CUDA_VISIBLE_DEVICES", Cow::Borrowed("0\0")),
        ("TF_USE_LEGACY_KERAS", Cow::Borrowed("1\0")),
        (
            "APPTAINERENV_TF_CONFIG",
            Cow::Borrowed("{\"cluster\":{\"worker\":[\"a:1\"]}}\0"),
        ),
    ];
    for (pattern, want) in MATCHES {
        let regex = Regex::new(pattern).unwrap();
        assert_eq!(
            oci::excluded(&set, |text| regex.is_match(text)),
            *want,
            "{pattern}"
        );
    }
}

#[test]
fn a_pattern_that_does_not_compile_is_refused() {
    for bad in ["(", "[a-", "a{2,1}"] {
        assert!(Regex::new(bad).is_err(), "{bad}");
    }
}
