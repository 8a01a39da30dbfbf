#!/bin/sh
# Prints the installed Slurm's plugin directory (where select_cons_tres.so or libslurmfull.so
# lives): Debian's /usr/lib/<triplet>/slurm-wlm, SchedMD's own Debian packages (slurm-smd)
# /usr/lib/<triplet>/slurm, RPM's /usr/lib64/slurm, a source build's <prefix>/lib/slurm.
# SLURM_ROOT (default /) is where to look, for tests; the path printed is without it. Says on
# stderr what it found.
root=${SLURM_ROOT:-}
for pattern in '/usr/lib/*/slurm-wlm' '/usr/lib/*/slurm' /usr/lib64/slurm /usr/lib/slurm \
               /usr/local/lib/slurm /opt/slurm/lib/slurm; do
    for d in $root$pattern; do
        for marker in select_cons_tres.so libslurmfull.so; do
            if [ -e "$d/$marker" ]; then
                echo "${d#"$root"}"
                # What was found, for the admin who runs make install (stderr: make reads stdout).
                echo "slurm-plugin-dir: Slurm's plugins are in ${d#"$root"} (it holds $marker); SLURM_PLUGIN_DIR=... overrides" >&2
                exit 0
            fi
        done
    done
done
echo "slurm-plugin-dir: no Slurm plugin directory found; set SLURM_PLUGIN_DIR=..." >&2
exit 1
