"""In one task: TensorFlow's own SlurmClusterResolver beside the TF_CONFIG tfcluster injected.

The resolver gets the same roles (counted from TF_CONFIG) and the same port base
($TFC_PORT_BASE), and reads the same Slurm step variables. Prints one line:
    ORACLE|<rank>|<hostname>|<tfcluster's cluster>|<TensorFlow's cluster>|<tfcluster's task>|<TensorFlow's task>
"""
import json
import os

from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import SlurmClusterResolver

ours = json.loads(os.environ["TF_CONFIG"])
jobs = {role: len(tasks) for role, tasks in ours["cluster"].items()}
resolver = SlurmClusterResolver(
    jobs=jobs,
    port_base=int(os.environ["TFC_PORT_BASE"]),
    gpus_per_node=8,  # no GPUs here; large enough for TensorFlow's own per-node check
    gpus_per_task=1,
    auto_set_gpu=False,
)
theirs = resolver.cluster_spec().as_dict()
task = [resolver.task_type, resolver.task_id]
print(
    "ORACLE|%s|%s|%s|%s|%s|%s"
    % (
        os.environ["SLURM_PROCID"],
        os.uname().nodename,
        json.dumps(ours["cluster"], sort_keys=True),
        json.dumps(theirs, sort_keys=True),
        json.dumps([ours["task"]["type"], ours["task"]["index"]]),
        json.dumps(task),
    ),
    flush=True,
)
