//! TensorFlow's SlurmClusterResolver test suite (TF >= 2.12), case by case: the compatibility
//! contract. Then the cases where TensorFlow is wrong (X11-X15 in
//! shared/reference/tf-resolver.md) and what tfcluster does instead.
//!
//! TensorFlow's default port base is 8888; tfcluster's default avoids collisions, so these
//! cases give `port_base=8888` as TensorFlow's users would.

mod common;
use common::*;
use serde_json::json;
use tfcluster::core::GpuAction;

const TF: &[&str] = &["port_base=8888"];
const NODES: &str = "t02n13,t02n41,t02n43";

#[test]
fn r1_simple_retrieval_from_env() {
    // E_full, CUDA_VISIBLE_DEVICES=0, SlurmClusterResolver()
    let p = plan("worker:*", TF, &step(NODES, "1(x3)", None));
    assert_eq!(
        tf_config(&p, 0),
        json!({"cluster": {"worker": ["t02n13:8888", "t02n41:8888", "t02n43:8888"]},
               "task": {"type": "worker", "index": 0}})
    );
    // master('worker', 0) == 'grpc://t02n13:8888' is TensorFlow's formatting of this entry.
    assert_eq!(gpus(&p, 0, Some("0"), Some("0")), set("0"));
}

#[test]
fn r2_r4_ps_and_workers_one_task_per_node() {
    let p = plan("ps:1,worker:2", TF, &step(NODES, "1(x3)", None));
    let cluster = json!({"ps": ["t02n13:8888"], "worker": ["t02n41:8888", "t02n43:8888"]});
    assert_eq!(
        tf_config(&p, 0),
        json!({"cluster": cluster, "task": {"type": "ps", "index": 0}})
    );
}

#[test]
fn r3_master_addresses() {
    // r.master() for (worker, 1) is grpc://t02n43:8888 and for (ps, 0) ab://t02n13:8888.
    let p = plan("ps:1,worker:2", TF, &step(NODES, "1(x3)", None));
    let c = tf_config(&p, 2);
    assert_eq!(c["cluster"]["worker"][1], "t02n43:8888");
    assert_eq!(c["cluster"]["ps"][0], "t02n13:8888");
    assert_eq!(c["task"], json!({"type": "worker", "index": 1}));
}

#[test]
fn r5_several_tasks_per_node_one_gpu_each() {
    // E_multi: SLURM_PROCID=1, 2(x2),1; 2 GPUs per node, 1 per task
    let p = plan("ps:1,worker:4", TF, &step(NODES, "2(x2),1", None));
    let cluster = json!({"ps": ["t02n13:8888"],
                         "worker": ["t02n13:8889", "t02n41:8888", "t02n41:8889", "t02n43:8888"]});
    assert_eq!(
        tf_config(&p, 1),
        json!({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    );
    assert_eq!(gpus(&p, 1, Some("0,1"), Some("0,1")), set("1"));
}

#[test]
fn r6_several_gpus_per_task() {
    let p = plan("ps:1,worker:4", TF, &step(NODES, "2(x2),1", None));
    assert_eq!(gpus(&p, 1, Some("0,1,2,3"), Some("0,1,2,3")), set("2,3"));
}

#[test]
fn x11_rank_order_follows_slurm_not_a_sort() {
    // TensorFlow sorts host names: worker = [n10, n9] and rank 0 is told it is n10. It runs on n9.
    let p = plan("worker:*", TF, &step("n[9-10]", "1(x2)", None));
    assert_eq!(
        tf_config(&p, 0)["cluster"]["worker"],
        json!(["n9:8888", "n10:8888"])
    );
    // The order Slurm really used on the test cluster:
    let p = plan("worker:*", TF, &step("n[011-012,9-10]", "1(x4)", None));
    assert_eq!(
        tf_config(&p, 0)["cluster"]["worker"],
        json!(["n011:8888", "n012:8888", "n9:8888", "n10:8888"])
    );
}

#[test]
fn cyclic_placement_is_real() {
    // TensorFlow assumes block: with -m cyclic it gives rank 1 to the first node. Slurm put it on b.
    let p = plan("worker:*", TF, &step("a,b", "2(x2)", Some("cyclic")));
    assert_eq!(
        tf_config(&p, 0)["cluster"]["worker"],
        json!(["a:8888", "b:8888", "a:8889", "b:8889"])
    );
}

#[rustfmt::skip]
#[test]
fn x12_to_x15_gpu_cases() {
    let one_node = |tasks: &str| plan("worker:*", TF, &step("a", tasks, None));
    // X12: CUDA_VISIBLE_DEVICES='' (no GPUs) -> left alone (TensorFlow: ValueError)
    assert_eq!(gpus(&one_node("2"), 1, Some(""), Some("")),                     GpuAction::Leave);
    // X13: --gpus-per-task=1: Slurm bound each task already -> kept (TensorFlow: ValueError)
    assert_eq!(gpus(&one_node("4"), 2, Some("0,1,2,3"), Some("2")),             GpuAction::Leave);
    // X14: no GPUs at all -> unset stays unset (TensorFlow: ValueError, issue #56894)
    assert_eq!(gpus(&one_node("2"), 0, None, None),                             GpuAction::Leave);
    // X15: the tokens Slurm gave are split, not renumbered (TensorFlow: '1')
    assert_eq!(gpus(&one_node("2"), 1, Some("2,3"), Some("2,3")),               set("3"));
    // X19: 4 GPUs, 3 tasks: one each, GPU 3 unused
    assert_eq!(gpus(&one_node("3"), 2, Some("0,1,2,3"), Some("0,1,2,3")),       set("2"));
    // UUIDs are tokens too
    assert_eq!(gpus(&one_node("2"), 1, Some("GPU-aa,GPU-bb"), Some("GPU-aa,GPU-bb")), set("GPU-bb"));
}

#[test]
fn x18_alphabetical_roles_put_chief_first() {
    let p = plan(
        "worker:1,ps:1,evaluator:1,chief:1",
        TF,
        &step("a,b,c,d", "1(x4)", None),
    );
    let cluster = json!({"chief": ["a:8888"], "ps": ["c:8888"], "worker": ["d:8888"]});
    assert_eq!(
        tf_config(&p, 0),
        json!({"cluster": cluster, "task": {"type": "chief", "index": 0}})
    );
    // The evaluator (rank 1, on b) is not in the training cluster; it sees itself alone, as
    // TensorFlow's tutorial writes it.
    assert_eq!(
        tf_config(&p, 1),
        json!({"cluster": {"evaluator": ["b:8888"]}, "task": {"type": "evaluator", "index": 0}})
    );
}

#[test]
fn x20_uneven_counts() {
    let p = plan("worker:*", TF, &step("a,b", "2,1", None));
    assert_eq!(
        tf_config(&p, 2)["cluster"]["worker"],
        json!(["a:8888", "a:8889", "b:8888"])
    );
    // Every worker gets the busiest node's share (all-reduce needs equal counts); b's second
    // GPU stays unused unless even_gpus=no.
    assert_eq!(gpus(&p, 2, Some("0,1"), Some("0,1")), set("0"));
    let p = plan("worker:*,even_gpus=no", TF, &step("a,b", "2,1", None));
    assert_eq!(gpus(&p, 2, Some("0,1"), Some("0,1")), set("0,1"));
}
