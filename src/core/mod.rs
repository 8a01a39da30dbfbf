//! The pure core: from a step's description (plain strings and numbers, as Slurm exports them)
//! to every task's TF_CONFIG and GPU slice. No FFI, no environment access, no `unsafe`, so every
//! rule is testable with `cargo test`.

#![forbid(unsafe_code)]

pub mod address;
pub mod check;
pub mod claims;
pub mod collectives;
pub mod container;
pub mod ending;
pub mod env_entries;
pub mod error;
pub mod gpu_affinity;
pub mod gpus;
pub mod het;
pub mod hostlist;
pub mod isolation;
pub mod jax;
pub mod keras;
pub mod layout;
pub mod netlink;
pub mod oci;
pub mod place;
pub mod plan;
pub mod ports;
pub mod proxy;
pub mod root_inputs;
pub mod run_dir;
pub mod settings;
pub mod spec;
pub mod text;
pub mod tf_config;
pub mod topology;
pub mod torch;
pub mod tuner;

pub use container::ContainerStep;
pub use ending::{Decider, End};
pub use error::{Error, Result};
pub use gpus::GpuAction;
pub use het::{Component, StepKind};
pub use place::{NodeFacts, NodeGpus, Place};
pub use plan::{StepInputs, StepPlan, TaskEnv};
pub use proxy::ProxyEnv;
pub use settings::Settings;
pub use spec::{Role, Spec};
