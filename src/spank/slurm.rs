//! The libslurm calls slurmstepd makes for tfcluster, through slurmctld: ending a step,
//! asking where a heterogeneous step's components run, whose a job is, which ports a step
//! has reserved, and whether a step has ended. libslurm is loaded in every process
//! that runs the hooks (the plugin links none of it); each call's form per release comes from
//! build.rs, and tests/abi.rs checks it against the release's `<slurm/slurm.h>`.

use super::ffi;
use super::handle::c_string;
use crate::core::het::{ComponentLayout, JobRecord};
use crate::core::isolation::holding;
use std::ffi::c_int;

/// Ends every task of a step on every node, through slurmctld (`slurm_kill_job_step`, which
/// Slurm's own MPI plugins call from slurmstepd too). Blocks until slurmctld answers. A step
/// that has ended already is not an error: a heterogeneous job's component whose tasks are all
/// done has nothing left to stop. With `signals_succeed` (from 23.11, Slurm's
/// `KILL_NO_SIG_FAIL`), every task status slurmstepd sends afterwards that is a signal counts
/// as a success: the stopped tasks' SIGKILL does not fail the step.
pub fn kill_step(
    job_id: u32,
    step_id: u32,
    signal: c_int,
    signals_succeed: bool,
) -> Result<(), String> {
    let signal = signal as u16;
    #[cfg(tfc_kill_step = "job_step")]
    let _ = signals_succeed; // no such flag before 23.11
    #[cfg(tfc_kill_step = "job_step")]
    // SAFETY: plain integers; libslurm is loaded in every process that runs our hooks.
    let rc = unsafe { ffi::slurm_kill_job_step(job_id, step_id, signal) };
    #[cfg(not(tfc_kill_step = "job_step"))]
    let flags = match signals_succeed {
        true => ffi::TFC_KILL_NO_SIG_FAIL as u16,
        false => 0,
    };
    #[cfg(tfc_kill_step = "job_step_flags")]
    // SAFETY: as above.
    let rc = unsafe { ffi::slurm_kill_job_step(job_id, step_id, signal, flags) };
    #[cfg(tfc_kill_step = "step_id")]
    let rc = {
        let mut id = step_id_of(job_id, ffi::TFC_NO_VAL as u32, step_id);
        // SAFETY: `id` is a valid slurm_step_id_t (tests/abi.rs checks the layout) that
        // outlives the call.
        unsafe { ffi::slurm_kill_job_step(&mut id, signal, flags) }
    };
    unless_ended(rc)
}

/// A signal's return code as a result, where a step that has ended already is not an error
/// ([`kill_step`]; a stop's second kill, `crate::spank::stop`, mostly finds it so).
fn unless_ended(rc: c_int) -> Result<(), String> {
    if rc == 0 {
        return Ok(());
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    if matches!(
        errno,
        ffi::TFC_ESLURM_INVALID_JOB_ID | ffi::TFC_ESLURM_ALREADY_DONE
    ) {
        return Ok(());
    }
    Err(slurm_error_text())
}

/// Ends every task of step `step_id` of a heterogeneous job's first component (`job_id`), on
/// every node: as [`kill_step`], except on 25.11, where slurmctld would cancel every component's
/// whole job for it (build.rs, `het_leader_signal`): there its tasks get the signal from Slurm
/// directly (`slurm_signal_job_step`), and srun reports them killed.
pub fn kill_het_leader_step(
    job_id: u32,
    step_id: u32,
    signal: c_int,
    signals_succeed: bool,
) -> Result<(), String> {
    #[cfg(tfc_het_leader_signal)]
    {
        let _ = signals_succeed; // a signal, not a kill: no such flag
        let mut id = step_id_of(job_id, ffi::TFC_NO_VAL as u32, step_id);
        // SAFETY: `id` is a valid slurm_step_id_t (tests/abi.rs checks the layout and the
        // prototype) that outlives the call.
        let rc = unsafe { ffi::slurm_signal_job_step(&mut id, signal as u32) };
        unless_ended(rc)
    }
    #[cfg(not(tfc_het_leader_signal))]
    kill_step(job_id, step_id, signal, signals_succeed)
}

/// A `slurm_step_id_t` (its `sluid`, from 24.11, left 0: slurmctld then compares the rest).
// Before 24.11 there is no sluid, and every field is named.
#[allow(clippy::needless_update)]
fn step_id_of(job_id: u32, step_het_comp: u32, step_id: u32) -> ffi::tfc_step_id_t {
    ffi::tfc_step_id_t {
        job_id,
        step_het_comp,
        step_id,
        ..Default::default()
    }
}

/// The layout slurmctld made for one component of a step (`slurm_job_step_layout_get`):
/// `het_comp` picks the component of a heterogeneous step; `None` takes the whole step of
/// `job_id` (a heterogeneous job's components are jobs of their own). Blocks until slurmctld
/// answers; its refusal (no such step or component) is the error's text.
pub fn step_layout(
    job_id: u32,
    step_id: u32,
    het_comp: Option<u32>,
) -> Result<ComponentLayout, String> {
    let mut id = step_id_of(job_id, het_comp.unwrap_or(ffi::TFC_NO_VAL as u32), step_id);
    // SAFETY: `id` is a valid slurm_step_id_t for this release (tests/abi.rs checks the layout)
    // that outlives the call; libslurm is loaded in slurmstepd.
    let layout = unsafe { ffi::slurm_job_step_layout_get(&mut id) };
    if layout.is_null() {
        return Err(slurm_error_text());
    }
    // SAFETY: non-NULL, as libslurm made it: `node_cnt` nodes, `tasks[n]` ids in `tids[n]`
    // (tests/abi.rs checks the offsets of every field read); each pointer is checked for NULL.
    let read = unsafe {
        let l = &*layout;
        let node_list = c_string(l.node_list);
        let nodes = l.node_cnt as usize;
        let tids = (!l.tasks.is_null() && !l.tids.is_null()).then(|| {
            (0..nodes)
                .map(|n| {
                    let (count, ids) = (*l.tasks.add(n) as usize, *l.tids.add(n));
                    match ids.is_null() {
                        true => Vec::new(),
                        false => std::slice::from_raw_parts(ids, count).to_vec(),
                    }
                })
                .collect::<Vec<Vec<u32>>>()
        });
        (node_list, tids, l.task_cnt)
    };
    // SAFETY: made by slurm_job_step_layout_get and not used after this.
    unsafe { ffi::slurm_job_step_layout_free(layout) };
    match read {
        (Some(node_list), Some(tids), tasks) => Ok(ComponentLayout {
            node_list,
            tids,
            tasks,
        }),
        _ => Err("slurmctld's layout has no node list or no task ids".into()),
    }
}

/// Whether slurmctld still has step `step_id` of job `job_id` (its layout, which it keeps
/// until the step has ended on every node): `Some(false)` once the step or its job has ended,
/// `None` when slurmctld does not say (not reached, say). Blocks until slurmctld answers.
pub fn step_exists(job_id: u32, step_id: u32) -> Option<bool> {
    let mut id = step_id_of(job_id, ffi::TFC_NO_VAL as u32, step_id);
    // SAFETY: as in [`step_layout`]: a valid slurm_step_id_t that outlives the call.
    let layout = unsafe { ffi::slurm_job_step_layout_get(&mut id) };
    if !layout.is_null() {
        // SAFETY: made by slurm_job_step_layout_get and not used after this.
        unsafe { ffi::slurm_job_step_layout_free(layout) };
        return Some(true);
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    match errno {
        ffi::TFC_ESLURM_INVALID_JOB_ID | ffi::TFC_ESLURM_ALREADY_DONE => Some(false),
        _ => None,
    }
}

/// [`step_exists`] as slurmctld vouches for it ([`holding::step_exists_vouched`]): where it has
/// no such step, it must still have the asker's own job `own_job`, which runs as long as the
/// asker does; one that denies that job too says nothing (`None`).
pub fn step_exists_vouched(job_id: u32, step_id: u32, own_job: u32) -> Option<bool> {
    holding::step_exists_vouched(step_exists(job_id, step_id), || {
        job_record(own_job).ok().map(|record| record.is_some())
    })
}

/// slurmctld's record of job `job_id` (`slurm_load_job`): whom it belongs to and which
/// heterogeneous job it is a component of; `None` when slurmctld has no such job. Blocks until
/// slurmctld answers; root may read any job's record, whatever `PrivateData` says, so what it
/// reads is used only to refuse ([`crate::core::het::vouched_job_ids`]), never printed.
pub fn job_record(job_id: u32) -> Result<Option<JobRecord>, String> {
    let mut msg: *mut ffi::tfc_job_info_msg_t = std::ptr::null_mut();
    let show = ffi::TFC_SHOW_ALL as u16;
    #[cfg(tfc_load_job_step_id)]
    // SAFETY: `msg` is a valid out-pointer; the step id is passed by value, as this release's
    // prototype says (tests/abi.rs).
    let rc = unsafe {
        ffi::slurm_load_job(
            &mut msg,
            step_id_of(job_id, ffi::TFC_NO_VAL as u32, ffi::TFC_NO_VAL as u32),
            show,
        )
    };
    #[cfg(not(tfc_load_job_step_id))]
    // SAFETY: `msg` is a valid out-pointer; plain integers otherwise.
    let rc = unsafe { ffi::slurm_load_job(&mut msg, job_id, show) };
    if rc != 0 || msg.is_null() {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return match errno {
            ffi::TFC_ESLURM_INVALID_JOB_ID => Ok(None),
            _ => Err(slurm_error_text()),
        };
    }
    // SAFETY: non-NULL, as libslurm made it: `record_count` records of JOB_INFO_SIZE bytes at
    // `job_array` (checked NULL), each read within its record at this release's offsets
    // (build.rs; tests/abi.rs checks size and offsets against the release's slurm.h).
    let record = unsafe {
        let msg = &*msg;
        let base = msg.job_array as *const u8;
        let field = |record: usize, offset: usize| {
            std::ptr::read_unaligned(base.add(record * ffi::JOB_INFO_SIZE + offset) as *const u32)
        };
        (0..msg.record_count as usize)
            .filter(|_| !base.is_null())
            .find(|&r| field(r, ffi::JOB_INFO_JOB_ID.1) == job_id)
            .map(|r| JobRecord {
                user_id: field(r, ffi::JOB_INFO_USER_ID),
                het_job_id: field(r, ffi::JOB_INFO_HET_JOB_ID),
            })
    };
    // SAFETY: made by slurm_load_job and not used after this.
    unsafe { ffi::slurm_free_job_info_msg(msg) };
    Ok(record)
}

/// The ports slurmctld reserved for step `step_id` of job `job_id` (`slurm_get_job_steps`),
/// as Slurm writes them (`12000-12003`); `None` when it reserved none, or has no such step.
/// Blocks until slurmctld answers.
pub fn step_reserved_ports(job_id: u32, step_id: u32) -> Result<Option<String>, String> {
    let mut msg: *mut ffi::tfc_job_step_info_response_msg_t = std::ptr::null_mut();
    let show = ffi::TFC_SHOW_ALL as u16;
    #[cfg(tfc_get_job_steps_step_id)]
    let rc = {
        let mut id = step_id_of(job_id, ffi::TFC_NO_VAL as u32, step_id);
        // SAFETY: `id` is a valid slurm_step_id_t and `msg` a valid out-pointer, both
        // outliving the call (tests/abi.rs checks the prototype).
        unsafe { ffi::slurm_get_job_steps(&mut id, &mut msg, show) }
    };
    #[cfg(not(tfc_get_job_steps_step_id))]
    // SAFETY: `msg` is a valid out-pointer; plain integers otherwise.
    let rc = unsafe { ffi::slurm_get_job_steps(0, job_id, step_id, &mut msg, show) };
    if rc != 0 || msg.is_null() {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return match errno {
            ffi::TFC_ESLURM_INVALID_JOB_ID | ffi::TFC_ESLURM_ALREADY_DONE => Ok(None),
            _ => Err(slurm_error_text()),
        };
    }
    // SAFETY: non-NULL, as libslurm made it: `job_step_count` records of JOB_STEP_INFO_SIZE
    // bytes at `job_steps` (checked NULL), each read within its record at this release's
    // offsets (build.rs; tests/abi.rs checks them); `resv_ports` is NULL or a C string.
    let ports = unsafe {
        let msg = &*msg;
        let base = msg.job_steps as *const u8;
        let record = |r: usize| base.add(r * ffi::JOB_STEP_INFO_SIZE);
        let u32_at =
            |r: usize, offset: usize| std::ptr::read_unaligned(record(r).add(offset) as *const u32);
        (0..msg.job_step_count as usize)
            .filter(|_| !base.is_null())
            .find(|&r| {
                u32_at(r, ffi::JOB_STEP_INFO_JOB_ID) == job_id
                    && u32_at(r, ffi::JOB_STEP_INFO_STEP_ID) == step_id
            })
            .and_then(|r| {
                let text =
                    std::ptr::read_unaligned(record(r).add(ffi::JOB_STEP_INFO_RESV_PORTS)
                        as *const *const std::ffi::c_char);
                c_string(text)
            })
    };
    // SAFETY: made by slurm_get_job_steps and not used after this.
    unsafe { ffi::slurm_free_job_step_info_response_msg(msg) };
    Ok(ports)
}

/// Slurm's text for the error number the last libslurm call left.
fn slurm_error_text() -> String {
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: slurm_strerror returns a static string for any number.
    let text = unsafe { ffi::slurm_strerror(errno) };
    // SAFETY: NULL or NUL-terminated, owned by Slurm.
    unsafe { c_string(text) }.unwrap_or_else(|| format!("error {errno}"))
}
