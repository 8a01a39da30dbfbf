//! What the SPANK shell prints and decides, taken from the core: the `srun -v` line per task,
//! whether srun ran with `-v`, a task's error line, and srun's port check before launch. The
//! shell only passes Slurm's values in and the result out.

mod common;
use common::{plan, step, where_is};
use tfcluster::core::plan::{reports_tasks, task_error_line};
use tfcluster::core::{Error, Settings};

/// (what, plugstack words, the node's CUDA_VISIBLE_DEVICES, rank, the line `srun -v` prints)
#[rustfmt::skip]
const REPORTS: &[(&str, &[&str], Option<&str>, u32, &str)] = &[
    ("its share of the node's GPUs", &["port_base=1000"], Some("0,1,2,3"), 1, "rank 1 is worker:1 at n9:1001, GPUs 2,3"),
    ("gpus=keep: what Slurm gave",   &["port_base=1000", "gpus=keep"], Some("0,1,2,3"), 1, "rank 1 is worker:1 at n9:1001, GPUs 0,1,2,3"),
    ("gpus=keep, none given",        &["port_base=1000", "gpus=keep"], None, 0, "rank 0 is worker:0 at n9:1000, GPUs unset"),
    ("kept off GPUs",                &["port_base=1000", "gpu_roles=none"], Some("0,1"), 0, "rank 0 is worker:0 at n9:1000, GPUs none"),
    ("on the second node",           &["port_base=1000"], Some("0,1,2,3"), 2, "rank 2 is worker:2 at n10:1000, GPUs 0,1"),
];

#[test]
fn each_task_reports_what_it_got_under_srun_v() {
    for (what, admin, gpus, rank, line) in REPORTS {
        let plan = plan("worker:*", admin, &step("n9,n10", "2,2", None));
        let (node, slot) = where_is(&plan, *rank);
        let mut renderers = plan.renderers();
        let env = plan
            .task(node, slot, *gpus, *gpus, None, &mut renderers)
            .unwrap();
        assert_eq!(env.report(*gpus), *line, "{what}");
    }
}

/// (SRUN_DEBUG, whether srun ran with -v: above info, 3)
#[rustfmt::skip]
const SRUN_DEBUG: &[(Option<&str>, bool)] = &[
    (None,        false),
    (Some("3"),   false),
    (Some("4"),   true),
    (Some("10"),  true),
    (Some(""),    false),
    (Some("v"),   false),
    (Some("-4"),  false),
    (Some(" 4"),  false),
];

#[test]
fn tasks_report_only_under_srun_v() {
    for (level, reports) in SRUN_DEBUG {
        assert_eq!(reports_tasks(*level), *reports, "{level:?}");
    }
}

/// (node name, local task, the line's end)
#[rustfmt::skip]
const TASK_ERRORS: &[(Option<&str>, Option<u32>, &str)] = &[
    (Some("n9"), Some(0), " [node n9, local task 0; TF_CONFIG not set]"),
    (None,       Some(3), " [local task 3; TF_CONFIG not set]"),
    (Some("n9"), None,    " [node n9, ; TF_CONFIG not set]"),
    (None,       None,    " [; TF_CONFIG not set]"),
];

#[test]
fn a_tasks_error_line_names_the_node_and_the_task() {
    for (node, task, end) in TASK_ERRORS {
        assert_eq!(
            task_error_line("no GPUs", *node, *task),
            format!("no GPUs{end}")
        );
    }
}

/// (plugstack words, per-job words, tasks, nodes, srun's verdict before launch)
#[rustfmt::skip]
fn port_checks() -> Vec<(&'static [&'static str], &'static str, u32, u32, Result<(), Error>)> {
    vec![
        (&[], "", 4096, 64, Ok(())),
        (&[], "port_base=65534", 5, 2, Err(Error::PortOverflow { base: 65534, tasks: 3 })),
        (&[], "port_base=65533", 5, 2, Ok(())),
        (&[], "port_base=65535", 1, 0, Ok(())),
        (&["isolate=yes"], "port_base=22", 4, 2, Err(Error::PortOutsideIsolatedRange { port: 22, lo: 20000, hi: 32767 })),
        (&["isolate=yes"], "port_base=32766", 4, 2, Ok(())),
        (&["isolate=yes"], "port_base=32766", 6, 2, Err(Error::PortOutsideIsolatedRange { port: 32768, lo: 20000, hi: 32767 })),
        (&["isolate=yes"], "", 4096, 64, Ok(())),
    ]
}

#[test]
fn srun_checks_port_base_before_launch() {
    for (admin, job, tasks, nodes, verdict) in port_checks() {
        let overrides: Vec<(String, String)> = job
            .split_once('=')
            .map(|(k, v)| vec![(k.to_string(), v.to_string())])
            .unwrap_or_default();
        let settings = Settings::from_plugstack(admin)
            .unwrap()
            .with_overrides(&overrides)
            .unwrap();
        assert_eq!(
            settings.check_ports_before_launch(tasks, nodes),
            verdict,
            "{admin:?} {job} {tasks} tasks on {nodes} nodes"
        );
    }
}
