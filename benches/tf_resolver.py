"""TensorFlow's SlurmClusterResolver on the layouts of benches/per_task.rs, in process:
the whole work one task does with it (read the Slurm variables, expand, build the cluster spec).
Usage: tf_resolver.py TASKS... (the step sizes per_task.rs measured).
Prints one JSON object per line: {"tasks": N, "resolver_ns": median ns per task}."""
import json
import os
import statistics
import sys
import timeit

from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import SlurmClusterResolver

PER_NODE = 8


def step_env(tasks):
    nodes = -(-tasks // PER_NODE)
    last = tasks - (nodes - 1) * PER_NODE
    if nodes == 1:
        tpn = str(last)
    elif last == PER_NODE:
        tpn = f"{PER_NODE}(x{nodes})"
    elif nodes == 2:
        tpn = f"{PER_NODE},{last}"
    else:
        tpn = f"{PER_NODE}(x{nodes - 1}),{last}"
    return {
        "SLURM_PROCID": str(tasks // 2),
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_STEP_NODELIST": f"gpu-node[0001-{nodes:04d}]",
        "SLURM_STEP_TASKS_PER_NODE": tpn,
    }


for tasks in map(int, sys.argv[1:]):
    os.environ.update(step_env(tasks))

    def one_task():
        r = SlurmClusterResolver(jobs={"chief": 1, "ps": 2, "worker": tasks - 3}, port_base=8888,
                                 gpus_per_node=8, gpus_per_task=1, auto_set_gpu=False)
        return r.cluster_spec()

    timer = timeit.Timer(one_task)
    number, _ = timer.autorange()
    samples = [t / number for t in timer.repeat(repeat=7, number=number)]
    print(json.dumps({"tasks": tasks, "resolver_ns": int(statistics.median(samples) * 1e9)}), flush=True)
