#!/bin/sh
# Prints the installed Slurm's plugin directory (where select_cons_tres.so lives): Debian's
# /usr/lib/<triplet>/slurm-wlm, RPM's /usr/lib64/slurm, a source build's <prefix>/lib/slurm.
for d in /usr/lib/*/slurm-wlm /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm /opt/slurm/lib/slurm; do
    if [ -e "$d/select_cons_tres.so" ] || [ -e "$d/libslurmfull.so" ]; then echo "$d"; exit 0; fi
done
echo "slurm-plugin-dir: no Slurm plugin directory found; set SLURM_PLUGIN_DIR=..." >&2
exit 1
