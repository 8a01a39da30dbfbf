//! What the SPANK shell prints and decides, taken from the core: the `srun -v` lines (srun's, and
//! one per task),
//! whether srun ran with `-v`, a task's error line, and srun's port check before launch. The
//! shell only passes Slurm's values in and the result out.

mod common;
use common::{place, plan, step, where_is};
use tfcluster::core::plan::{reports_tasks, task_error_line};
use tfcluster::core::{Error, Settings, Spec};

/// One task of a 4-task step on n9 and n10 under `srun -v`.
struct Report {
    what: &'static str,
    admin: &'static [&'static str],
    /// The node's CUDA_VISIBLE_DEVICES.
    gpus: Option<&'static str>,
    rank: u32,
    line: &'static str,
}

#[rustfmt::skip]
const REPORTS: &[Report] = &[
    Report { what: "its share of the node's GPUs", admin: &["port_base=1000"], gpus: Some("0,1,2,3"), rank: 1,
             line: "rank 1 is worker:1 at n9:1001, GPUs 2,3" },
    Report { what: "gpus=keep: what Slurm gave", admin: &["port_base=1000", "gpus=keep"], gpus: Some("0,1,2,3"), rank: 1,
             line: "rank 1 is worker:1 at n9:1001, GPUs 0,1,2,3" },
    Report { what: "gpus=keep, none given", admin: &["port_base=1000", "gpus=keep"], gpus: None, rank: 0,
             line: "rank 0 is worker:0 at n9:1000, GPUs unset" },
    Report { what: "kept off GPUs", admin: &["port_base=1000", "gpu_roles=none"], gpus: Some("0,1"), rank: 0,
             line: "rank 0 is worker:0 at n9:1000, GPUs none" },
    Report { what: "on the second node", admin: &["port_base=1000"], gpus: Some("0,1,2,3"), rank: 2,
             line: "rank 2 is worker:2 at n10:1000, GPUs 0,1" },
];

#[test]
fn each_task_reports_what_it_got_under_srun_v() {
    for r in REPORTS {
        let plan = plan("worker:*", r.admin, &step("n9,n10", "2,2", None));
        let (node, slot) = where_is(&plan, r.rank);
        let mut renderers = plan.renderers();
        let env = plan
            .task(
                &place(&plan, node, r.gpus),
                slot,
                r.gpus,
                None,
                &|_| false,
                None,
                &mut renderers,
            )
            .unwrap();
        assert_eq!(env.report(r.gpus), r.line, "{}", r.what);
    }
}

/// srun's own line under `srun -v`, once per step: (spec, the step's tasks, the line).
#[rustfmt::skip]
const STEP_REPORTS: &[(&str, u32, &str)] = &[
    ("chief:1,worker:*",      2, "2 tasks as chief:1,worker:1"),
    ("chief:1,ps:2,worker:*", 8, "8 tasks as chief:1,ps:2,worker:5"),
    ("worker:*,ps:1",         3, "3 tasks as ps:1,worker:2"),
];

#[test]
fn srun_reports_the_roles_under_srun_v() {
    for (spec, tasks, line) in STEP_REPORTS {
        let roles = Spec::parse(Some(spec)).unwrap().resolve(*tasks).unwrap();
        assert_eq!(roles.report(), *line, "{spec}");
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
    (Some("n9"), None,    " [node n9; TF_CONFIG not set]"),
    (None,       None,    " [TF_CONFIG not set]"),
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

/// srun's verdict on a step's ports before launch.
struct PortCheck {
    admin: &'static [&'static str],
    /// A per-job `key=value` in `--tf-cluster`, or "".
    job: &'static str,
    tasks: u32,
    nodes: u32,
    verdict: Result<(), Error>,
}

#[rustfmt::skip]
fn port_checks() -> Vec<PortCheck> {
    vec![
        PortCheck { admin: &[], job: "", tasks: 4096, nodes: 64, verdict: Ok(()) },
        PortCheck { admin: &[], job: "port_base=65534", tasks: 5, nodes: 2, verdict: Err(Error::PortOverflow { base: 65534, tasks: 3 }) },
        PortCheck { admin: &[], job: "port_base=65533", tasks: 5, nodes: 2, verdict: Ok(()) },
        PortCheck { admin: &[], job: "port_base=65535", tasks: 1, nodes: 0, verdict: Ok(()) },
        PortCheck { admin: &["isolate=yes"], job: "port_base=22", tasks: 4, nodes: 2,
                    verdict: Err(Error::PortOutsideIsolatedRange { port: 22, lo: 20000, hi: 32767 }) },
        PortCheck { admin: &["isolate=yes"], job: "port_base=32766", tasks: 4, nodes: 2, verdict: Ok(()) },
        PortCheck { admin: &["isolate=yes"], job: "port_base=32766", tasks: 6, nodes: 2,
                    verdict: Err(Error::PortOutsideIsolatedRange { port: 32768, lo: 20000, hi: 32767 }) },
        PortCheck { admin: &["isolate=yes"], job: "", tasks: 4096, nodes: 64, verdict: Ok(()) },
    ]
}

#[test]
fn srun_checks_port_base_before_launch() {
    for c in port_checks() {
        let overrides: Vec<(String, String)> = c
            .job
            .split_once('=')
            .map(|(k, v)| vec![(k.to_string(), v.to_string())])
            .unwrap_or_default();
        let settings = Settings::from_plugstack(c.admin)
            .unwrap()
            .with_overrides(&overrides)
            .unwrap();
        assert_eq!(
            settings.check_ports_before_launch(c.tasks, c.nodes),
            c.verdict,
            "{:?} {} {} tasks on {} nodes",
            c.admin,
            c.job,
            c.tasks,
            c.nodes
        );
    }
}
