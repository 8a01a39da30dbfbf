/*
 * tfcluster's own declaration of the SPANK interface it uses.
 *
 * Written for this project from published ABI facts (item and context numbers, error codes,
 * the option struct layout, function signatures); no part of Slurm's headers is copied.
 * tests/abi.rs writes every value, offset and prototype here as a static assertion against
 * the installed <slurm/spank.h> and <slurm/slurm.h>, and compiles it, on every release tested.
 *
 * Valid for Slurm 21.08 and later (error codes 3000+). What differs between releases (the
 * version word the plugin exports, slurm_kill_job_step's form) is chosen by build.rs from the
 * release: it defines one TFC_KILL_STEP_* macro.
 */
#ifndef TFCLUSTER_SPANK_H
#define TFCLUSTER_SPANK_H

#include <stdint.h>
#include <sys/types.h>

/* Opaque handle slurmstepd/srun pass to every hook. */
typedef struct spank_handle *spank_t;

/* Hook signature: int hook(spank_t, int argc, char **argv); argv = plugstack.conf words. */
typedef int (*spank_f)(spank_t sp, int ac, char **argv);

/* Items for spank_get_item(); the comment gives the variadic arguments. */
enum tfc_spank_item {
    TFC_S_JOB_UID = 0,                  /* uid_t * */
    TFC_S_JOB_GID = 1,                  /* gid_t * */
    TFC_S_JOB_ID = 2,                   /* uint32_t * */
    TFC_S_JOB_STEPID = 3,               /* uint32_t * */
    TFC_S_JOB_NNODES = 4,               /* uint32_t * */
    TFC_S_JOB_NODEID = 5,               /* uint32_t * */
    TFC_S_JOB_LOCAL_TASK_COUNT = 6,     /* uint32_t * */
    TFC_S_JOB_TOTAL_TASK_COUNT = 7,     /* uint32_t * */
    TFC_S_JOB_NCPUS = 8,                /* uint16_t * */
    TFC_S_JOB_ARGV = 9,                 /* int *, char *** */
    TFC_S_JOB_ENV = 10,                 /* char *** */
    TFC_S_TASK_ID = 11,                 /* int * */
    TFC_S_TASK_GLOBAL_ID = 12,          /* uint32_t * */
    TFC_S_TASK_EXIT_STATUS = 13,        /* int * */
    TFC_S_TASK_PID = 14,                /* pid_t * */
    TFC_S_JOB_PID_TO_GLOBAL_ID = 15,    /* pid_t, uint32_t * */
    TFC_S_JOB_PID_TO_LOCAL_ID = 16,     /* pid_t, uint32_t * */
    TFC_S_JOB_LOCAL_TO_GLOBAL_ID = 17,  /* uint32_t, uint32_t * */
    TFC_S_JOB_GLOBAL_TO_LOCAL_ID = 18,  /* uint32_t, uint32_t * */
    TFC_S_JOB_SUPPLEMENTARY_GIDS = 19,  /* gid_t **, int * */
    TFC_S_SLURM_VERSION = 20,           /* char ** */
    TFC_S_SLURM_VERSION_MAJOR = 21,     /* char ** */
    TFC_S_SLURM_VERSION_MINOR = 22,     /* char ** */
    TFC_S_SLURM_VERSION_MICRO = 23,     /* char ** */
    TFC_S_STEP_CPUS_PER_TASK = 24,      /* uint32_t * */
    TFC_S_JOB_ALLOC_CORES = 25,         /* char ** */
    TFC_S_JOB_ALLOC_MEM = 26,           /* uint64_t * */
    TFC_S_STEP_ALLOC_CORES = 27,        /* char ** */
    TFC_S_STEP_ALLOC_MEM = 28,          /* uint64_t * */
    TFC_S_SLURM_RESTART_COUNT = 29,     /* uint32_t * */
    TFC_S_JOB_ARRAY_ID = 30,            /* uint32_t * */
    TFC_S_JOB_ARRAY_TASK_ID = 31        /* uint32_t * */
};
/* Passed as a plain 4-byte unsigned value, like the C enum. */
typedef unsigned int spank_item_t;

/* Where the plugin is running (spank_context()). */
enum tfc_spank_context {
    TFC_S_CTX_ERROR = 0,
    TFC_S_CTX_LOCAL = 1,      /* srun */
    TFC_S_CTX_REMOTE = 2,     /* slurmstepd */
    TFC_S_CTX_ALLOCATOR = 3,  /* sbatch, salloc */
    TFC_S_CTX_SLURMD = 4,
    TFC_S_CTX_JOB_SCRIPT = 5  /* prolog, epilog */
};
typedef unsigned int spank_context_t;

/* Return codes: an int, since Slurm may return codes outside any list written here. */
typedef int spank_err_t;
#define TFC_ESPANK_SUCCESS 0
#define TFC_ESPANK_ERROR 3000
#define TFC_ESPANK_BAD_ARG 3001
#define TFC_ESPANK_NOT_TASK 3002
#define TFC_ESPANK_ENV_EXISTS 3003
#define TFC_ESPANK_ENV_NOEXIST 3004
#define TFC_ESPANK_NOSPACE 3005
#define TFC_ESPANK_NOT_REMOTE 3006
#define TFC_ESPANK_NOEXIST 3007
#define TFC_ESPANK_NOT_EXECD 3008
#define TFC_ESPANK_NOT_AVAIL 3009
#define TFC_ESPANK_NOT_LOCAL 3010

/* Special step ids (the batch script, the extern and interactive steps). */
#define TFC_SLURM_PENDING_STEP 0xfffffffdu
#define TFC_SLURM_EXTERN_CONT 0xfffffffcu
#define TFC_SLURM_BATCH_SCRIPT 0xfffffffbu
#define TFC_SLURM_INTERACTIVE_STEP 0xfffffffau

/* Option callback: val is the option's val, optarg may be NULL, remote is 1 in slurmstepd. */
typedef int (*spank_opt_cb_f)(int val, const char *optarg, int remote);

/* A command-line option; has_arg follows getopt_long (0 none, 1 required, 2 optional). */
struct spank_option {
    char *name;
    char *arginfo;
    char *usage;
    int has_arg;
    int val;
    spank_opt_cb_f cb;
};
#define TFC_SPANK_OPTION_MAXLEN 75

int spank_remote(spank_t sp);
spank_context_t spank_context(void);
const char *spank_strerror(spank_err_t err);
spank_err_t spank_option_register(spank_t sp, struct spank_option *opt);
spank_err_t spank_option_getopt(spank_t sp, struct spank_option *opt, char **optarg);
spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...);
spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len);
spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite);
spank_err_t spank_unsetenv(spank_t sp, const char *var);

void slurm_error(const char *fmt, ...);
void slurm_info(const char *fmt, ...);
void slurm_verbose(const char *fmt, ...);
void slurm_debug(const char *fmt, ...);
void slurm_spank_log(const char *fmt, ...);

/*
 * Ending a step from slurmstepd (libslurm, which slurmstepd loads): when training ends, and when
 * a node finds that no TF_CONFIG of the step can be right. slurm_strerror names the error.
 */
char *slurm_strerror(int errnum);
/* Flag (23.11+): the tasks this kills are reported as successful, so srun and the job's exit
 * status are the tasks' own. */
#define TFC_KILL_NO_SIG_FAIL (1 << 10)
/* slurm_step_id_t: job id, heterogeneous component, step id; from 24.11 a sluid (uint64_t)
 * comes first. slurm_kill_job_step takes it from 25.11, slurm_job_step_layout_get always. */
typedef struct tfc_step_id {
#if defined(TFC_STEP_ID_SLUID)
    uint64_t sluid;
#endif
    uint32_t job_id;
    uint32_t step_het_comp;
    uint32_t step_id;
} tfc_step_id_t;
/* slurm_errno.h: what slurmctld answers for a step that has ended (or never existed). */
#define TFC_ESLURM_INVALID_JOB_ID 2017
#define TFC_ESLURM_ALREADY_DONE 2021
/* NO_VAL: "no heterogeneous component". */
#define TFC_NO_VAL 0xfffffffe
#if defined(TFC_KILL_STEP_STEP_ID)
int slurm_kill_job_step(tfc_step_id_t *step_id, uint16_t signal, uint16_t flags);
#elif defined(TFC_KILL_STEP_JOB_STEP_FLAGS)
int slurm_kill_job_step(uint32_t job_id, uint32_t step_id, uint16_t signal, uint16_t flags);
#else
int slurm_kill_job_step(uint32_t job_id, uint32_t step_id, uint16_t signal);
#endif

/*
 * A heterogeneous step's components (libslurm, from slurmstepd): the layout slurmctld made for
 * one component, i.e. its nodes, and the global task ids of that component on each node.
 * slurm_step_layout_t up to the fields read here: 23.11 put three compact-CPU fields first and an
 * alias_addrs pointer after front_end; 25.05 dropped front_end. The memory is libslurm's, freed
 * with slurm_job_step_layout_free; only these fields are read.
 */
typedef struct tfc_step_layout {
#if defined(TFC_STEP_LAYOUT_COMPACT)
    uint16_t *cpt_compact_array;
    uint32_t cpt_compact_cnt;
    uint32_t *cpt_compact_reps;
#endif
#if defined(TFC_STEP_LAYOUT_FRONT_END)
    char *front_end;
#endif
#if defined(TFC_STEP_LAYOUT_COMPACT)
    void *alias_addrs;
#endif
    uint32_t node_cnt;
    char *node_list;
    uint16_t plane_size;
    uint16_t start_protocol_ver;
    uint16_t *tasks;
    uint32_t task_cnt;
    uint32_t task_dist;
    uint32_t **tids;
} tfc_step_layout_t;
tfc_step_layout_t *slurm_job_step_layout_get(tfc_step_id_t *step_id);
#if defined(TFC_HET_LEADER_SIGNAL)
/* 25.11: a signal to every task of a step, sent to its nodes (see build.rs). */
int slurm_signal_job_step(tfc_step_id_t *step_id, uint32_t signal);
#endif
void slurm_job_step_layout_free(tfc_step_layout_t *layout);

/*
 * Whose a job is, and which heterogeneous job it is a component of (libslurm, from slurmstepd):
 * slurmctld's record of a job, which a node checks a heterogeneous job's component ids against
 * before it asks about or stops any of them. job_info_msg_t's head is the same on every release;
 * its records (slurm_job_info_t) differ in size and layout per release, so the plugin reads
 * only the three fields it needs, at the offsets build.rs gives per release (JOB_INFO_*). The
 * memory is libslurm's, freed with slurm_free_job_info_msg. 26.05 takes a slurm_step_id_t, by
 * value, instead of the job id.
 */
typedef struct tfc_job_info_msg {
    time_t last_backfill;
    time_t last_update;
    uint32_t record_count;
    void *job_array;
} tfc_job_info_msg_t;
/* show_flags: every partition's jobs, hidden ones too. */
#define TFC_SHOW_ALL 0x0001
#if defined(TFC_LOAD_JOB_STEP_ID)
int slurm_load_job(tfc_job_info_msg_t **resp, tfc_step_id_t step_id, uint16_t show_flags);
#else
int slurm_load_job(tfc_job_info_msg_t **resp, uint32_t job_id, uint16_t show_flags);
#endif
void slurm_free_job_info_msg(tfc_job_info_msg_t *msg);

/*
 * The ports Slurm reserved for a step (libslurm, from slurmstepd): slurmctld's record of the
 * step, which a node checks SLURM_STEP_RESV_PORTS (the user's to set) against before its
 * firewall and its claims take those ports as the step's. The response's head is the same on
 * every release (24.05 added a field after the ones read here); its records
 * (job_step_info_t) differ per release, read at the offsets build.rs gives (JOB_STEP_INFO_*).
 * From 25.11 the step is named by a slurm_step_id_t.
 */
typedef struct tfc_job_step_info_response_msg {
    time_t last_update;
    uint32_t job_step_count;
    void *job_steps;
} tfc_job_step_info_response_msg_t;
#if defined(TFC_GET_JOB_STEPS_STEP_ID)
int slurm_get_job_steps(tfc_step_id_t *step_id, tfc_job_step_info_response_msg_t **resp,
                        uint16_t show_flags);
#else
int slurm_get_job_steps(time_t update_time, uint32_t job_id, uint32_t step_id,
                        tfc_job_step_info_response_msg_t **resp, uint16_t show_flags);
#endif
void slurm_free_job_step_info_response_msg(tfc_job_step_info_response_msg_t *msg);

#endif
