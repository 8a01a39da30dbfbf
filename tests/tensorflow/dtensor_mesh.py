"""A DTensor mesh across every task of the step, driven only by DTENSOR_JOBS and
DTENSOR_CLIENT_ID (tfcluster's dtensor=yes). No Slurm code.

Each client brings 2 logical CPUs; the mesh spans all clients' devices. A vector with one value
per device, sharded over the mesh, is summed: every client must get the same total, which only
a mesh that really spans all clients computes. Prints:
    DTENSOR|<client id>|<clients>|<global devices>|<sum>|<sum the mesh should give>
"""
import os

import tensorflow as tf
from tensorflow.experimental import dtensor

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
dtensor.initialize_accelerator_system("CPU")

clients, me = dtensor.num_clients(), dtensor.client_id()
devices = dtensor.num_global_devices("CPU")
mesh = dtensor.create_distributed_mesh([("x", devices)], device_type="CPU")
layout = dtensor.Layout(["x"], mesh)
# Device d holds the value d + 1: the sum is devices * (devices + 1) / 2.
values = tf.range(1, devices + 1, dtype=tf.float32)
sharded = dtensor.pack([values[d:d + 1] for d in mesh.local_device_ids()], layout)
total = float(tf.reduce_sum(sharded).numpy())
print(f"DTENSOR|{me}|{clients}|{devices}|{total}|{devices * (devices + 1) / 2}", flush=True)
