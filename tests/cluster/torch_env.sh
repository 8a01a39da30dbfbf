#!/bin/sh
# Run as every task by tests/options.rs: what torch=yes gave the task. T|RANK|HOSTNAME|every
# PyTorch and torchrun variable, sorted, joined by ' '|TF_CONFIG (- when unset)
printf 'T|%s|%s|%s|%s\n' "$SLURM_PROCID" "$(hostname)" \
    "$(env | grep -E '^(MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|NODE_RANK|PET_[A-Z_]*)=' | LC_ALL=C sort | paste -sd ' ' -)" \
    "${TF_CONFIG--}"
