"""An evaluator beside training, the way TensorFlow documents it, driven only by TF_CONFIG.

No Slurm code. Trainers (chief and workers) train a Keras model with
MultiWorkerMirroredStrategy and save one checkpoint (the chief into the shared directory given
as argv[1], the others into their own, as TensorFlow's multi-worker guide says). The evaluator
builds MultiWorkerMirroredStrategy on itself (a one-replica strategy: it must find its own role
in its cluster) and runs tf.keras.utils.SidecarEvaluator on the chief's checkpoints, which waits
for the checkpoint and may run on after the trainers have exited. Prints one line per task:
    TRAINED|<type>|<index>|<weights>|<eval loss, computed here with numpy>|<cluster>
    EVALUATED|evaluator|<index>|<replicas>|<weights>|<eval loss from SidecarEvaluator>|<cluster>
<weights> are the model's float32 weights, byte for byte (hex): the evaluator's equal the
trainers' only if it evaluated the weights they trained. The two losses are the same number
summed in another order (numpy, TensorFlow's metric), so they agree to about 1e-6, not exactly.
"""
import json
import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras = tf_keras, which has SidecarEvaluator

import numpy as np
import tensorflow as tf
import tf_keras

shared = sys.argv[1]
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
task_type, task_id = resolver.task_type, resolver.task_id
cluster = resolver.cluster_spec().as_dict()
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)

rng = np.random.default_rng(7)
true_w = np.array([[2.0], [-3.0], [0.5], [1.0]], dtype=np.float32)
x = rng.normal(size=(256, 4)).astype(np.float32)
y = (x @ true_w + 0.25).astype(np.float32)
eval_data = tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(64)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
eval_data = eval_data.with_options(options)


def exact(model):
    """The model's weights, byte for byte."""
    return "".join(np.asarray(v, dtype=np.float32).tobytes().hex() for v in model.get_weights())


with strategy.scope():
    model = tf_keras.Sequential([tf_keras.Input(shape=(4,)), tf_keras.layers.Dense(1)])
    model.compile(optimizer=tf_keras.optimizers.SGD(0.05), loss="mse", metrics=["mse"])

if task_type == "evaluator":
    tf_keras.utils.SidecarEvaluator(model, eval_data, checkpoint_dir=shared, max_evaluations=1).start()
    loss = model.get_metrics_result()["mse"]
    print(f"EVALUATED|{task_type}|{task_id}|{strategy.num_replicas_in_sync}|{exact(model)}|{float(loss):.6f}|{json.dumps(cluster, sort_keys=True)}", flush=True)
    raise SystemExit(0)

train = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32).with_options(options)
model.fit(train, epochs=2, steps_per_epoch=8, verbose=0)
checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
where = shared if task_type == "chief" else os.path.join(shared, f"{task_type}-{task_id}")
tf.train.CheckpointManager(checkpoint, where, max_to_keep=1).save()
w, b = model.get_weights()
loss = np.mean(np.square(x[:64] @ w + b - y[:64]))  # the same loss, computed here
print(f"TRAINED|{task_type}|{task_id}|{exact(model)}|{float(loss):.6f}|{json.dumps(cluster, sort_keys=True)}", flush=True)
