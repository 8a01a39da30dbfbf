"""MultiWorkerMirroredStrategy with tf.distribute.experimental.PreemptionCheckpointHandler, driven
only by the TF_CONFIG tfcluster injected: the recipe for preemption and requeue.

    preempt_train.py CHECKPOINT_DIR STEPS [SLOW_FROM]

On SIGTERM (Slurm's preemption, `scontrol requeue`, the time limit, `--signal`) every task
checkpoints at the same step and exits 42; started again (a requeued job), it resumes from the
checkpoint. The data of each step depends only on the step and the worker, so a run that was
interrupted ends with exactly the weights of one that was not. Each step pauses 0.2 s, and 1 s
from step SLOW_FROM on (a requeued job's first run: tests/common/cluster.rs,
requeued_training_args). Prints:
    RESUMED|<task type>|<task index>|<first step>
    STEP|<step>                          (the chief, after each step)
    RESULT|<task type>|<task index>|<digest of the final weights>
"""
import hashlib
import sys
import time

import numpy as np
import tensorflow as tf

checkpoint_dir, steps = sys.argv[1], int(sys.argv[2])
slow_from = int(sys.argv[3]) if len(sys.argv) > 3 else steps
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
task_type, task_id = resolver.task_type, resolver.task_id
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
cluster = resolver.cluster_spec().as_dict()
worker_id = task_id + (1 if task_type == "worker" and "chief" in cluster else 0)
is_chief = worker_id == 0

with strategy.scope():
    first = tf.VariableAggregation.ONLY_FIRST_REPLICA
    w = tf.Variable(tf.zeros([4, 1]), aggregation=first)
    b = tf.Variable(0.0, aggregation=first)

checkpoint = tf.train.Checkpoint(w=w, b=b)
handler = tf.distribute.experimental.PreemptionCheckpointHandler(resolver, checkpoint, checkpoint_dir)
start = int(handler.total_run_calls)
print(f"RESUMED|{task_type}|{task_id}|{start}", flush=True)

true_w = np.array([[2.0], [-3.0], [0.5], [1.0]], dtype=np.float32)


def batch(step):
    rng = np.random.default_rng([worker_id, step])
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = (x @ true_w + 0.25 + rng.normal(scale=0.1, size=(32, 1))).astype(np.float32)
    return tf.constant(x), tf.constant(y)


@tf.function
def train_step(x, y):
    def replica_fn(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        grads = tape.gradient(loss, [w, b])
        grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, grads)
        w.assign_sub(0.05 * grads[0])
        b.assign_sub(0.05 * grads[1])

    strategy.run(replica_fn, args=(x, y))


for step in range(start, steps):
    handler.run(train_step, *batch(step))
    if is_chief:
        print(f"STEP|{step}", flush=True)
    # A step of real training: time for the test to interrupt it mid-way, and once it was,
    # for Slurm's signal to arrive before training would end.
    time.sleep(0.2 if step < slow_from else 1.0)

weights = np.concatenate([w.numpy().ravel(), np.atleast_1d(b.numpy())]).astype(np.float32)
print(f"RESULT|{task_type}|{task_id}|{hashlib.sha256(weights.tobytes()).hexdigest()[:16]}", flush=True)
