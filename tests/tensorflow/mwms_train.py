"""MultiWorkerMirroredStrategy training driven only by the TF_CONFIG tfcluster injected.

No Slurm code: the strategy comes from TFConfigClusterResolver(). Each worker trains on its own
data (seeded by its id in the cluster), so the workers' weights stay equal only because every
step all-reduces the gradients across the cluster. Prints STARTED|<task type>|<task index> before connecting to the cluster, then one line:
    RESULT|<task type>|<task index>|<loss>|<digest of the final weights>|<digest of the same
           training on this worker's data alone>|<cluster it saw>
The last digest differs between workers: only the all-reduce makes the others agree.
An evaluator task (not part of the training cluster) only reports its role and exits.
"""
import hashlib
import json
import os

import numpy as np
import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
task_type, task_id = resolver.task_type, resolver.task_id
cluster = resolver.cluster_spec().as_dict()

if task_type == "evaluator":
    # A side-car: it knows its role, and the trainers never wait for it.
    print(f"EVALUATOR|{task_type}|{task_id}|{'evaluator' in cluster}|{json.dumps(cluster, sort_keys=True)}", flush=True)
    raise SystemExit(0)

# The strategy connects to every other task: a line before it shows the task got this far.
print(f"STARTED|{task_type}|{task_id}", flush=True)
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
# The global id of this worker among the trainers (chief first), as TensorFlow numbers them.
worker_id = task_id + (1 if task_type == "worker" and "chief" in cluster else 0)

rng = np.random.default_rng(1000 + worker_id)
true_w = np.array([[2.0], [-3.0], [0.5], [1.0]], dtype=np.float32)
x_data = rng.normal(size=(256, 4)).astype(np.float32)
y_data = (x_data @ true_w + 0.25 + rng.normal(scale=0.1, size=(256, 1))).astype(np.float32)

with strategy.scope():
    first = tf.VariableAggregation.ONLY_FIRST_REPLICA
    w = tf.Variable(tf.zeros([4, 1]), aggregation=first)
    b = tf.Variable(0.0, aggregation=first)


@tf.function
def train_step(x, y):
    def replica_fn(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        grads = tape.gradient(loss, [w, b])
        grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, grads)
        w.assign_sub(0.1 * grads[0])
        b.assign_sub(0.1 * grads[1])
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, loss)

    return strategy.run(replica_fn, args=(x, y))


for step in range(40):
    lo = (step * 32) % 256
    loss = train_step(tf.constant(x_data[lo:lo + 32]), tf.constant(y_data[lo:lo + 32]))

def local_only():
    """The same 40 steps without the all-reduce: what this worker would learn alone."""
    lw, lb = np.zeros((4, 1), np.float32), np.float32(0.0)
    for step in range(40):
        lo = (step * 32) % 256
        x, y = x_data[lo:lo + 32], y_data[lo:lo + 32]
        err = x @ lw + lb - y
        lw = lw - 0.1 * (2 * x.T @ err / len(x))
        lb = lb - 0.1 * np.float32(2 * err.mean())
    return hashlib.sha256(np.concatenate([lw.ravel(), [lb]]).astype(np.float32).tobytes()).hexdigest()[:16]


weights = np.concatenate([w.numpy().ravel(), np.atleast_1d(b.numpy())]).astype(np.float32)
digest = hashlib.sha256(weights.tobytes()).hexdigest()[:16]
loss = float(strategy.experimental_local_results(loss)[0])
print(f"RESULT|{task_type}|{task_id}|{loss:.6f}|{digest}|{local_only()}|{json.dumps(cluster, sort_keys=True)}", flush=True)
