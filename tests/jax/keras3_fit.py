"""Keras 3 on JAX across processes, as Keras documents it ("Distributed training with Keras 3"):
keras.distribution.initialize() with no arguments (tfcluster's keras=3 gives it every process's
address, the count and this process's id), DataParallel over every device of every process,
model.fit on this process's own shard. The data is synthetic and differs per process (seeded by
the process id), so the processes end with the same weights only because fit averaged every
step's gradients across them. Usage: keras3_fit.py [alone]: "alone" trains this process's shard
by itself, for comparison. Prints
    RESULT|<process id>|<processes>|<first loss>|<last loss>|<digest of the final weights>|<digest of this process's data>
"""
import hashlib
import os
import sys

if sys.argv[1:] == ["alone"]:
    os.environ["KERAS_BACKEND"] = "jax"  # tfcluster's keras=3 sets it in the step
import keras  # noqa: E402
import numpy as np  # noqa: E402

alone = sys.argv[1:] == ["alone"]
if not alone:
    keras.distribution.initialize()
    distribution = keras.distribution.DataParallel(devices=keras.distribution.list_devices())
    distribution.auto_shard_dataset = False  # each process feeds its own shard
    keras.distribution.set_distribution(distribution)
import jax  # noqa: E402

process, processes = jax.process_index(), jax.process_count()
rank = int(os.environ.get("SLURM_PROCID", "0")) if alone else process
rng = np.random.default_rng(1000 + rank)
x = rng.random((256, 8), dtype=np.float32)
y = (x @ np.arange(1, 9, dtype=np.float32) / 8.0 + 0.1 * rng.standard_normal(256)).astype(np.float32)
data_digest = hashlib.sha256(x.tobytes()).hexdigest()[:16]

keras.utils.set_random_seed(7)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
history = model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
losses = history.history["loss"]
weights = np.concatenate([np.asarray(w).ravel() for w in model.get_weights()]).astype(np.float32)
digest = hashlib.sha256(np.round(weights, 5).tobytes()).hexdigest()[:16]
print(f"RESULT|{rank}|{processes}|{losses[0]:.5f}|{losses[-1]:.5f}|{digest}|{data_digest}", flush=True)
