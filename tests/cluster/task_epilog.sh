#!/bin/sh
# srun's --task-epilog in tests/options.rs: slurmstepd runs it with the step's own environment
# once a task has ended. It writes down each name tfcluster makes for the tasks before the forks
# and srun does not set (srun sets TF_CONFIG to the line a node without tfcluster leaves) into
# a file of its own in $TFC_EPILOG_DIR (an empty file: none).
env | grep -E '^(CUDA_DEVICE_ORDER|JAX_|APPTAINERENV_|SINGULARITYENV_)' > "$TFC_EPILOG_DIR/epilog.$$"
exit 0
