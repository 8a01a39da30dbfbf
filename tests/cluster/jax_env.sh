#!/bin/sh
# Run as every task by tests/options.rs: the step's ids and reserved ports, and every JAX_*, KERAS_*
# and KERASTUNER_* variable the task received, sorted, joined by ';'.
# V|RANK|JOB|STEP|SLURM_STEP_RESV_PORTS (- when unset)|NAME=VALUE;...
printf 'V|%s|%s|%s|%s|%s\n' "$SLURM_PROCID" "$SLURM_JOB_ID" "$SLURM_STEP_ID" "${SLURM_STEP_RESV_PORTS--}" \
    "$(env | grep -E '^(JAX|KERAS)' | LC_ALL=C sort | paste -sd ';' -)"
