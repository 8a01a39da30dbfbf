//! Each task's own process (`task_init`, between slurmstepd's fork and `execve`): hand the task
//! its part of the node's plan ([`super::stepd`] made it, before the forks), or end it with the
//! line that says why it cannot have it.

use super::stepd::{state, Node};
use crate::core::check;
use crate::core::error::OnError;
use crate::core::gpu_affinity::{self, Hardware, TaskCpus};
use crate::core::gpus;
use crate::core::plan::{self, UNSET_ON_ERROR};
use crate::spank::error::ShellError;
use crate::spank::handle::{self, Spank};
use crate::spank::hardware;
use crate::spank::log;
use crate::spank::process;
use crate::spank::task_env;
use crate::spank::timing;
use std::ffi::c_int;

/// Each task, just before `execve`: set every variable the plan gives it (TF_CONFIG,
/// CUDA_VISIBLE_DEVICES, ...). A task that cannot have them never starts its program, whether
/// plugstack.conf says `required` (where Slurm would end it too) or `optional` (where Slurm
/// would start it without TF_CONFIG): it ends with status 1 after its line, and the step goes
/// on or stops as the error says ([`OnError`]).
pub fn task_init(sp: &Spank) -> c_int {
    let mut state = state();
    if let Some(verdict) = &state.check_verdict {
        // `--tf-cluster=check`: the node's first task says the node's line; a node that would
        // refuse a step or run one unprotected fails it, so srun exits non-zero.
        if sp.task_id().is_ok_and(|t| t == 0) {
            if verdict.fails {
                log::error(&verdict.line);
                handle::end_task(1);
            }
            log::user(&verdict.line);
        }
        // The node answered: the check's program (printenv) finds its name.
        if let Err(e) = sp.setenv(check::ANSWERED_VAR, &verdict.node) {
            log::error(&format!("cannot set {}: {e}", check::ANSWERED_VAR));
        }
        return 0;
    }
    let Some(planned) = &mut state.plan else {
        return 0;
    };
    let applied = match planned {
        Ok(node) => apply(sp, node),
        Err(e) => Err(e.clone()),
    };
    let Err(e) = applied else {
        return 0;
    };
    for name in UNSET_ON_ERROR {
        let _ = sp.unsetenv(name);
    }
    let on_error = e.on_error();
    if on_error == OnError::StopFromFirstTask {
        // The node's first task says why and stops the step: the other nodes' tasks, which may
        // have started, would otherwise wait for these.
        if sp.task_id().is_ok_and(|t| t == 0) {
            log::error(&e.to_string());
            if let Some(stop) = &state.stop {
                stop.now();
            }
        }
        handle::end_task(1);
    }
    let node = match planned {
        Ok(node) => node.name.clone(),
        Err(_) => process::node_name(),
    };
    log::error(&plan::task_error_line(
        &e.to_string(),
        node.as_deref(),
        sp.task_id().ok(),
    ));
    if on_error == OnError::StopFromEachTask {
        if let Some(stop) = &state.stop {
            stop.now();
        }
    }
    handle::end_task(1)
}

fn apply(sp: &Spank, node: &mut Node) -> Result<(), ShellError> {
    let local = sp.task_id().map_err(|err| ShellError::Item {
        what: "the local task id",
        err,
    })? as usize;
    let task_gpus = sp.getenv(gpus::VAR).map_err(|err| ShellError::Env {
        name: gpus::VAR,
        err,
    })?;
    // The task's program, for apptainer_env=auto; unknown counts as not Apptainer.
    let program = sp.program().ok().flatten();
    timing::phase("read");
    // The job's own value of a variable tfcluster only defaults wins.
    let own = |name: &str| node.job_sets.contains(&name);
    // Where the node's GPUs are split: Slurm's binding of its tasks, and this task's CPUs.
    let cpus = node.gpu_cpus.as_ref().map(|_| TaskCpus {
        bind_type: sp.getenv(gpu_affinity::BIND_TYPE).ok().flatten(),
        list: sp.getenv(gpu_affinity::BIND_LIST).ok().flatten(),
        own: hardware::own_cpus(),
        local,
    });
    let hardware = node
        .gpu_cpus
        .as_ref()
        .zip(cpus.as_ref())
        .map(|(gpu_cpus, cpus)| Hardware {
            gpu_cpus,
            cpus,
            slots: &node.place.slots,
        });
    let env = node.plan.task(
        &node.place,
        local,
        task_gpus.as_deref(),
        program.as_deref(),
        &own,
        hardware,
        &mut node.renderers,
    )?;
    timing::phase("environment");
    for &name in env.unset {
        let _ = sp.unsetenv(name);
    }
    // Each into the task's own entry of its name where slurmstepd made one ([`task_env`]),
    // otherwise through Slurm.
    for (name, value) in &env.set {
        if !task_env::write(sp, name, value, &node.premade) {
            sp.setenv_nul(name, value)
                .map_err(|err| ShellError::SetEnv { name, err })?;
        }
        timing::phase(name);
    }
    if !node.presets.is_empty() {
        let given: Vec<&str> = env.set.iter().map(|(name, _)| *name).collect();
        task_env::unset_leftovers(sp, &node.presets, &given);
    }
    if let (0, Some(oci)) = (local, &node.oci) {
        // Once per node: Slurm would keep some of them from the program.
        if let Some(warning) = oci.warning(&node.plan.hosts[node.place.node], &env.set) {
            log::user(&format!("warning: {warning}"));
        }
    }
    if env.rank == 0 {
        // Once per step: why some GPUs stay unused, why the reserved ports were not taken.
        let gpu_note = node.plan.gpu_note(node.place.step_gpus());
        for note in gpu_note.iter().chain(&node.reservation_note) {
            log::user(note);
        }
    }
    if node.verbose {
        if let (0, Some(note)) = (local, &node.collectives_note) {
            log::user(note);
        }
        log::user(&env.report(task_gpus.as_deref()));
        if let Some(basis) = &env.gpu_basis {
            log::user(&basis.line(&node.plan.hosts[node.place.node], env.rank));
        }
    }
    Ok(())
}
