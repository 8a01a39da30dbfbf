//! oci.conf ([`tfcluster::core::oci`]): the settings that decide what reaches a container, as
//! Slurm reads them from the file, and which of a task's variables `EnvExclude` removes,
//! matched by libc's POSIX extended expressions as slurmstepd matches them (the cluster tests
//! are in tests/containers.rs).

use std::borrow::Cow;
use std::path::Path;
use tfcluster::core::oci::{self, OciConf};
use tfcluster::core::topology::ConfFile;
use tfcluster::spank::regex::Regex;

/// oci.conf's text, and what Slurm reads from it.
struct File {
    text: &'static str,
    env_exclude: Option<&'static str>,
    ignores_config_json: bool,
    creates_env_file: bool,
    /// The runtime starts without the task's environment.
    loses_task_env: bool,
}

#[rustfmt::skip]
const FILES: &[File] = &[
    File { text: "",                                                 env_exclude: None,                 ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "RunTimeRun=\"runc run %n.%u.%j -b %b\"\n",          env_exclude: None,                 ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "EnvExclude=^TF_\n",                                env_exclude: Some("^TF_"),         ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "envexclude=\"^(TF_|CUDA_)\"\n",                    env_exclude: Some("^(TF_|CUDA_)"), ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "EnvExclude=\"^(A|B) C=\" RunTimeEnvExclude=^X\n",  env_exclude: Some("^(A|B) C="),    ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "RunTimeEnvExclude=^TF_\n",                         env_exclude: None,                 ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "# EnvExclude=^TF_\n",                              env_exclude: None,                 ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "EnvExclude=^TF_ # a comment\n",                    env_exclude: Some("^TF_"),         ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "EnvExclude=^A\\#B\n",                              env_exclude: Some("^A#B"),         ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "EnvExclude=^A\nEnvExclude=^B\n",                    env_exclude: Some("^B"),           ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "EnvExclude=\n",                                    env_exclude: None,                 ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "IgnoreFileConfigJson=true\n",                      env_exclude: None,                 ignores_config_json: true,  creates_env_file: false, loses_task_env: true  },
    File { text: "ignorefileconfigjson=YES RunTimeRun=\"x %@\"\n",    env_exclude: None,                 ignores_config_json: true,  creates_env_file: false, loses_task_env: true  },
    File { text: "IgnoreFileConfigJson=1\nCreateEnvFile=disabled\n",  env_exclude: None,                 ignores_config_json: true,  creates_env_file: false, loses_task_env: true  },
    File { text: "IgnoreFileConfigJson=true\nCreateEnvFile=false\n",  env_exclude: None,                 ignores_config_json: true,  creates_env_file: false, loses_task_env: true  },
    File { text: "IgnoreFileConfigJson=true\nCreateEnvFile=newline\n",env_exclude: None,                 ignores_config_json: true,  creates_env_file: true,  loses_task_env: false },
    File { text: "IgnoreFileConfigJson=true\nCreateEnvFile=null\n",   env_exclude: None,                 ignores_config_json: true,  creates_env_file: true,  loses_task_env: false },
    File { text: "IgnoreFileConfigJson=true\nCreateEnvFile=true\n",   env_exclude: None,                 ignores_config_json: true,  creates_env_file: true,  loses_task_env: false },
    File { text: "IgnoreFileConfigJson=false\n",                     env_exclude: None,                 ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "# IgnoreFileConfigJson=true\n",                    env_exclude: None,                 ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "IgnoreFileConfigJson=true\nIgnoreFileConfigJson=no\n", env_exclude: None,             ignores_config_json: false, creates_env_file: false, loses_task_env: false },
    File { text: "CreateEnvFile=newline\n",                          env_exclude: None,                 ignores_config_json: false, creates_env_file: true,  loses_task_env: false },
];

#[test]
fn the_settings_are_read_as_slurm_reads_them() {
    for file in FILES {
        let conf = OciConf::parse(file.text);
        let want = OciConf {
            env_exclude: file.env_exclude.map(String::from),
            ignores_config_json: file.ignores_config_json,
            creates_env_file: file.creates_env_file,
        };
        assert_eq!(conf, want, "{:?}", file.text);
        assert_eq!(
            conf.loses_task_env(),
            file.loses_task_env,
            "{:?}",
            file.text
        );
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
        let conf = oci::node_conf(Path::new(slurm_conf), read);
        assert_eq!(
            conf.and_then(|c| c.env_exclude).as_deref(),
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
