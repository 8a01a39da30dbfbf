//! slurmd's job epilog (`slurm_spank_job_epilog`, once per node and job, as root): with
//! `isolate=yes`, every firewall table the job's steps left on the node goes (a slurmstepd
//! killed with SIGKILL runs no exit hook), and the files of a 0.7.0 slurmd's holder with them.

use crate::core::isolation;
use crate::core::Settings;
use crate::spank::handle::{Spank, U32Item};
use crate::spank::isolation::handover;
use crate::spank::isolation::nftables;
use crate::spank::log;
use std::ffi::c_int;

/// Waits until a 0.7.0 slurmd's holder has let go of `tables` ([`handover::forget`]: it owns
/// them, nothing else can remove them), twice [`handover::HANDOVER`] at most; the removal
/// below then reports one it kept.
fn released(tables: &[String]) {
    let start = std::time::Instant::now();
    while !tables.is_empty() && start.elapsed() < 2 * handover::HANDOVER {
        let Ok(listing) = nftables::node_tables() else {
            return;
        };
        if !listing.iter().any(|t| tables.contains(t)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// slurmd's job epilog, on every node of the job, as root (`args`: the plugstack.conf words,
/// read here again since this process ran no other hook): remove every table any step of this
/// job left here, also after `isolate=yes` was turned off. With `isolate=yes` a failure fails
/// the epilog (Slurm drains the node, with the line in slurmd's log): rules must not outlive
/// their job unnoticed. The node's tables are asked of the kernel first: an epilog that finds
/// none of its job's asks nothing more; each table it finds goes with one hand-built request
/// ([`nftables::delete_table`]): the epilog loads no libnftables.
pub fn job_epilog(sp: &Spank, args: &[String]) -> c_int {
    let settings = Settings::from_plugstack(args);
    let isolate = settings.as_ref().is_ok_and(|s| s.isolate);
    crate::spank::timing::enable(settings.as_ref().is_ok_and(|s| s.timing));
    let Ok(job_id) = sp.item_u32(U32Item::JobId) else {
        return 0;
    };
    let held = handover::forget(job_id);
    released(&held);
    crate::spank::timing::phase("held tables");
    let removed = nftables::node_tables().and_then(|listing| {
        let left = isolation::tables::job_tables(&listing, job_id);
        crate::spank::timing::phase("list");
        // One transaction per table, each by hand (no libnftables to load): a table its
        // slurmstepd removed meanwhile is no failure.
        for table in left {
            if let Err(e) = nftables::delete_table(table) {
                if nftables::node_tables()?.iter().any(|t| t == table) {
                    return Err(e);
                }
            }
        }
        crate::spank::timing::phase("remove");
        Ok(())
    });
    match (removed, isolate) {
        (Ok(()), _) => 0,
        // Without isolate=yes no table is expected: listing may fail where nftables is unused.
        (Err(_), false) => 0,
        (Err(e), true) => {
            log::error(&format!(
                "isolate=yes: could not remove job {job_id}'s firewall tables \
                 (inet {prefix}{job_id}_*): {e}; once no slurmstepd of job {job_id} runs here, \
                 `nft list tables`, `nft delete table inet {prefix}{job_id}_STEP` for each, \
                 then resume the node",
                prefix = isolation::tables::TABLE_PREFIX
            ));
            -1
        }
    }
}
