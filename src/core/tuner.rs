//! Keras Tuner's distributed search (`tuner=yes`): one oracle that hands out trials, and tuners
//! that run them. Keras Tuner reads three variables (keras-team/keras-tuner#383 asks how to set
//! them on Slurm): `KERASTUNER_TUNER_ID` (`chief` for the oracle, `tuner0`, `tuner1`, ... for
//! the others), `KERASTUNER_ORACLE_IP` and `KERASTUNER_ORACLE_PORT`, where the oracle's gRPC
//! server listens (it binds that address) and the tuners dial. The spec's chief is the oracle,
//! at its TF_CONFIG endpoint (a port of the step's own block, claimed on its node and covered
//! by `isolate=yes`); every other task is a tuner, numbered in rank order. The step ends with
//! the oracle, as with any chief ([`super::ending`]).

use super::address::Endpoints;
use super::error::{Error, Result};
use super::layout::Layout;
use super::spec::{Role, RoleTable};
use std::borrow::Cow;

/// `chief` for the oracle, `tunerN` for the others.
pub const TUNER_ID: &str = "KERASTUNER_TUNER_ID";
/// The oracle's address (the chief's, as TF_CONFIG names it).
pub const ORACLE_IP: &str = "KERASTUNER_ORACLE_IP";
/// The oracle's port (the chief's TF_CONFIG port).
pub const ORACLE_PORT: &str = "KERASTUNER_ORACLE_PORT";

/// The oracle's place, each value NUL-terminated and lent to every task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunerStep {
    chief_rank: u32,
    address: String,
    port: String,
}

impl TunerStep {
    /// The oracle of a step with `tuner=yes` (`on`); `None` when off. A spec without a chief
    /// has no oracle: refused, never a search whose tuners wait for no one.
    pub fn new(
        on: bool,
        roles: &RoleTable,
        layout: &Layout,
        endpoints: &Endpoints,
    ) -> Result<Option<TunerStep>> {
        if !on {
            return Ok(None);
        }
        let chief_rank = check(roles)?;
        let place = &layout.ranks[chief_rank as usize];
        let address = endpoints.address(place.node as usize).to_string() + "\0";
        let port = endpoints.port(place.slot as usize).to_string() + "\0";
        Ok(Some(TunerStep {
            chief_rank,
            address,
            port,
        }))
    }

    /// Adds the task of `rank`'s variables to `set`.
    pub fn add<'r>(&'r self, set: &mut Vec<(&'static str, Cow<'r, str>)>, rank: u32) {
        let id = match rank.cmp(&self.chief_rank) {
            std::cmp::Ordering::Equal => "chief\0".to_string(),
            std::cmp::Ordering::Less => format!("tuner{rank}\0"),
            std::cmp::Ordering::Greater => format!("tuner{}\0", rank - 1),
        };
        set.push((TUNER_ID, Cow::Owned(id)));
        set.push((ORACLE_IP, Cow::Borrowed(&self.address)));
        set.push((ORACLE_PORT, Cow::Borrowed(&self.port)));
    }
}

/// The chief's rank (or the master's, TensorFlow's older name for it), which `tuner=yes`
/// needs (srun checks it before launch too).
pub fn check(roles: &RoleTable) -> Result<u32> {
    roles
        .slices
        .iter()
        .find(|s| matches!(s.role, Role::Chief | Role::Master))
        .map(|s| s.start)
        .ok_or(Error::TunerWithoutChief)
}
