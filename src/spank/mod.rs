//! The SPANK shell: turns Slurm's world into core inputs and core outputs back into the task's
//! environment. The only module with `unsafe` (FFI calls and the exported symbols' wrappers).

pub mod check;
pub mod claims;
pub mod error;
pub mod ffi;
pub mod guard;
pub mod handle;
pub mod hardware;
pub mod het;
pub mod hooks;
pub mod isolation;
pub mod log;
pub mod netlink;
pub mod oci;
pub mod oom;
pub mod process;
pub mod regex;
pub mod resolver;
pub mod run_dir;
pub mod runtimes;
pub mod slurm;
pub mod slurm_conf;
pub mod sock_diag;
pub mod start_env;
pub mod step;
pub mod stop;
pub mod task_env;
pub mod timing;
pub mod topology;
pub mod workers;
