//! `--tf-cluster=check` (src/core/check.rs): what a node's line says from what the node found,
//! and when it fails (srun then exits non-zero). The check itself runs on the test cluster, on
//! every release, with a node made wrong in each way (tests/isolation.rs
//! `the_check_names_what_is_wrong_with_each_node`).

use tfcluster::core::check::{
    asked, mapped_file, run_dir_note, slurmd_copy, Entry, FileId, Isolation, NodeCheck, Slurmd,
};
use tfcluster::core::container::{ApptainerEnv, Runtimes};
use tfcluster::core::gpu_affinity::{Contiguous, CpuSet, PciGpu, PciGpus};
use tfcluster::core::oci::OciConf;
use tfcluster::core::run_dir::Found;

const OURS: FileId = FileId {
    major: 0xfd,
    minor: 1,
    inode: 4242,
};

#[rustfmt::skip]
#[test]
fn the_option_asks_for_the_check() {
    let cases: &[(Option<&str>, bool)] = &[
        (Some("check"),   true),
        (Some(" check "), true),
        (Some("checks"),  false),
        (Some("worker:*"), false),
        (None,            false),
    ];
    for (arg, want) in cases {
        assert_eq!(asked(*arg), *want, "{arg:?}");
    }
}

/// Lines of `/proc/PID/maps`: the file each maps, if any.
#[rustfmt::skip]
#[test]
fn a_maps_line_names_its_file() {
    let cases: &[(&str, Option<(FileId, &str)>)] = &[
        ("7f00-7f10 r-xp 00000000 fd:01 4242 /usr/lib/slurm/spank_tfcluster.so",
            Some((OURS, "/usr/lib/slurm/spank_tfcluster.so"))),
        ("7f00-7f10 r-xp 00000000 fd:01 4241 /usr/lib/slurm/spank_tfcluster.so (deleted)",
            Some((FileId { inode: 4241, ..OURS }, "/usr/lib/slurm/spank_tfcluster.so (deleted)"))),
        ("7f00-7f10 r--p 00000000 103:0a 7 /lib/x86_64-linux-gnu/libc.so.6",
            Some((FileId { major: 0x103, minor: 0xa, inode: 7 }, "/lib/x86_64-linux-gnu/libc.so.6"))),
        ("7f00-7f10 rw-p 00000000 00:00 0 ",                       None),
        ("7ffd-7ffe rw-p 00000000 00:00 0                          [stack]", None),
        ("garbage",                                                None),
    ];
    for (line, want) in cases {
        assert_eq!(mapped_file(line), *want, "{line}");
    }
}

/// What slurmd loaded, from its maps, against the file the step loaded.
#[rustfmt::skip]
#[test]
fn what_slurmd_loaded() {
    let libc = "7f00-7f10 r--p 00000000 fd:01 7 /lib/x86_64-linux-gnu/libc.so.6\n";
    let cases: &[(&str, String, Slurmd)] = &[
        ("the same file",          format!("{libc}7f00-7f10 r-xp 00000000 fd:01 4242 /usr/lib/slurm/spank_tfcluster.so\n"),
            Slurmd::ThisFile),
        ("the file since replaced", format!("{libc}7f00-7f10 r-xp 00000000 fd:01 4100 /usr/lib/slurm/spank_tfcluster.so (deleted)\n"),
            Slurmd::OtherCopy("/usr/lib/slurm/spank_tfcluster.so (deleted)".into())),
        ("another path",           format!("{libc}7f00-7f10 r-xp 00000000 fd:01 99 /opt/old/libtfcluster.so\n"),
            Slurmd::OtherCopy("/opt/old/libtfcluster.so".into())),
        ("no tfcluster",           libc.to_string(),
            Slurmd::NotLoaded),
    ];
    for (what, maps, want) in cases {
        assert_eq!(slurmd_copy(maps, OURS), *want, "{what}");
    }
}

/// A note expected of an entry: what it says, and whether the node then fails.
type Note = Option<(&'static str, bool)>;

/// What is found under /run/tfcluster: (path, entry, note expected).
#[rustfmt::skip]
#[test]
fn what_is_not_as_tfcluster_leaves_it() {
    let dir = |uid, mode| Entry::Dir(Found::Dir { uid, mode });
    let cases: &[(&str, Entry, Note)] = &[
        ("/run/tfcluster",              dir(0, 0o700),                        None),
        ("/run/tfcluster",              Entry::Dir(Found::Missing),           None),
        ("/run/tfcluster",              dir(0, 0o755),                        Some(("open to other users: the next step closes it", false))),
        ("/run/tfcluster/held",         dir(1000, 0o700),                     Some(("belongs to uid 1000", true))),
        ("/run/tfcluster/held",         Entry::Dir(Found::Other),             Some(("is not a directory", true))),
        ("/run/tfcluster/claims/.lock", Entry::File { uid: 0, mode: 0o600 },  None),
        ("/run/tfcluster/claims/.lock", Entry::File { uid: 0, mode: 0o644 },  Some(("can be opened by other users", false))),
        ("/run/tfcluster/claims/x",     Entry::File { uid: 1000, mode: 0o600 }, Some(("belongs to uid 1000", true))),
        ("/run/tfcluster/claims/x",     Entry::Other,                         Some(("neither a file nor a directory", true))),
        // Another job's files are named without its ids.
        ("/run/tfcluster/held/n9/57/step_57.0", Entry::File { uid: 1000, mode: 0o600 }, Some(("/run/tfcluster/held/n9/N/step_N.N belongs to uid 1000", true))),
    ];
    for (path, entry, want) in cases {
        let got = run_dir_note(path, entry);
        match (want, &got) {
            (None, None) => {}
            (Some((says, refuses)), Some((note, r))) => {
                assert!(note.contains(path) || note.contains(says), "{path}: {note}");
                assert!(note.contains(says), "{path}: {note}");
                assert_eq!(r, refuses, "{path}: {note}");
            }
            _ => panic!("{path} {entry:?}: {got:?}"),
        }
    }
}

/// One node's check: what it found, and what its line must say.
#[derive(Clone)]
struct Row {
    what: &'static str,
    srun: Option<&'static str>,
    srun_isolates: Option<bool>,
    /// srun's plugstack.conf words, when told; the node's are [`LINE`].
    srun_line: Option<&'static str>,
    slurmd: Slurmd,
    claims: Result<(), &'static str>,
    /// The steps using tfcluster on the node, and whether the check's user is root.
    steps: (&'static [(u32, u32)], bool),
    settings: Result<(), &'static str>,
    isolation: Isolation,
    gpus: Option<Result<PciGpus, Contiguous>>,
    apptainer: (ApptainerEnv, Runtimes),
    oci: Option<OciConf>,
    run_dir: &'static [(&'static str, bool)],
    says: &'static [&'static str],
    fails: bool,
}

const COPY: &str = "0.12.0 24.11";
/// The node's plugstack.conf words.
const LINE: [&str; 2] = ["isolate=yes", "port_range=20000-32767"];
const NONE: (ApptainerEnv, Runtimes) = (ApptainerEnv::Found, Runtimes::NONE);

/// A node's GPUs, each given by its local CPUs (`None`: the kernel does not say).
fn gpus(near: &[Option<&str>]) -> Option<Result<PciGpus, Contiguous>> {
    let gpu = |(n, cpus): (usize, &Option<&str>)| PciGpu {
        address: format!("0000:{n:02x}:00.0"),
        cpus: cpus.and_then(CpuSet::parse_list),
        uuid: None,
        minor: None,
    };
    Some(Ok(PciGpus(near.iter().enumerate().map(gpu).collect())))
}
const APPTAINER: Runtimes = Runtimes {
    apptainer: true,
    singularity: false,
};

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    let ok = Row { what: "", srun: Some(COPY), srun_isolates: Some(true), srun_line: Some("isolate=yes port_range=20000-32767"), slurmd: Slurmd::ThisFile, claims: Ok(()), steps: (&[], false), settings: Ok(()), isolation: Isolation::Works { held: true },
                   gpus: None, apptainer: NONE, oci: None, run_dir: &[], says: &[], fails: false };
    vec![
        Row { what: "all as installed", says: &["check n9: tfcluster 0.12.0 built for Slurm 24.11 | srun: the same | slurmd: this file", "steps using tfcluster: none",
                "plugstack.conf: the same line as srun's host", "isolate=yes: works; ended tables held by the job's extern step", "Apptainer's names: none", "oci.conf: none",
                "/run/tfcluster: as tfcluster leaves it | ok"], ..ok.clone() },
        Row { what: "srun's host runs another version", srun: Some("0.10.0 24.11"), says: &["srun: 0.10.0 24.11",
                "NOT OK: srun's host runs tfcluster 0.10.0 24.11: install the same version"], fails: true, ..ok.clone() },
        Row { what: "srun did not say", srun: None, says: &["srun: not told"], ..ok.clone() },
        Row { what: "slurmd runs the replaced file", slurmd: Slurmd::OtherCopy("/usr/lib/slurm/spank_tfcluster.so (deleted)".into()),
                says: &["slurmd: another copy, /usr/lib/slurm/spank_tfcluster.so (deleted)", "NOT OK: slurmd runs another copy: restart slurmd"], fails: true, ..ok.clone() },
        Row { what: "slurmd has not loaded it", slurmd: Slurmd::NotLoaded,
                says: &["slurmd: not loaded", "NOT OK: slurmd has not loaded tfcluster: restart slurmd"], fails: true, ..ok.clone() },
        Row { what: "no slurmd found", slurmd: Slurmd::NotFound, says: &["NOT OK: no slurmd of this node was found"], fails: true, ..ok.clone() },
        Row { what: "several slurmd", slurmd: Slurmd::Several(2), says: &["slurmd: 2 processes, not told apart", "| ok"], ..ok.clone() },
        Row { what: "bad settings", settings: Err("port_range: 'x' is not FIRST-LAST"), isolation: Isolation::Off,
                says: &["isolate: off", "NOT OK: plugstack.conf: port_range: 'x' is not FIRST-LAST"], fails: true, ..ok.clone() },
        Row { what: "isolation refused", isolation: Isolation::Refused("SYN cookies".into()),
                says: &["isolate=yes: refused", "NOT OK: isolate=yes: SYN cookies"], fails: true, ..ok.clone() },
        Row { what: "no Contain", isolation: Isolation::Works { held: false },
                says: &["WARNING: no PrologFlags=Contain in slurm.conf", "opens those steps' other nodes to other users on this node; set PrologFlags=Contain", "| ok"], ..ok.clone() },
        Row { what: "another port_range than srun's host's", srun_line: Some("isolate=yes port_range=20000-30000"),
                says: &["plugstack.conf: another line than srun's host", "NOT OK: this node's plugstack.conf line differs from srun's host's: port_range (srun's host: 20000-30000, here: 20000-32767); make the line the same on every node and login node, then restart slurmd"], fails: true, ..ok.clone() },
        Row { what: "a setting srun's host's line lacks", srun_line: Some("port_range=20000-32767"),
                says: &["differs from srun's host's: isolate (srun's host: unset, here: yes)"], fails: true, ..ok.clone() },
        Row { what: "the same settings in another order", srun_line: Some("port_range=20000-32767 isolate=yes"), says: &["plugstack.conf: the same line", "| ok"], ..ok.clone() },
        Row { what: "srun did not say its line", srun_line: None, says: &["| ok"], ..ok.clone() },
        Row { what: "steps running, a user asks", steps: (&[(13, 1), (12, 0)], false), says: &["| steps using tfcluster: 2 |", "| ok"], ..ok.clone() },
        Row { what: "steps running, root asks",   steps: (&[(13, 1), (12, 0)], true),  says: &["| steps using tfcluster: 2 (12.0, 13.1) |", "| ok"], ..ok.clone() },
        Row { what: "isolation off here and at srun", isolation: Isolation::Off, srun_isolates: Some(false), says: &["isolate: off", "| ok"], ..ok.clone() },
        Row { what: "isolation off here, on at srun", isolation: Isolation::Off,
                says: &["NOT OK: srun's plugstack.conf line sets isolate=yes and this node's does not: its steps run unprotected"], fails: true, ..ok.clone() },
        Row { what: "isolation off here, srun did not say", isolation: Isolation::Off, srun_isolates: None, says: &["| ok"], ..ok.clone() },
        Row { what: "claims' lock held", claims: Err("cannot take /run/tfcluster/claims/n9/.lock within 5 s"),
                says: &["NOT OK: the node's port claims: cannot take /run/tfcluster/claims/n9/.lock within 5 s"], fails: true, ..ok.clone() },
        Row { what: "GPUs in Slurm's order", says: &["| GPUs: in Slurm's order (gpu_affinity=no or gpus=keep) |", "| ok"], ..ok.clone() },
        Row { what: "GPUs on two sockets", gpus: gpus(&[Some("0-7"), Some("0-7"), Some("8-15"), Some("8-15")]),
                says: &["| GPUs: by CPU affinity, 4 NVIDIA GPUs (CPUs 0-7: 0,1; CPUs 8-15: 2,3) |", "| ok"], ..ok.clone() },
        Row { what: "a GPU without local CPUs", gpus: gpus(&[Some("0-7"), None]),
                says: &["| GPUs: by CPU affinity, 2 NVIDIA GPUs (CPUs 0-7: 0; local CPUs unknown: 1) |", "| ok"], ..ok.clone() },
        Row { what: "a node without NVIDIA GPUs", gpus: Some(Err(Contiguous::NoGpus)),
                says: &["| GPUs: contiguous slices, /sys/bus/pci/devices shows no NVIDIA GPU |", "| ok"], ..ok.clone() },
        Row { what: "Apptainer found", apptainer: (ApptainerEnv::Found, APPTAINER), says: &["Apptainer's names: Apptainer's |"], ..ok.clone() },
        Row { what: "both always", apptainer: (ApptainerEnv::Always, Runtimes::NONE), says: &["Apptainer's names: Apptainer's and SingularityCE's"], ..ok.clone() },
        Row { what: "auto", apptainer: (ApptainerEnv::Auto, APPTAINER), says: &["Apptainer's names: for steps that start one"], ..ok.clone() },
        Row { what: "never", apptainer: (ApptainerEnv::No, APPTAINER), says: &["Apptainer's names: none"], ..ok.clone() },
        Row { what: "oci.conf that loses the variables", oci: Some(OciConf { ignores_config_json: true, ..OciConf::default() }),
                says: &["oci.conf: starts --container steps without the task's variables", "| ok"], ..ok.clone() },
        Row { what: "oci.conf with EnvExclude", oci: Some(OciConf { env_exclude: Some("^TF_".into()), ..OciConf::default() }),
                says: &["oci.conf: EnvExclude=^TF_ keeps matching variables out"], ..ok.clone() },
        Row { what: "oci.conf that keeps nothing out", oci: Some(OciConf::default()), says: &["oci.conf: keeps no variable out"], ..ok.clone() },
        Row { what: "a directory left open", run_dir: &[("/run/tfcluster is open to other users: the next step closes it", false)],
                says: &["| /run/tfcluster is open to other users: the next step closes it | ok"], ..ok.clone() },
        Row { what: "another user's file", run_dir: &[("/run/tfcluster/claims/x belongs to uid 1000, not to root: remove it as root", true)],
                says: &["NOT OK: /run/tfcluster/claims/x belongs to uid 1000"], fails: true, ..ok.clone() },
    ]
}

#[test]
fn each_nodes_line_and_whether_it_fails() {
    let line = LINE.map(String::from);
    for row in rows() {
        let run_dir: Vec<(String, bool)> = row
            .run_dir
            .iter()
            .map(|(n, r)| (n.to_string(), *r))
            .collect();
        let check = NodeCheck {
            node: "n9",
            copy: COPY,
            srun: row.srun,
            srun_isolates: row.srun_isolates,
            lines: (row.srun_line, &line),
            slurmd: row.slurmd.clone(),
            claims: row.claims.map_err(str::to_string),
            steps: (row.steps.0.to_vec(), row.steps.1),
            settings: row.settings.map_err(str::to_string),
            isolation: row.isolation.clone(),
            gpus: row.gpus.clone(),
            apptainer: row.apptainer,
            oci: row.oci.clone(),
            run_dir,
        };
        let verdict = check.verdict();
        for part in row.says {
            assert!(
                verdict.line.contains(part),
                "{}: {:?} not in {}",
                row.what,
                part,
                verdict.line
            );
        }
        assert_eq!(verdict.fails, row.fails, "{}: {}", row.what, verdict.line);
        assert_eq!(verdict.line.ends_with("| ok"), !row.fails, "{}", row.what);
    }
}
