#!/bin/sh
# Prints the Slurm release (MAJOR.MINOR) a built plugin is for, read from its plugin_version
# symbol: what Slurm's loader will compare, so packages can never claim another release.
set -eu
so=${1:?usage: packaging/plugin-version.sh PLUGIN.so}
line=$(objdump -T "$so" | awk '$NF == "plugin_version" {print $1}')
[ -n "$line" ] || { echo "plugin-version: no plugin_version in $so" >&2; exit 1; }
start=$((0x$line))
# The 4 bytes at that address (little-endian), from the section that holds it.
hex=$(objdump -s --start-address=$start --stop-address=$((start + 4)) "$so" | awk '/^ [0-9a-f]+ / {print $2; exit}')
value=$((0x$(echo "$hex" | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')))
printf '%d.%02d\n' $((value >> 16)) $(((value >> 8) & 255))
