//! tfcluster: a Slurm SPANK plugin that gives every task of `srun --tf-cluster=...` its
//! `TF_CONFIG` and its share of the node's GPUs.
//!
//! - [`core`]: the pure layout engine (no FFI, no environment).
//! - `spank`: the thin shell Slurm loads; the only place with `unsafe`.

pub mod core;
