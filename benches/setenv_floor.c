/*
 * The floor of any per-task TF_CONFIG delivery through SPANK, for benches/scale.sh (mode e):
 * a SPANK plugin that does nothing but hand every task an environment variable of a given size
 * with spank_setenv in slurm_spank_task_init, as tfcluster does. The value is made once per
 * slurmstepd (slurm_spank_init, before the tasks fork), so each task pays only Slurm's setenv.
 * plugstack.conf: `required setenv_floor.so BYTES`. Built against tfcluster's own header;
 * PLUGIN_VERSION (the release's version word) comes from the build command.
 */
#include <stdlib.h>
#include <string.h>

#include "tfcluster_spank.h"

const char plugin_name[] = "tfc_setenv_floor";
const char plugin_type[] = "spank";
const unsigned int plugin_version = PLUGIN_VERSION;

static char *value;

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    size_t bytes = ac > 0 ? strtoul(av[0], NULL, 10) : 0;
    (void)sp;
    if (!spank_remote(sp) || bytes == 0)
        return 0;
    value = malloc(bytes + 1);
    if (!value)
        return 0;
    memset(value, 'x', bytes);
    value[bytes] = '\0';
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (value)
        spank_setenv(sp, "TFC_FLOOR", value, 1);
    return 0;
}
