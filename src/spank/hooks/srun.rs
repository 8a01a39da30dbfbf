//! srun (local context): what can be checked before anything launches.

use crate::core::container::{self, ContainerStep};
use crate::core::layout::{Distribution, TASK_HOSTS_VAR};
use crate::core::{hostlist, tf_config, torch, tuner, Error, Settings, Spec};
use crate::spank::error::{ShellError, ENV_OPTION};
use crate::spank::ffi;
use crate::spank::handle::{self, Spank, U32Item};
use crate::spank::log;
use crate::spank::start_env;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

/// srun: the step's components, one per `init_post_opt` (more than one: a heterogeneous step
/// or `--het-group` list).
static COMPONENTS: AtomicU32 = AtomicU32::new(0);

/// srun, once per component of the step, after its options are parsed.
pub fn init_post_opt() -> c_int {
    COMPONENTS.fetch_add(1, Ordering::Relaxed);
    0
}

/// srun: the step's task and node counts and its command are known here; reject what cannot
/// work before anything launches.
pub fn local_user_init(sp: &Spank) -> c_int {
    // Here, not in `init` or `init_post_opt`: srun applies `-v` to its log only after both.
    log::verbose(&super::loaded_line());
    let given = super::given();
    let (option, bare, settings, calls) = (
        given.option.clone(),
        given.bare,
        given.settings(),
        given.option_calls,
    );
    let components = COMPONENTS.load(Ordering::Relaxed);
    // The callback already refused a spec that does not parse.
    let Some(Ok(spec)) = option else {
        return 0;
    };
    // One call, with the job's environment holding the option: srun's own line gave none.
    let from_environment = calls == 1 && std::env::var_os(ENV_OPTION).is_some();
    match check_before_launch(sp, &spec, bare, settings, components) {
        Ok(()) => {
            // Replaced in every task by the nodes' tfcluster: a node without it starts tasks
            // that fail on it, not tasks that train alone.
            if let Err(e) = handle::set_srun_env(tf_config::NAME, tf_config::NOT_SET_ON_THIS_NODE) {
                log::debug(&format!("cannot set TF_CONFIG in srun's environment: {e}"));
            }
            0
        }
        Err(e) => {
            let e = match from_environment {
                true => ShellError::FromEnvironment { error: Box::new(e) },
                false => e,
            };
            log::error(&e.to_string());
            -1
        }
    }
}

fn check_before_launch(
    sp: &Spank,
    spec: &Spec,
    bare: bool,
    settings: Result<Settings, Error>,
    components: u32,
) -> Result<(), ShellError> {
    let (requested, bundle) = (
        std::env::var(container::REQUEST_VAR).ok(),
        std::env::var(container::BUNDLE_VAR).ok(),
    );
    let container = ContainerStep {
        requested: requested.as_deref(),
        bundle: bundle.as_deref(),
        inherited: bundle
            .as_ref()
            .and_then(|_| start_env::had(container::BUNDLE_VAR)),
        release: ffi::SLURM_RELEASE,
        gets_task_env: ffi::CONTAINER_GETS_TASK_ENV,
    };
    if let Some(warning) = container.check()? {
        log::user(&format!("warning: {warning}"));
    }
    if bare {
        if let Some(program) = sp.program().ok().flatten() {
            Spec::check_program(&program)?;
        }
    }
    if components > 1 {
        // srun sees one component's counts only, and a refusal here would leave the other
        // components' steps allocated until the job ends: the nodes, which ask slurmctld for
        // every component, check the spec and stop the whole step with the same message.
        log::debug(&format!(
            "a heterogeneous step of {components} components: the spec is checked on the nodes"
        ));
        return Ok(());
    }
    let (tasks, nodes) = match (
        sp.item_u32(U32Item::TotalTasks),
        sp.item_u32(U32Item::Nodes),
    ) {
        (Ok(tasks), Ok(nodes)) => (tasks, nodes),
        (Err(e), _) | (_, Err(e)) => {
            log::debug(&format!(
                "task or node count not available in srun ({e}); checked on the nodes"
            ));
            return Ok(());
        }
    };
    let roles = spec.resolve(tasks)?;
    let settings = settings.and_then(|s| s.with_overrides(&spec.overrides))?;
    settings.check_ports_before_launch(tasks, nodes)?;
    if settings.tuner {
        tuner::check(&roles)?;
    }
    if settings.torch {
        torch::check(&roles)?;
    }
    pass_hostfile_order(tasks)?;
    log::verbose(&roles.report());
    Ok(())
}

/// srun, with `-m arbitrary`: the nodes cannot see the task order, which only the user's
/// SLURM_HOSTFILE holds; read it here and pass it on in the step's environment. Without a
/// host file (`-m arbitrary -w LIST`) the order is visible nowhere: refused before launch.
fn pass_hostfile_order(tasks: u32) -> Result<(), ShellError> {
    let distribution = std::env::var("SLURM_DISTRIBUTION").ok();
    let arbitrary = matches!(
        Distribution::parse(distribution.as_deref(), None),
        Ok(Distribution::Arbitrary)
    );
    if !arbitrary {
        return Ok(());
    }
    let Some(path) = std::env::var_os("SLURM_HOSTFILE") else {
        return Err(Error::ArbitraryDistribution.into());
    };
    let text = std::fs::read_to_string(&path).map_err(|e| ShellError::Hostfile {
        path: path.to_string_lossy().into_owned(),
        reason: e.to_string(),
    })?;
    let hosts = hostlist::hostfile_task_hosts(&text, tasks)?;
    handle::set_srun_env(TASK_HOSTS_VAR, &hosts.join(",")).map_err(|e| ShellError::PassOrder {
        reason: e.to_string(),
    })
}
