"""The shape of TensorFlow's "Parameter server training with ParameterServerStrategy" tutorial,
Keras path, on a real cluster and driven only by the TF_CONFIG tfcluster injected: ps and worker
tasks run a tf.distribute.Server and join() it, which never returns; the chief builds
ParameterServerStrategy(TFConfigClusterResolver()), and trains with model.fit on a
DatasetCreator, with ModelCheckpoint and BackupAndRestore. tfcluster ends the step when the
chief returns (end_with_chief). The model learns a known linear map, so the loss shows that
training ran. Working files go to the directory in argv[1].

Every task prints ROLE|<type>|<index>; the chief prints
    RESULT|<final loss>|<Keras package and version>|<unix time>
"""
import os
import sys
import time

import tensorflow as tf

cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
print(f"ROLE|{cluster_resolver.task_type}|{cluster_resolver.task_id}", flush=True)

if cluster_resolver.task_type in ("worker", "ps"):
    server = tf.distribute.Server(
        cluster_resolver.cluster_spec(),
        job_name=cluster_resolver.task_type,
        task_index=cluster_resolver.task_id,
        protocol=cluster_resolver.rpc_layer or "grpc",
        start=True,
    )
    server.join()

NUM_PS = len(cluster_resolver.cluster_spec().as_dict().get("ps", []))
variable_partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
    min_shard_bytes=(256 << 10), max_shards=NUM_PS
)
strategy = tf.distribute.ParameterServerStrategy(
    cluster_resolver, variable_partitioner=variable_partitioner
)
TRUE_W = tf.constant([[2.0], [-3.0], [0.5], [1.0]])


def dataset_fn(input_context):
    global_batch_size = 64
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    x = tf.random.stateless_normal((256, 4), seed=(1, 2))
    y = tf.matmul(x, TRUE_W) + 0.25
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).repeat()
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.batch(batch_size)
    dataset = dataset.prefetch(2)
    return dataset


dc = tf.keras.utils.experimental.DatasetCreator(dataset_fn)
with strategy.scope():
    model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
model.compile(tf.keras.optimizers.legacy.SGD(learning_rate=0.05), loss="mse", steps_per_execution=10)

working_dir = sys.argv[1]
callbacks = [
    tf.keras.callbacks.ModelCheckpoint(filepath=os.path.join(working_dir, "ckpt")),
    tf.keras.callbacks.BackupAndRestore(backup_dir=os.path.join(working_dir, "backup")),
]
history = model.fit(dc, epochs=5, steps_per_epoch=20, callbacks=callbacks, verbose=0)
package = sys.modules[type(model).__module__.split(".")[0]]
print(f"RESULT|{history.history['loss'][-1]:.6f}|{package.__name__} {package.__version__}|{time.time():.3f}", flush=True)
