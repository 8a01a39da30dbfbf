"""ParameterServerStrategy training driven only by the TF_CONFIG tfcluster injected.

The chief is the coordinator; ps and worker tasks run a tf.distribute.Server. When the chief is
done it writes $TFC_DONE_FILE, and the servers, which poll for it, exit 0 (a TensorFlow server
otherwise serves forever). Every task prints ROLE|<type>|<index>; the chief prints
    RESULT|<loss after training>|<number of steps run>|<cluster it saw>
"""
import json
import os
import time

import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
task_type, task_id = resolver.task_type, resolver.task_id
done_file = os.environ["TFC_DONE_FILE"]
print(f"ROLE|{task_type}|{task_id}", flush=True)

if task_type in ("ps", "worker"):
    os.environ["GRPC_FAIL_FAST"] = "use_caller"
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=task_type,
        task_index=task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    deadline = time.time() + 240
    while not os.path.exists(done_file):
        if time.time() > deadline:
            raise SystemExit(f"{task_type}:{task_id}: the chief never finished")
        time.sleep(0.2)
    # The server has no clean shutdown; leave without running its destructor.
    os._exit(0)

# The chief: coordinate training on the workers, variables on the parameter servers.
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
results = [coordinator.schedule(step) for _ in range(steps)]
coordinator.join()
final = float(results[-1].fetch())
cluster = resolver.cluster_spec().as_dict()
print(f"RESULT|{final:.6f}|{steps}|{json.dumps(cluster, sort_keys=True)}", flush=True)
with open(done_file, "w") as f:
    f.write("done\n")
os._exit(0)
