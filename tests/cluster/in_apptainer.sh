#!/bin/sh
# A wrapper script as sites and users write them, the task's program in tests/apptainer.rs: it
# prepares the task, then starts the container itself (not with exec) and passes its status on.
#   in_apptainer.sh [APPTAINER EXEC OPTIONS...] IMAGE PROGRAM [ARGS...]
cd /tmp || exit 1
apptainer exec "$@"
status=$?
exit "$status"
