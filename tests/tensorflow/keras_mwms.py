"""The shape of TensorFlow's "Multi-worker training with Keras" tutorial (main.py and
mnist_setup.py), driven only by the TF_CONFIG tfcluster injected: MultiWorkerMirroredStrategy()
with no arguments, the tutorial's CNN built and compiled in strategy.scope(), model.fit on a
dataset. The data has MNIST's shape but is synthetic (nothing can be downloaded), and differs
per worker (seeded by the worker's id), so the workers end with the same weights only because
model.fit all-reduced every step's gradients. Which Keras `tf.keras` is comes from the
environment (tfcluster's keras setting). Prints STARTED|<type>|<index>, then:
    RESULT|<type>|<index>|<loss on a fixed batch>|<digest of the final weights>|<digest of this
           worker's data>|<cluster it saw>|<replicas in sync>|<Keras version>
"""
import hashlib
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf_config = json.loads(os.environ["TF_CONFIG"])
task_type, task_id = tf_config["task"]["type"], tf_config["task"]["index"]
cluster = tf_config["cluster"]
print(f"STARTED|{task_type}|{task_id}", flush=True)

strategy = tf.distribute.MultiWorkerMirroredStrategy()
per_worker_batch_size = 16
global_batch_size = per_worker_batch_size * strategy.num_replicas_in_sync
worker_id = task_id + (1 if task_type == "worker" and "chief" in cluster else 0)


def mnist_dataset(batch_size, seed):
    """The tutorial's mnist_dataset, on synthetic images of MNIST's shape and labels that a
    model can learn (the label is the brightest of ten image regions)."""
    rng = np.random.default_rng(seed)
    x_train = rng.random((512, 28, 28), dtype=np.float32)
    y_train = np.argmax(x_train.reshape(512, -1)[:, :780].reshape(512, 10, 78).mean(axis=2), axis=1).astype(np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat().batch(batch_size)
    return dataset, hashlib.sha256(x_train.tobytes()).hexdigest()[:16]


def build_and_compile_cnn_model():
    """The tutorial's model, smaller (it trains on two CPU cores)."""
    tf.keras.utils.set_random_seed(7)
    model = tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(28, 28)),
        tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(4, 3, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=tf.keras.optimizers.SGD(learning_rate=0.05),
        metrics=["accuracy"],
    )
    return model


multi_worker_dataset, data_digest = mnist_dataset(global_batch_size, 1000 + worker_id)
with strategy.scope():
    multi_worker_model = build_and_compile_cnn_model()
multi_worker_model.fit(multi_worker_dataset, epochs=2, steps_per_epoch=10, verbose=0)

weights = np.concatenate([w.ravel() for w in multi_worker_model.get_weights()]).astype(np.float32)
digest = hashlib.sha256(weights.tobytes()).hexdigest()[:16]
probe, _ = mnist_dataset(32, 1)
x, y = next(iter(probe))
logits = multi_worker_model(x, training=False)
loss = float(tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)))
package = sys.modules[type(multi_worker_model).__module__.split(".")[0]]
keras = f"{package.__name__} {package.__version__}"
print(f"RESULT|{task_type}|{task_id}|{loss:.6f}|{digest}|{data_digest}|{json.dumps(cluster, sort_keys=True)}|{strategy.num_replicas_in_sync}|{keras}", flush=True)
