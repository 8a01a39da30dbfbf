"""JAX across processes as its guide writes it ("Introduction to multi-controller JAX"):
jax.distributed.initialize() with no arguments, then a sum over every process (on CPU, through
JAX's gloo collectives). Usage: psum.py SECONDS [die=RANK]: how long the processes wait for
each other (JAX's default is 300 s); rank RANK exits 3 at once instead. Prints
    PSUM|<process id>|<processes>|<sum over the processes of id + 1>|<JAX_COORDINATOR_ADDRESS>|<the
         GPUs JAX uses, as jax.distributed.initialize() configured them>
and process 0, while its coordinator runs:
    BIND|<JAX_COORDINATOR_BIND_ADDRESS, or unset>|<a connection to the coordinator's port at
         127.0.0.1: open or refused>
"""
import os
import socket
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils

timeout = int(sys.argv[1])
if sys.argv[2:] == [f"die={os.environ['SLURM_PROCID']}"]:
    sys.exit(3)
jax.distributed.initialize(initialization_timeout=timeout)
if jax.process_index() == 0:
    from jax._src import distributed
    port = int(distributed.global_state.coordinator_address.rsplit(":", 1)[1])
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        loopback = "open"
    except OSError:
        loopback = "refused"
    print(f"BIND|{os.environ.get('JAX_COORDINATOR_BIND_ADDRESS', 'unset')}|{loopback}", flush=True)
values = multihost_utils.process_allgather(np.array([jax.process_index() + 1.0]))
coordinator = os.environ.get("JAX_COORDINATOR_ADDRESS", "unset")
gpus = jax.config.values["jax_cuda_visible_devices"]
print(f"PSUM|{jax.process_index()}|{jax.process_count()}|{values.sum():g}|{coordinator}|{gpus}", flush=True)
