#!/bin/sh
# Run as every task by the end-to-end tests (tests/placement.rs and others): one line with what the task received.
# RANK|HOSTNAME|CUDA_VISIBLE_DEVICES (- when unset)|TF_CONFIG (- when unset)
printf 'TASK|%s|%s|%s|%s\n' "$SLURM_PROCID" "$(hostname)" "${CUDA_VISIBLE_DEVICES--}" "${TF_CONFIG--}"
