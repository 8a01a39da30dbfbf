//! Build script: the Slurm release this plugin is for, and Rust bindings for our own header.
//!
//! Slurm (22.05 and later) refuses a SPANK plugin whose `plugin_version` major.minor differs
//! from the running release, so the version is a build input:
//! 1. `TFCLUSTER_SLURM_VERSION=MAJOR.MINOR[.MICRO]` in the environment, to build for another
//!    release than the one installed;
//! 2. otherwise `SLURM_VERSION_NUMBER` from the installed `slurm/slurm_version.h`
//!    (`TFCLUSTER_SLURM_INCLUDE` names another include directory, default /usr/include).
//!
//! The header the bindings come from is `spank-headers/tfcluster_spank.h`, written for this
//! project; Slurm's own headers are read only for the version number.
//!
//! Everything else that differs between releases is decided here, from the version, in
//! [`ReleaseApi`]: the header and the Rust code both follow it (through `-D` defines for
//! bindgen and `cfg` flags for rustc).

use std::env;
use std::fs;
use std::path::PathBuf;

/// The newest Slurm release the tests run on (tests/releases.tsv's last line).
const NEWEST_TESTED: (u32, u32) = (26, 5);

fn main() {
    println!("cargo:rerun-if-changed=spank-headers/tfcluster_spank.h");
    println!("cargo:rerun-if-env-changed=TFCLUSTER_SLURM_VERSION");
    println!("cargo:rerun-if-env-changed=TFCLUSTER_SLURM_INCLUDE");

    static_unwinder();
    let (major, minor, micro) = slurm_version();
    let include = include_dir();
    if (major, minor) < (21, 8) {
        panic!("tfcluster needs Slurm 21.08 or later (SPANK error codes 3000+); got {major}.{minor:02}");
    }
    if (major, minor) > NEWEST_TESTED {
        println!(
            "cargo:warning=Slurm {major}.{minor:02} is newer than the newest release tfcluster is \
             tested on ({}.{:02}): built with that release's choices; run bash tests/run.sh \
             on it before production (docs/admin-guide.md, Platforms)",
            NEWEST_TESTED.0, NEWEST_TESTED.1
        );
    }
    let number = (major << 16) | (minor << 8) | micro;
    let api = ReleaseApi::of(major, minor);
    println!("cargo::rustc-check-cfg=cfg(tfc_kill_step, values(\"job_step\", \"job_step_flags\", \"step_id\"))");
    println!("cargo:rustc-cfg=tfc_kill_step=\"{}\"", api.kill_step);
    println!("cargo::rustc-check-cfg=cfg(tfc_step_id_sluid)");
    println!("cargo::rustc-check-cfg=cfg(tfc_het_leader_signal)");
    println!("cargo::rustc-check-cfg=cfg(tfc_load_job_step_id)");
    println!("cargo::rustc-check-cfg=cfg(tfc_get_job_steps_step_id)");
    if api.get_job_steps_step_id {
        println!("cargo:rustc-cfg=tfc_get_job_steps_step_id");
    }
    if api.load_job_step_id {
        println!("cargo:rustc-cfg=tfc_load_job_step_id");
    }
    if api.het_leader_signal {
        println!("cargo:rustc-cfg=tfc_het_leader_signal");
    }
    if api.step_id_has_sluid {
        println!("cargo:rustc-cfg=tfc_step_id_sluid");
    }
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    fs::write(
        out.join("slurm_version.rs"),
        format!(
            "/// The Slurm release this plugin was built for (`(major << 16) | (minor << 8) | micro`).\n\
             pub const SLURM_VERSION_NUMBER: u32 = {number:#08x};\n\
             /// The include directory of the Slurm this build is for (`tests/abi.rs` checks our\n\
             /// header against the `slurm/spank.h` there).\n\
             pub const SLURM_INCLUDE_DIR: &str = {include:?};\n\
             /// `slurm_kill_job_step`'s C type in this release (checked by `tests/abi.rs`).\n\
             pub const KILL_STEP_PROTOTYPE: &str = {prototype:?};\n\
             /// Whether this release orders block steps by the topology's node ranks.\n\
             pub const TOPOLOGY_ORDERS_BLOCK_STEPS: bool = {topo};\n\
             /// Whether this release may run hooks in a child process (`contain_spank`).\n\
             pub const HOOKS_MAY_RUN_IN_CHILDREN: bool = {children};\n\
             /// The release as users write it (`22.05`).\n\
             pub const SLURM_RELEASE: &str = \"{major}.{minor:02}\";\n\
             /// Whether a `--container` task gets the environment plugins set (23.02 and later).\n\
             pub const CONTAINER_GETS_TASK_ENV: bool = {container};\n\
             /// `slurm_job_info_t` in this release: its size, and where the fields the plugin\n\
             /// reads are, with their C names (`tests/abi.rs` checks each against the release).\n\
             pub const JOB_INFO_SIZE: usize = {ji_size};\n\
             pub const JOB_INFO_JOB_ID: (&str, usize) = ({ji_job_name:?}, {ji_job});\n\
             pub const JOB_INFO_HET_JOB_ID: usize = {ji_het};\n\
             pub const JOB_INFO_USER_ID: usize = {ji_user};\n\
             /// `slurm_load_job`'s C type in this release (checked by `tests/abi.rs`).\n\
             pub const LOAD_JOB_PROTOTYPE: &str = {load_job:?};\n\
             /// `job_step_info_t` in this release: its size and the fields the plugin reads.\n\
             pub const JOB_STEP_INFO_SIZE: usize = {si_size};\n\
             pub const JOB_STEP_INFO_JOB_ID: usize = {si_job};\n\
             pub const JOB_STEP_INFO_STEP_ID: usize = {si_step};\n\
             pub const JOB_STEP_INFO_RESV_PORTS: usize = {si_ports};\n\
             /// `slurm_get_job_steps`'s C type in this release (checked by `tests/abi.rs`).\n\
             pub const GET_JOB_STEPS_PROTOTYPE: &str = {get_steps:?};\n",
            si_size = api.step_info.size,
            si_job = api.step_info.job_id,
            si_step = api.step_info.step_id,
            si_ports = api.step_info.resv_ports,
            get_steps = api.get_job_steps_prototype(),
            ji_size = api.job_info.size,
            ji_job_name = api.job_info.job_id.0,
            ji_job = api.job_info.job_id.1,
            ji_het = api.job_info.het_job_id,
            ji_user = api.job_info.user_id,
            load_job = api.load_job_prototype(),
            prototype = api.kill_step_prototype(),
            topo = api.topology_orders_block_steps,
            children = api.hooks_may_run_in_children,
            container = api.container_gets_task_env,
        ),
    )
    .unwrap();

    bindgen::Builder::default()
        .header("spank-headers/tfcluster_spank.h")
        .use_core()
        .allowlist_function("spank_.*|slurm_.*")
        .allowlist_type("spank_.*|tfc_.*")
        .allowlist_var("TFC_.*")
        .default_macro_constant_type(bindgen::MacroTypeVariation::Signed)
        .constified_enum_module("tfc_spank_.*")
        .clang_args(api.header_defines())
        .derive_default(true)
        .layout_tests(true)
        .generate()
        .expect("bindgen: spank-headers/tfcluster_spank.h (is libclang-dev installed?)")
        .write_to_file(out.join("spank_bindings.rs"))
        .unwrap();
}

/// Links GCC's unwinder (`libgcc_eh.a`) into the plugin instead of loading `libgcc_s.so.1`
/// beside it. Rust's std needs an unwinder for the hooks' `catch_unwind`, and takes it from
/// libgcc_s. Slurm 26.05's slurmstepd does not load libgcc_s otherwise, so it would be one more
/// shared library: 5 more memory mappings, which every task's `fork` and `execve` copy and tear
/// down. At 4096 tasks, loading the plugin then cost 2–3% of the launch. Our native libraries
/// come before std's on the link line, so the archive resolves every unwinder symbol first (in
/// debug and release builds alike), and the linker's `--as-needed` drops libgcc_s. Panics never leave the plugin (each hook catches them), which is when GCC says a
/// static libgcc is safe in a shared library. Without GCC's archive (another C compiler), the
/// plugin keeps libgcc_s.
fn static_unwinder() {
    println!("cargo:rerun-if-env-changed=CC");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
    {
        return;
    }
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let found = std::process::Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|path| PathBuf::from(path.trim()))
        .filter(|path| path.is_absolute() && path.exists());
    if let Some(dir) = found.as_ref().and_then(|path| path.parent()) {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
    }
}

/// What differs between Slurm releases for the plugin, beyond `plugin_version`: the one place
/// that knows (tests/releases.tsv lists the releases each row is tested on).
struct ReleaseApi {
    /// `slurm_kill_job_step`'s form (slurm/slurm.h of each release):
    /// - `job_step` (job id, step id, signal): up to 23.02;
    /// - `job_step_flags` (plus flags, with KILL_NO_SIG_FAIL): 23.11 to 25.05;
    /// - `step_id` (a `slurm_step_id_t *`, signal, flags): from 25.11 (SchedMD commit
    ///   0aba30e383, first in 25.11.0rc1; the 26.05 release notes are the first to mention it).
    ///
    /// Calling another release's form does not fail to load: 25.11 took the job id for a
    /// pointer and never ended the step.
    kill_step: &'static str,
    /// 26.05 and later: block-distributed steps follow the topology plugin's node ranks.
    topology_orders_block_steps: bool,
    /// 24.05 and later: `SlurmdParameters=contain_spank` makes slurmstepd run `user_init`,
    /// `task_post_fork` and `task_exit` in a `clone(CLONE_VM)` child that exits after the hook
    /// (SchedMD's `mgr.c`, `_run_spank_func`; 23.11 has no such parameter).
    hooks_may_run_in_children: bool,
    /// 23.02 and later: slurmstepd writes a `--container` step's config.json from the task's
    /// final environment, after `task_init` (SchedMD bug 15449); 22.05 wrote it before any
    /// plugin ran (`core::container`).
    container_gets_task_env: bool,
    /// 24.11 and later: `slurm_step_id_t` starts with a `sluid` (slurm/slurm.h).
    step_id_has_sluid: bool,
    /// `slurm_step_layout_t`'s head (slurm/slurm.h): 23.11 added the compact CPU fields and
    /// `alias_addrs`; 25.05 removed `front_end`.
    step_layout_compact: bool,
    step_layout_front_end: bool,
    /// 25.11 (25.11.7 tested): slurmctld turns a SIGKILL to a step of a heterogeneous job's
    /// first component into the cancellation of every component's whole job
    /// (`kill_job_step` rewrites the step id with `STEP_ID_FROM_JOB_RECORD`, whose step is
    /// NO_VAL; 25.05 and 26.05 stop the step). There the plugin signals that component's tasks
    /// instead (`slurm_signal_job_step`, a `slurm_step_id_t *` in 25.11).
    het_leader_signal: bool,
    /// 26.05 and later: `slurm_load_job` takes a `slurm_step_id_t` (by value), not a job id.
    load_job_step_id: bool,
    /// `slurm_job_info_t` ([`JobInfo`]).
    job_info: JobInfo,
    /// 25.11 and later: `slurm_get_job_steps` takes a `slurm_step_id_t *`, not an update time,
    /// a job id and a step id.
    get_job_steps_step_id: bool,
    /// `job_step_info_t` ([`StepInfo`]).
    step_info: StepInfo,
}

/// Where the fields of `job_step_info_t` that the plugin reads lie, per release (LP64), measured
/// and checked as [`JobInfo`]'s.
struct StepInfo {
    /// `sizeof(job_step_info_t)`: the stride of the response's records.
    size: usize,
    /// `step_id.job_id` and `step_id.step_id`: which step a record is.
    job_id: usize,
    step_id: usize,
    /// `resv_ports`: the ports Slurm reserved for the step (a `char *` list, or NULL).
    resv_ports: usize,
}

impl StepInfo {
    fn of(major: u32, minor: u32) -> StepInfo {
        let (size, job_id, step_id, resv_ports) = match (major, minor) {
            (..=22, _) => (256, 160, 168, 104),
            (23, _) | (24, ..=5) => (256, 160, 168, 112),
            (24, _) => (264, 168, 176, 112),
            (25, _) => (304, 184, 192, 128),
            _ => (312, 192, 200, 136),
        };
        StepInfo {
            size,
            job_id,
            step_id,
            resv_ports,
        }
    }
}

/// Where the fields of `slurm_job_info_t` that the plugin reads lie, per release (x86_64 and
/// every other LP64 Linux): measured with `offsetof` against each release's `<slurm/slurm.h>`,
/// as tests/abi.rs checks on every release it runs on. Every release adds fields, so each has a
/// row; a release newer than the table takes the newest row, and its tests/abi.rs says whether
/// that holds.
struct JobInfo {
    /// `sizeof(slurm_job_info_t)`: the stride of `job_info_msg_t`'s records.
    size: usize,
    /// The job's id: `job_id` up to 25.05; from 25.11 `step_id.job_id` (the old field is
    /// kept "for backwards compatibility only").
    job_id: (&'static str, usize),
    /// `het_job_id`: the heterogeneous job's first component's job, 0 for a plain job.
    het_job_id: usize,
    /// `user_id`: whom the job runs as.
    user_id: usize,
}

impl JobInfo {
    fn of(major: u32, minor: u32) -> JobInfo {
        let (size, job_id, het_job_id, user_id) = match (major, minor) {
            (..=22, _) => (904, ("job_id", 388), 372, 864),
            (23, _) => (928, ("job_id", 412), 396, 888),
            (24, ..=5) => (952, ("job_id", 412), 396, 912),
            (24, _) => (960, ("job_id", 412), 396, 920),
            (25, ..=5) => (976, ("job_id", 412), 396, 936),
            (25, _) => (1016, ("step_id.job_id", 768), 396, 968),
            _ => (1032, ("step_id.job_id", 784), 404, 984),
        };
        JobInfo {
            size,
            job_id,
            het_job_id,
            user_id,
        }
    }
}

impl ReleaseApi {
    fn of(major: u32, minor: u32) -> ReleaseApi {
        let kill_step = match (major, minor) {
            (..=22, _) | (23, ..=2) => "job_step",
            (..=24, _) | (25, ..=10) => "job_step_flags",
            _ => "step_id",
        };
        ReleaseApi {
            kill_step,
            topology_orders_block_steps: (major, minor) >= (26, 5),
            hooks_may_run_in_children: (major, minor) >= (24, 5),
            container_gets_task_env: (major, minor) >= (23, 2),
            step_id_has_sluid: (major, minor) >= (24, 11),
            step_layout_compact: (major, minor) >= (23, 11),
            step_layout_front_end: (major, minor) < (25, 5),
            het_leader_signal: (major, minor) == (25, 11),
            load_job_step_id: (major, minor) >= (26, 5),
            job_info: JobInfo::of(major, minor),
            get_job_steps_step_id: (major, minor) >= (25, 11),
            step_info: StepInfo::of(major, minor),
        }
    }

    /// The `-D` defines that pick this release's forms in spank-headers/tfcluster_spank.h.
    fn header_defines(&self) -> Vec<String> {
        let mut defines = vec![format!("-DTFC_KILL_STEP_{}", self.kill_step.to_uppercase())];
        let flags = [
            (self.step_id_has_sluid, "TFC_STEP_ID_SLUID"),
            (self.step_layout_compact, "TFC_STEP_LAYOUT_COMPACT"),
            (self.step_layout_front_end, "TFC_STEP_LAYOUT_FRONT_END"),
            (self.het_leader_signal, "TFC_HET_LEADER_SIGNAL"),
            (self.load_job_step_id, "TFC_LOAD_JOB_STEP_ID"),
            (self.get_job_steps_step_id, "TFC_GET_JOB_STEPS_STEP_ID"),
        ];
        defines.extend(
            flags
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, name)| format!("-D{name}")),
        );
        defines
    }

    fn load_job_prototype(&self) -> &'static str {
        match self.load_job_step_id {
            true => "int (job_info_msg_t **, slurm_step_id_t, uint16_t)",
            false => "int (job_info_msg_t **, uint32_t, uint16_t)",
        }
    }

    fn get_job_steps_prototype(&self) -> &'static str {
        match self.get_job_steps_step_id {
            true => "int (slurm_step_id_t *, job_step_info_response_msg_t **, uint16_t)",
            false => "int (time_t, uint32_t, uint32_t, job_step_info_response_msg_t **, uint16_t)",
        }
    }

    fn kill_step_prototype(&self) -> &'static str {
        match self.kill_step {
            "job_step" => "int (uint32_t, uint32_t, uint16_t)",
            "job_step_flags" => "int (uint32_t, uint32_t, uint16_t, uint16_t)",
            _ => "int (slurm_step_id_t *, uint16_t, uint16_t)",
        }
    }
}

fn slurm_version() -> (u32, u32, u32) {
    if let Ok(text) = env::var("TFCLUSTER_SLURM_VERSION") {
        let parts: Vec<u32> = text
            .trim()
            .split('.')
            .map(|p| p.parse().unwrap_or_else(|_| bad_version(&text)))
            .collect();
        return match parts[..] {
            [major, minor] => (major, minor, 0),
            [major, minor, micro] => (major, minor, micro),
            _ => bad_version(&text),
        };
    }
    let path = PathBuf::from(include_dir()).join("slurm/slurm_version.h");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}): install libslurm-dev, or set TFCLUSTER_SLURM_VERSION=MAJOR.MINOR \
             to build for a given Slurm release",
            path.display()
        )
    });
    let hex = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define SLURM_VERSION_NUMBER"))
        .map(str::trim)
        .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| panic!("no SLURM_VERSION_NUMBER in {}", path.display()));
    (hex >> 16, (hex >> 8) & 0xff, hex & 0xff)
}

/// `TFCLUSTER_SLURM_INCLUDE`, or /usr/include.
fn include_dir() -> String {
    env::var("TFCLUSTER_SLURM_INCLUDE").unwrap_or_else(|_| "/usr/include".into())
}

fn bad_version(text: &str) -> ! {
    panic!(
        "TFCLUSTER_SLURM_VERSION='{text}': expected MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 23.11"
    )
}
