//! `--tf-cluster` specs and the ranks each role gets: roles take contiguous slices of global
//! ranks in TensorFlow's order (chief < evaluator < master < ps < worker), whatever order the
//! user wrote them in.

#![allow(clippy::type_complexity)] // tables of cases

mod common;
use common::*;
use tfcluster::core::{Role, Spec};
use Role::*;

/// (spec, step's tasks, [(role, first rank, count)])
#[rustfmt::skip]
const CASES: &[(&str, u32, &[(Role, u32, u32)])] = &[
    ("",                           4, &[(Worker, 0, 4)]),
    ("worker:*",                   4, &[(Worker, 0, 4)]),
    ("worker:4",                   4, &[(Worker, 0, 4)]),
    ("ps:1,worker:3",              4, &[(Ps, 0, 1), (Worker, 1, 3)]),
    ("worker:3,ps:1",              4, &[(Ps, 0, 1), (Worker, 1, 3)]),
    ("chief:1,ps:2,worker:*",     11, &[(Chief, 0, 1), (Ps, 1, 2), (Worker, 3, 8)]),
    ("chief:1,ps:*,worker:2",      6, &[(Chief, 0, 1), (Ps, 1, 3), (Worker, 4, 2)]),
    ("chief:1,evaluator:1,worker:*", 4, &[(Chief, 0, 1), (Evaluator, 1, 1), (Worker, 2, 2)]),
    ("evaluator:*,worker:2",       3, &[(Evaluator, 0, 1), (Worker, 1, 2)]),
    ("master:1,ps:1,worker:*",     3, &[(Master, 0, 1), (Ps, 1, 1), (Worker, 2, 1)]),
    (" chief:1 , worker:* ",       2, &[(Chief, 0, 1), (Worker, 1, 1)]),
    ("chief:1,worker:*,port_base=9000", 2, &[(Chief, 0, 1), (Worker, 1, 1)]),
];

#[test]
fn roles_take_contiguous_rank_slices_in_tensorflow_order() {
    for (text, tasks, want) in CASES {
        let table = Spec::parse(Some(text)).unwrap().resolve(*tasks).unwrap();
        let got: Vec<(Role, u32, u32)> = table
            .slices
            .iter()
            .map(|s| (s.role, s.start, s.count))
            .collect();
        assert_eq!(got, *want, "{text:?} on {tasks} tasks");
        assert_eq!(table.total(), *tasks);
    }
}

#[test]
fn no_spec_means_all_workers() {
    assert_eq!(
        Spec::parse(None).unwrap(),
        Spec::parse(Some("worker:*")).unwrap()
    );
}

#[test]
fn rank_lookup() {
    let table = Spec::parse(Some("chief:1,ps:2,worker:*"))
        .unwrap()
        .resolve(6)
        .unwrap();
    let got: Vec<_> = (0..7).map(|r| table.of_rank(r)).collect();
    assert_eq!(
        got,
        [
            Some((Chief, 0)),
            Some((Ps, 0)),
            Some((Ps, 1)),
            Some((Worker, 0)),
            Some((Worker, 1)),
            Some((Worker, 2)),
            None
        ]
    );
}

#[test]
fn per_job_overrides_are_kept_for_settings() {
    let spec = Spec::parse(Some("worker:*,port_base=9000,rpc_layer=grpc")).unwrap();
    assert_eq!(
        spec.overrides,
        [
            ("port_base".to_string(), "9000".to_string()),
            ("rpc_layer".to_string(), "grpc".to_string())
        ]
    );
}

/// The option as Slurm hands it to the callback, as the user typed it: (argument, what srun
/// makes of it). `None` is a bare `--tf-cluster`.
#[rustfmt::skip]
const TYPED: &[(Option<&str>, Result<Option<&str>, &str>)] = &[
    (None,                   Ok(None)),
    (Some("(null)"),         Ok(None)),   // sbatch/salloc pass a bare option on like this
    (Some("chief:1,worker:*"), Ok(Some("chief:1,worker:*"))),
    (Some(""),               Err("--tf-cluster= is empty")),
    (Some("  "),             Err("--tf-cluster= is empty")),
];

#[test]
fn the_option_as_typed() {
    for (raw, want) in TYPED {
        let arg = Spec::slurm_arg(*raw);
        let got = Spec::check_typed(arg)
            .map(|()| arg)
            .map_err(|e| e.to_string());
        match (got, want) {
            (Ok(a), Ok(w)) => assert_eq!(a, *w, "{raw:?}"),
            (Err(e), Err(w)) => assert!(e.starts_with(w), "{raw:?}: {e}"),
            (got, _) => panic!("{raw:?}: got {got:?}, want {want:?}"),
        }
    }
}

/// `--tf-cluster=off` and nothing else opts a step out: (the option's argument, off?).
#[rustfmt::skip]
#[test]
fn off_opts_a_step_out() {
    let cases: &[(Option<&str>, bool)] = &[
        (Some("off"),              true),
        (Some(" off "),            true),
        (Some("OFF"),              false),
        (Some("off:1"),            false),
        (Some("worker:*,off"),     false),
        (None,                     false),
        (Some(""),                 false),
    ];
    for (arg, off) in cases {
        assert_eq!(Spec::is_off(*arg), *off, "{arg:?}");
    }
}

/// (the program srun was asked to run after a bare `--tf-cluster`, refused?)
#[rustfmt::skip]
const PROGRAMS: &[(&str, bool)] = &[
    ("ps:1,worker:3",          true),
    ("chief:1,worker:*",       true),
    ("worker:*",               true),
    ("python",                 false),
    ("./train.py",             false),
    ("/opt/bin/run:v2",        false),   // a ':' alone does not make a spec
    ("port_base=9000",         false),   // settings only, no roles
];

#[test]
fn a_spec_given_as_the_program_is_caught() {
    for (program, refused) in PROGRAMS {
        assert_eq!(Spec::check_program(program).is_err(), *refused, "{program}");
    }
}

/// (spec, the TF_CONFIG `cluster` of the chief and of the evaluator) on nodes a, b with two tasks
/// each and port_base=9000: trainers never list the evaluator; the evaluator sees itself alone,
/// as TensorFlow documents, or the trainers too for Estimator.
#[rustfmt::skip]
const EVALUATOR_VIEWS: &[(&str, &str, &str)] = &[
    ("chief:1,evaluator:1,worker:*",
     r#"{"chief":["a:9000"],"worker":["b:9000","b:9001"]}"#,
     r#"{"evaluator":["a:9001"]}"#),
    ("chief:1,evaluator:1,worker:*,evaluator_cluster=training",
     r#"{"chief":["a:9000"],"worker":["b:9000","b:9001"]}"#,
     r#"{"chief":["a:9000"],"evaluator":["a:9001"],"worker":["b:9000","b:9001"]}"#),
    ("chief:1,evaluator:1,ps:1,worker:*,evaluator_cluster=training",
     r#"{"chief":["a:9000"],"ps":["b:9000"],"worker":["b:9001"]}"#,
     r#"{"chief":["a:9000"],"evaluator":["a:9001"],"ps":["b:9000"],"worker":["b:9001"]}"#),
];

#[test]
fn what_the_evaluator_sees() {
    for (spec, chief, evaluator) in EVALUATOR_VIEWS {
        let p = plan(spec, &["port_base=9000"], &step("a,b", "2,2", None));
        let (c, e) = (tf_config(&p, 0), tf_config(&p, 1));
        assert_eq!(c["task"], serde_json::json!({"type": "chief", "index": 0}));
        assert_eq!(
            e["task"],
            serde_json::json!({"type": "evaluator", "index": 0})
        );
        assert_eq!(c["cluster"].to_string(), *chief, "{spec}: the chief's");
        assert_eq!(
            e["cluster"].to_string(),
            *evaluator,
            "{spec}: the evaluator's"
        );
    }
}

/// (spec, tasks per node, distribution, DTENSOR_JOBS): every task's address in rank order, on
/// the ports of TF_CONFIG; `DTENSOR_CLIENT_ID` is the rank.
#[rustfmt::skip]
const DTENSOR: &[(&str, &str, Option<&str>, Option<&str>)] = &[
    ("worker:*,dtensor=yes",       "2,1", None,           Some("a:9000,a:9001,b:9000")),
    ("worker:*,dtensor=yes",       "2,1", Some("cyclic"), Some("a:9000,b:9000,a:9001")),
    ("chief:1,worker:*,dtensor=yes", "1,1", None,         Some("a:9000,b:9000")),
    ("worker:*",                   "2,1", None,           None), // opt-in
];

#[test]
fn dtensor_clients() {
    for (spec, counts, dist, want) in DTENSOR {
        let p = plan(spec, &["port_base=9000"], &step("a,b", counts, *dist));
        assert_eq!(p.dtensor_jobs(), *want, "{spec} {counts} {dist:?}");
    }
}
