//! Our clean-room header against the installed Slurm: every number, size and offset that
//! tfcluster's bindings (bindgen output of spank-headers/tfcluster_spank.h) hold is written
//! into a C file as a static assertion against `<slurm/spank.h>` and compiled. A wrong value
//! fails the compile with the name of the fact.
//!
//! Also: the plugin exports exactly the symbols Slurm needs and no other hook.

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;
use tfcluster::spank::ffi;

fn c_checks() -> String {
    let mut c =
        String::from("#include <stddef.h>\n#include <slurm/spank.h>\n#include <slurm/slurm.h>\n");
    let mut eq = |slurm: &str, ours: i64| {
        writeln!(
            c,
            "_Static_assert((long long)({slurm}) == {ours}LL, \"{slurm} == {ours}\");"
        )
        .unwrap();
    };
    use ffi::tfc_spank_context as ctx;
    use ffi::tfc_spank_item as it;
    #[rustfmt::skip]
    let items: [(&str, u32); 32] = [
        ("S_JOB_UID", it::TFC_S_JOB_UID), ("S_JOB_GID", it::TFC_S_JOB_GID),
        ("S_JOB_ID", it::TFC_S_JOB_ID), ("S_JOB_STEPID", it::TFC_S_JOB_STEPID),
        ("S_JOB_NNODES", it::TFC_S_JOB_NNODES), ("S_JOB_NODEID", it::TFC_S_JOB_NODEID),
        ("S_JOB_LOCAL_TASK_COUNT", it::TFC_S_JOB_LOCAL_TASK_COUNT),
        ("S_JOB_TOTAL_TASK_COUNT", it::TFC_S_JOB_TOTAL_TASK_COUNT),
        ("S_JOB_NCPUS", it::TFC_S_JOB_NCPUS), ("S_JOB_ARGV", it::TFC_S_JOB_ARGV),
        ("S_JOB_ENV", it::TFC_S_JOB_ENV), ("S_TASK_ID", it::TFC_S_TASK_ID),
        ("S_TASK_GLOBAL_ID", it::TFC_S_TASK_GLOBAL_ID), ("S_TASK_EXIT_STATUS", it::TFC_S_TASK_EXIT_STATUS),
        ("S_TASK_PID", it::TFC_S_TASK_PID), ("S_JOB_PID_TO_GLOBAL_ID", it::TFC_S_JOB_PID_TO_GLOBAL_ID),
        ("S_JOB_PID_TO_LOCAL_ID", it::TFC_S_JOB_PID_TO_LOCAL_ID),
        ("S_JOB_LOCAL_TO_GLOBAL_ID", it::TFC_S_JOB_LOCAL_TO_GLOBAL_ID),
        ("S_JOB_GLOBAL_TO_LOCAL_ID", it::TFC_S_JOB_GLOBAL_TO_LOCAL_ID),
        ("S_JOB_SUPPLEMENTARY_GIDS", it::TFC_S_JOB_SUPPLEMENTARY_GIDS),
        ("S_SLURM_VERSION", it::TFC_S_SLURM_VERSION), ("S_SLURM_VERSION_MAJOR", it::TFC_S_SLURM_VERSION_MAJOR),
        ("S_SLURM_VERSION_MINOR", it::TFC_S_SLURM_VERSION_MINOR), ("S_SLURM_VERSION_MICRO", it::TFC_S_SLURM_VERSION_MICRO),
        ("S_STEP_CPUS_PER_TASK", it::TFC_S_STEP_CPUS_PER_TASK), ("S_JOB_ALLOC_CORES", it::TFC_S_JOB_ALLOC_CORES),
        ("S_JOB_ALLOC_MEM", it::TFC_S_JOB_ALLOC_MEM), ("S_STEP_ALLOC_CORES", it::TFC_S_STEP_ALLOC_CORES),
        ("S_STEP_ALLOC_MEM", it::TFC_S_STEP_ALLOC_MEM), ("S_SLURM_RESTART_COUNT", it::TFC_S_SLURM_RESTART_COUNT),
        ("S_JOB_ARRAY_ID", it::TFC_S_JOB_ARRAY_ID), ("S_JOB_ARRAY_TASK_ID", it::TFC_S_JOB_ARRAY_TASK_ID),
    ];
    for (name, value) in items {
        eq(name, value.into());
    }
    #[rustfmt::skip]
    let contexts = [
        ("S_CTX_ERROR", ctx::TFC_S_CTX_ERROR), ("S_CTX_LOCAL", ctx::TFC_S_CTX_LOCAL),
        ("S_CTX_REMOTE", ctx::TFC_S_CTX_REMOTE), ("S_CTX_ALLOCATOR", ctx::TFC_S_CTX_ALLOCATOR),
        ("S_CTX_SLURMD", ctx::TFC_S_CTX_SLURMD), ("S_CTX_JOB_SCRIPT", ctx::TFC_S_CTX_JOB_SCRIPT),
    ];
    for (name, value) in contexts {
        eq(name, value.into());
    }
    #[rustfmt::skip]
    let codes = [
        ("ESPANK_SUCCESS", ffi::TFC_ESPANK_SUCCESS), ("ESPANK_ERROR", ffi::TFC_ESPANK_ERROR),
        ("ESPANK_BAD_ARG", ffi::TFC_ESPANK_BAD_ARG), ("ESPANK_NOT_TASK", ffi::TFC_ESPANK_NOT_TASK),
        ("ESPANK_ENV_EXISTS", ffi::TFC_ESPANK_ENV_EXISTS), ("ESPANK_ENV_NOEXIST", ffi::TFC_ESPANK_ENV_NOEXIST),
        ("ESPANK_NOSPACE", ffi::TFC_ESPANK_NOSPACE), ("ESPANK_NOT_REMOTE", ffi::TFC_ESPANK_NOT_REMOTE),
        ("ESPANK_NOEXIST", ffi::TFC_ESPANK_NOEXIST), ("ESPANK_NOT_EXECD", ffi::TFC_ESPANK_NOT_EXECD),
        ("ESPANK_NOT_AVAIL", ffi::TFC_ESPANK_NOT_AVAIL), ("ESPANK_NOT_LOCAL", ffi::TFC_ESPANK_NOT_LOCAL),
        ("SPANK_OPTION_MAXLEN", ffi::TFC_SPANK_OPTION_MAXLEN),
    ];
    for (name, value) in codes {
        eq(name, value.into());
    }
    #[rustfmt::skip]
    let steps = [
        ("SLURM_PENDING_STEP", ffi::TFC_SLURM_PENDING_STEP), ("SLURM_EXTERN_CONT", ffi::TFC_SLURM_EXTERN_CONT),
        ("SLURM_BATCH_SCRIPT", ffi::TFC_SLURM_BATCH_SCRIPT), ("SLURM_INTERACTIVE_STEP", ffi::TFC_SLURM_INTERACTIVE_STEP),
    ];
    for (name, value) in steps {
        eq(name, value);
    }
    #[rustfmt::skip]
    let layout = [
        ("sizeof(struct spank_option)", size_of::<ffi::spank_option>()),
        ("offsetof(struct spank_option, name)", offset_of!(ffi::spank_option, name)),
        ("offsetof(struct spank_option, arginfo)", offset_of!(ffi::spank_option, arginfo)),
        ("offsetof(struct spank_option, usage)", offset_of!(ffi::spank_option, usage)),
        ("offsetof(struct spank_option, has_arg)", offset_of!(ffi::spank_option, has_arg)),
        ("offsetof(struct spank_option, val)", offset_of!(ffi::spank_option, val)),
        ("offsetof(struct spank_option, cb)", offset_of!(ffi::spank_option, cb)),
        ("sizeof(spank_item_t)", size_of::<ffi::spank_item_t>()),
        ("sizeof(spank_context_t)", size_of::<ffi::spank_context_t>()),
        ("sizeof(spank_err_t)", size_of::<ffi::spank_err_t>()),
        ("sizeof(spank_t)", size_of::<ffi::spank_t>()),
    ];
    for (name, value) in layout {
        eq(name, value as i64);
    }
    // Ending a step (slurm_kill_job_step): the form build.rs chose for this release, and what it
    // passes. 26.05 takes a slurm_step_id_t; 23.11 added the flags and KILL_NO_SIG_FAIL.
    // slurm_step_id_t: slurm_job_step_layout_get takes it on every release, slurm_kill_job_step
    // from 25.11; 24.11 put a sluid first.
    #[rustfmt::skip]
    let step_id = [
        ("sizeof(slurm_step_id_t)", size_of::<ffi::tfc_step_id_t>()),
        ("offsetof(slurm_step_id_t, job_id)", offset_of!(ffi::tfc_step_id_t, job_id)),
        ("offsetof(slurm_step_id_t, step_het_comp)", offset_of!(ffi::tfc_step_id_t, step_het_comp)),
        ("offsetof(slurm_step_id_t, step_id)", offset_of!(ffi::tfc_step_id_t, step_id)),
    ];
    #[cfg(tfc_step_id_sluid)]
    let sluid = Some((
        "offsetof(slurm_step_id_t, sluid)",
        offset_of!(ffi::tfc_step_id_t, sluid),
    ));
    #[cfg(not(tfc_step_id_sluid))]
    let sluid = None;
    // slurm_step_layout_t: every field the plugin reads (a heterogeneous step's components).
    #[rustfmt::skip]
    let step_layout = [
        ("offsetof(slurm_step_layout_t, node_cnt)", offset_of!(ffi::tfc_step_layout_t, node_cnt)),
        ("offsetof(slurm_step_layout_t, node_list)", offset_of!(ffi::tfc_step_layout_t, node_list)),
        ("offsetof(slurm_step_layout_t, tasks)", offset_of!(ffi::tfc_step_layout_t, tasks)),
        ("offsetof(slurm_step_layout_t, task_cnt)", offset_of!(ffi::tfc_step_layout_t, task_cnt)),
        ("offsetof(slurm_step_layout_t, tids)", offset_of!(ffi::tfc_step_layout_t, tids)),
    ];
    // job_info_msg_t and slurm_job_info_t: whose a job is and its heterogeneous job
    // (slurm_load_job), at the size and offsets build.rs gives this release.
    let job_id = format!("offsetof(slurm_job_info_t, {})", ffi::JOB_INFO_JOB_ID.0);
    #[rustfmt::skip]
    let job_info = [
        ("sizeof(job_info_msg_t)", size_of::<ffi::tfc_job_info_msg_t>()),
        ("offsetof(job_info_msg_t, record_count)", offset_of!(ffi::tfc_job_info_msg_t, record_count)),
        ("offsetof(job_info_msg_t, job_array)", offset_of!(ffi::tfc_job_info_msg_t, job_array)),
        ("sizeof(slurm_job_info_t)", ffi::JOB_INFO_SIZE),
        (job_id.as_str(), ffi::JOB_INFO_JOB_ID.1),
        ("offsetof(slurm_job_info_t, het_job_id)", ffi::JOB_INFO_HET_JOB_ID),
        ("offsetof(slurm_job_info_t, user_id)", ffi::JOB_INFO_USER_ID),
        ("SHOW_ALL", ffi::TFC_SHOW_ALL as usize),
        // job_step_info_response_msg_t and job_step_info_t: a step's reserved ports
        // (slurm_get_job_steps).
        ("offsetof(job_step_info_response_msg_t, job_step_count)",
         offset_of!(ffi::tfc_job_step_info_response_msg_t, job_step_count)),
        ("offsetof(job_step_info_response_msg_t, job_steps)",
         offset_of!(ffi::tfc_job_step_info_response_msg_t, job_steps)),
        ("sizeof(job_step_info_t)", ffi::JOB_STEP_INFO_SIZE),
        ("offsetof(job_step_info_t, step_id.job_id)", ffi::JOB_STEP_INFO_JOB_ID),
        ("offsetof(job_step_info_t, step_id.step_id)", ffi::JOB_STEP_INFO_STEP_ID),
        ("offsetof(job_step_info_t, resv_ports)", ffi::JOB_STEP_INFO_RESV_PORTS),
    ];
    for (name, value) in job_info {
        eq(name, value as i64);
    }
    for (name, value) in step_id.into_iter().chain(sluid).chain(step_layout) {
        eq(name, value as i64);
    }
    if ffi::KILL_STEP_PROTOTYPE.contains("uint16_t, uint16_t") {
        eq("KILL_NO_SIG_FAIL", ffi::TFC_KILL_NO_SIG_FAIL.into());
    }
    eq("NO_VAL", ffi::TFC_NO_VAL);
    eq(
        "ESLURM_INVALID_JOB_ID",
        ffi::TFC_ESLURM_INVALID_JOB_ID.into(),
    );
    eq("ESLURM_ALREADY_DONE", ffi::TFC_ESLURM_ALREADY_DONE.into());
    let prototypes = [
        ("slurm_kill_job_step", ffi::KILL_STEP_PROTOTYPE),
        (
            "slurm_job_step_layout_get",
            "slurm_step_layout_t *(slurm_step_id_t *)",
        ),
        ("slurm_job_step_layout_free", "void (slurm_step_layout_t *)"),
        ("slurm_load_job", ffi::LOAD_JOB_PROTOTYPE),
        ("slurm_free_job_info_msg", "void (job_info_msg_t *)"),
        ("slurm_get_job_steps", ffi::GET_JOB_STEPS_PROTOTYPE),
        (
            "slurm_free_job_step_info_response_msg",
            "void (job_step_info_response_msg_t *)",
        ),
    ];
    #[cfg(tfc_het_leader_signal)]
    let prototypes = [
        prototypes.as_slice(),
        &[("slurm_signal_job_step", "int (slurm_step_id_t *, uint32_t)")],
    ]
    .concat();
    for (function, p) in prototypes {
        writeln!(
            c,
            "_Static_assert(__builtin_types_compatible_p(__typeof__({function}), {p}), \
             \"{function} is {p}\");"
        )
        .unwrap();
    }
    c
}

#[test]
fn our_header_matches_the_installed_spank_h() {
    let include = std::path::Path::new(ffi::SLURM_INCLUDE_DIR);
    assert!(
        include.join("slurm/spank.h").exists(),
        "no slurm/spank.h in {}: install libslurm-dev (the test command does), or point \
         TFCLUSTER_SLURM_INCLUDE at a Slurm release's include directory",
        include.display()
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("abi_check.c");
    std::fs::write(&src, c_checks()).unwrap();
    let out = Command::new("cc")
        .args(["-std=gnu11", "-fsyntax-only", "-Werror", "-isystem"])
        .arg(include)
        .arg(&src)
        .output()
        .expect("a C compiler (cc)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_checks_really_compare() {
    // A wrong value or prototype must fail to compile, or the test above proves nothing.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let wrong_prototype = ffi::KILL_STEP_PROTOTYPE.replace("uint16_t)", "uint32_t)");
    let mutations = [
        ("(S_TASK_ID) == 11LL", "(S_TASK_ID) == 12LL".to_string()),
        (ffi::KILL_STEP_PROTOTYPE, wrong_prototype),
    ];
    for (i, (right, wrong)) in mutations.iter().enumerate() {
        let checks = c_checks();
        assert!(checks.contains(right), "{right}");
        let src = dir.join(format!("abi_check_wrong_{i}.c"));
        std::fs::write(&src, checks.replace(right, wrong)).unwrap();
        let out = Command::new("cc")
            .args([
                "-std=gnu11",
                "-fsyntax-only",
                "-isystem",
                ffi::SLURM_INCLUDE_DIR,
            ])
            .arg(&src)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{wrong} was accepted");
    }
}

fn plugin_path() -> PathBuf {
    // `cargo test` builds the cdylib beside this test: target/<profile>/deps/libtfcluster.so
    // (`cargo build` copies the same file one level up).
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps, deps.parent().unwrap()]
        .map(|d| d.join("libtfcluster.so"))
        .into_iter()
        .find(|so| so.exists())
        .expect("cargo test builds libtfcluster.so beside the test binaries")
}

#[test]
fn exports_only_what_slurm_needs() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only", "--format=posix"])
        .arg(plugin_path())
        .output()
        .expect("nm (binutils)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "plugin_name",
            "plugin_type",
            "plugin_version",
            "slurm_spank_exit",
            "slurm_spank_init",
            "slurm_spank_init_post_opt",
            "slurm_spank_job_epilog",
            "slurm_spank_local_user_init",
            "slurm_spank_task_exit",
            "slurm_spank_task_init",
            "slurm_spank_task_post_fork",
            "slurm_spank_user_init",
        ]
    );
}

/// libc and the dynamic loader only: GCC's unwinder is linked in (build.rs), since one more
/// shared library in slurmstepd is five more mappings that every task's fork copies.
#[test]
fn needs_no_shared_library_but_libc() {
    let out = Command::new("readelf")
        .args(["-d", "-W"])
        .arg(plugin_path())
        .output()
        .expect("readelf (binutils)");
    assert!(out.status.success());
    let needed: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split('[').nth(1)?.trim_end_matches(']').to_string()))
        .collect();
    // libc must be listed: an empty list would mean readelf read nothing, not a lean plugin.
    assert!(needed.iter().any(|lib| lib == "libc.so.6"), "{needed:?}");
    assert!(
        needed
            .iter()
            .all(|lib| lib == "libc.so.6" || lib.starts_with("ld-linux")),
        "{needed:?}"
    );
}

/// Each task's variables go into entries whose strings come from libslurm's own allocator,
/// found at run time (src/spank/task_env.rs; where it is missing, every variable goes through
/// `spank_setenv` as before): this release's libslurm, in its own directory beside the headers'
/// prefix, defines both of its functions.
#[test]
fn libslurm_has_the_allocator_the_tasks_entries_come_from() {
    let prefix = std::path::Path::new(ffi::SLURM_INCLUDE_DIR)
        .parent()
        .unwrap();
    let lib = [
        "lib/x86_64-linux-gnu/slurm-wlm",
        "lib/aarch64-linux-gnu/slurm-wlm",
        "lib/slurm",
        "lib64/slurm",
    ]
    .iter()
    .map(|dir| prefix.join(dir).join("libslurmfull.so"))
    .find(|lib| lib.exists())
    .unwrap_or_else(|| panic!("no libslurmfull.so under {}", prefix.display()));
    let out = Command::new("nm")
        .args(["-D", "--defined-only", "--format=posix"])
        .arg(&lib)
        .output()
        .expect("nm (binutils)");
    let names = String::from_utf8(out.stdout).unwrap();
    for symbol in tfcluster::spank::task_env::ALLOCATOR_SYMBOLS {
        let symbol = symbol.to_str().unwrap();
        assert!(
            names
                .lines()
                .any(|l| l.split_whitespace().next() == Some(symbol)),
            "{} does not define {symbol}",
            lib.display()
        );
    }
}

#[test]
fn plugin_version_is_the_installed_slurm_release() {
    let header = std::fs::read_to_string(
        std::path::Path::new(ffi::SLURM_INCLUDE_DIR).join("slurm/slurm_version.h"),
    )
    .unwrap();
    let line = header
        .lines()
        .find(|l| l.starts_with("#define SLURM_VERSION_NUMBER"))
        .unwrap();
    let installed = u32::from_str_radix(
        line.split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    if std::env::var_os("TFCLUSTER_SLURM_VERSION").is_none() {
        assert_eq!(
            ffi::SLURM_VERSION_NUMBER >> 8,
            installed >> 8,
            "major.minor"
        );
    }
    assert_eq!(tfcluster::plugin_version, ffi::SLURM_VERSION_NUMBER);
    assert_eq!(&tfcluster::plugin_name, b"tfcluster\0");
    assert_eq!(&tfcluster::plugin_type, b"spank\0");
}
