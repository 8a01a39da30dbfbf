/*
 * A SPANK plugin whose exit hook fails in a job's extern slurmstepd, for tests/isolation.rs:
 * listed `required` before tfcluster in plugstack.conf, it makes Slurm skip tfcluster's exit
 * there (Slurm stops calling a hook at the first required plugin that fails it) and unload
 * tfcluster all the same. Built against tfcluster's own header; PLUGIN_VERSION (the release's
 * version word) comes from the build command.
 */
#include <stdint.h>

#include "tfcluster_spank.h"

const char plugin_name[] = "tfc_failing_exit";
const char plugin_type[] = "spank";
const unsigned int plugin_version = PLUGIN_VERSION;

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    uint32_t step = 0;
    (void)ac;
    (void)av;
    if (!spank_remote(sp))
        return 0;
    if (spank_get_item(sp, TFC_S_JOB_STEPID, &step) != TFC_ESPANK_SUCCESS)
        return 0;
    return step == TFC_SLURM_EXTERN_CONT ? -1 : 0;
}
