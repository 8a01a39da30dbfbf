#!/bin/sh
# Run as every task by tests/cluster.rs: one line with what the task received.
# RANK|HOSTNAME|CUDA_VISIBLE_DEVICES (- when unset)|TF_CONFIG (- when unset)
printf 'TASK|%s|%s|%s|%s\n' "$SLURM_PROCID" "$(hostname)" "${CUDA_VISIBLE_DEVICES--}" "${TF_CONFIG--}"
