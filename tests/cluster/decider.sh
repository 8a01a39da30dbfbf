#!/bin/sh
# Run as every task by tests/ending.rs: decider.sh ROLE CODE SECONDS
# Index 0 of ROLE (the task whose exit decides the job's result) prints DECIDER|<unix time> after
# 1 s and exits with CODE; every other task sleeps SECONDS (a stand-in for a server that never
# returns).
case "$TF_CONFIG" in
    *"\"task\":{\"type\":\"$1\",\"index\":0}"*)
        sleep 1
        echo "DECIDER|$(date +%s.%N)"
        exit "$2" ;;
    *) exec sleep "$3" ;;
esac
