#!/bin/sh
# srun's --task-prolog in tests/options.rs: slurmstepd runs it after tfcluster's task_init and
# applies what it prints to the task's environment, so Slurm itself replaces and unsets entries
# tfcluster wrote.
echo "export TF_CONFIG=the-prologs"
echo "unset CUDA_DEVICE_ORDER"
