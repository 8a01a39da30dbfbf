"""In one task: the CUDA_VISIBLE_DEVICES the TensorFlow program sees (tfcluster set it before
execve; this CPU build of TensorFlow has no GPU to open, but reads the same variable).
Prints GPUS|<rank>|<CUDA_VISIBLE_DEVICES>|<GPUs TensorFlow found>."""
import os

import tensorflow as tf

print(
    "GPUS|%s|%s|%d"
    % (os.environ["SLURM_PROCID"], os.environ.get("CUDA_VISIBLE_DEVICES", "-"), len(tf.config.list_physical_devices("GPU"))),
    flush=True,
)
