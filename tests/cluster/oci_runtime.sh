#!/bin/sh
# A stand-in for the runtime of an oci.conf with IgnoreFileConfigJson=true (tests/containers.rs), as
# Slurm's own Singularity example is: slurmstepd runs RunTimeRun with its own environment, not the
# task's, so the task's variables arrive only in CreateEnvFile's file, which the pattern passes as %e.
# Usage: oci_runtime.sh [--env-file FILE] PROGRAM [ARGS...]
if [ "$1" = --env-file ]; then
    while IFS= read -r line; do
        export "$line" 2>/dev/null
    done <"$2"
    shift 2
fi
exec "$@"
