#!/bin/sh
# Run as every task by tests/options.rs (each_task_writes_its_variables_into_entries_of_its_own):
# E|RANK|TF_CONFIG (`json` for tfcluster's)|CUDA_DEVICE_ORDER|JAX_LOCAL_DEVICE_IDS, `unset` for
# a name the task does not have (an empty value prints empty).
case "${TF_CONFIG-unset}" in
    '{"cluster":'*) tf=json ;;
    *) tf=${TF_CONFIG-unset} ;;
esac
printf 'E|%s|%s|%s|%s\n' "$SLURM_PROCID" "$tf" "${CUDA_DEVICE_ORDER-unset}" "${JAX_LOCAL_DEVICE_IDS-unset}"
