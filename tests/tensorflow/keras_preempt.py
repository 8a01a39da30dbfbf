"""Keras model.fit under MultiWorkerMirroredStrategy with BackupAndRestore(save_freq=5), driven
only by the TF_CONFIG tfcluster injected: the preemption recipe for Keras users (Keras 2:
tf_keras with tfcluster's keras=2, or TensorFlow 2.15 and older).

    keras_preempt.py BACKUP_DIR STEPS [SLOW_FROM]

Keras 2's `save_before_preemption=True` (save at SIGTERM, then exit 42) is switched on only on
Google Cloud (tf_keras's support_on_demand_checkpoint_callback); elsewhere it is silently
ignored. So, as TensorFlow's Keras tutorial does, the backup is saved every few steps: SIGTERM
(Slurm's preemption, `scontrol requeue`, the time limit, `--signal`) ends every task, and started
again (a requeued job) model.fit resumes from the last backup, at its epoch and step. Keras does
not restore a dataset iterator's position: the input pipeline starts again from its beginning. So
each worker trains on one fixed batch of its own at every step, and a run that was interrupted
ends with exactly the weights of one that was not, wherever it resumed. Each step pauses 0.2 s,
and 1 s from step SLOW_FROM on (a requeued job's first run: tests/common/cluster.rs,
requeued_training_args). Prints:
    RESUMED|<task type>|<task index>|<first step>
    STEP|<step>                          (the chief, after each step)
    RESULT|<task type>|<task index>|<digest of the final weights>
"""
import hashlib
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

backup_dir, steps = sys.argv[1], int(sys.argv[2])
slow_from = int(sys.argv[3]) if len(sys.argv) > 3 else steps
tf_config = json.loads(os.environ["TF_CONFIG"])
task_type, task_id = tf_config["task"]["type"], tf_config["task"]["index"]
worker_id = task_id + (1 if task_type == "worker" and "chief" in tf_config["cluster"] else 0)
strategy = tf.distribute.MultiWorkerMirroredStrategy()

rng = np.random.default_rng(1000 + worker_id)
# Keras splits each worker's batch of 16 into halves of 8, one per step, and starts the input
# pipeline again when it resumes: with two different halves, a resume at an odd step (a backup
# mid-epoch) would train on them in the other order. Two equal halves make every step's data the
# same wherever the run resumes.
half = rng.normal(size=(8, 4)).astype(np.float32)
x = np.concatenate([half, half])
y = (x @ np.array([[2.0], [-3.0], [0.5], [1.0]], dtype=np.float32) + 0.25).astype(np.float32)
dataset = tf.data.Dataset.from_tensors((x, y)).repeat()
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
dataset = dataset.with_options(options)

with strategy.scope():
    tf.keras.utils.set_random_seed(7)
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=0.05), loss="mse")


class Progress(tf.keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.start = int(self.model.optimizer.iterations.numpy())
        print(f"RESUMED|{task_type}|{task_id}|{self.start}", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy()) - 1
        if worker_id == 0:
            print(f"STEP|{step}", flush=True)
        # A step of real training: time for the test to interrupt it mid-way, and once it was,
        # for Slurm's signal to arrive before training would end.
        time.sleep(0.2 if step < slow_from else 1.0)


callbacks = [
    tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir, save_freq=5),
    Progress(),
]
model.fit(dataset, epochs=steps // 10, steps_per_epoch=10, callbacks=callbacks, verbose=0)
weights = np.concatenate([w.ravel() for w in model.get_weights()]).astype(np.float32)
print(f"RESULT|{task_type}|{task_id}|{hashlib.sha256(weights.tobytes()).hexdigest()[:16]}", flush=True)
