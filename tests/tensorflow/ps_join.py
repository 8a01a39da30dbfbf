"""ParameterServerStrategy in the shape TensorFlow documents, with nothing added for Slurm: ps and
worker tasks run a tf.distribute.Server and join() it, which never returns; the chief coordinates
training and exits. tfcluster ends the step when the chief exits (end_with_chief).

Every task prints ROLE|<type>|<index>; the chief prints RESULT|<loss>|<steps>|<unix time> when it
is done, then exits with $TFC_CHIEF_EXIT (default 0).

With TFC_FAIL=<type>:<index> and TFC_FAIL_DIR, that server fails mid-training: the chief trains
half of its steps, writes TFC_FAIL_DIR/half, and waits for TFC_FAIL_DIR/failed, which the server
writes 3 s later, just before it exits 3; then the chief trains the other half on the workers left, and
ends with os._exit, as a program that loses a worker for good must (docs/user-guide.md): in
TensorFlow 2.21 ClusterCoordinator's failure handler waits in update_server_def, holding the
cluster's lock, for the lost worker to come back, and its destructor waits for that lock, so
a plain exit hangs until the worker returns (Kubernetes restarts it; Slurm does not).
TFC_FAIL=lost (no server of that name): no server fails by itself; the chief waits, as above,
for TFC_FAIL_DIR/failed, which the test writes once it has taken a worker's node away.
"""
import os
import sys
import time

import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
print(f"ROLE|{resolver.task_type}|{resolver.task_id}", flush=True)

if resolver.task_type in ("ps", "worker"):
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    if os.environ.get("TFC_FAIL") == f"{resolver.task_type}:{resolver.task_id}":
        half = os.path.join(os.environ["TFC_FAIL_DIR"], "half")
        while not os.path.exists(half):
            time.sleep(0.1)
        # Three of the node's looks for the chief's connection (fail_fast=auto looks every second,
        # src/spank/workers.rs): this server stands for one that fails well into training, and
        # one that fails within a look of the chief's first connection may still end the step
        # (half the steps once took under a second: 2026-11-28).
        time.sleep(3)
        open(os.path.join(os.environ["TFC_FAIL_DIR"], "failed"), "w").close()
        os._exit(3)
    server.join()

strategy = tf.distribute.ParameterServerStrategy(resolver)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    w = tf.Variable(tf.zeros([4, 1]))
    b = tf.Variable(0.0)
true_w = tf.constant([[2.0], [-3.0], [0.5], [1.0]])


@tf.function
def step():
    def replica_fn():
        x = tf.random.normal([64, 4])
        y = tf.matmul(x, true_w) + 0.25
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(0.05 * gw)
        b.assign_sub(0.05 * gb)
        return loss

    return strategy.run(replica_fn)


steps = 60
results = [coordinator.schedule(step) for _ in range(steps // 2)]
coordinator.join()
if os.environ.get("TFC_FAIL"):
    fail_dir = os.environ["TFC_FAIL_DIR"]
    open(os.path.join(fail_dir, "half"), "w").close()
    end = time.time() + 60
    while not os.path.exists(os.path.join(fail_dir, "failed")) and time.time() < end:
        time.sleep(0.1)
results += [coordinator.schedule(step) for _ in range(steps - steps // 2)]
coordinator.join()
final = float(results[-1].fetch())
print(f"RESULT|{final:.6f}|{steps}|{time.time():.3f}", flush=True)
if os.environ.get("TFC_FAIL"):
    sys.stderr.flush()
    os._exit(int(os.environ.get("TFC_CHIEF_EXIT", "0")))
sys.exit(int(os.environ.get("TFC_CHIEF_EXIT", "0")))
