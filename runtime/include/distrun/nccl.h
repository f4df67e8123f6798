/* distrun's NCCL helper: one call that gives a worker its NCCL communicator (DESIGN §4).
 *
 * Worker 0 creates the NCCL unique id and puts it in the job's key-value store; the others wait for it
 * there. Every worker then selects its GPU (cudaSetDevice) and calls ncclCommInitRank with the rank and size
 * distrun gave it. Nothing to pass: it reads the variables distrun sets for every worker:
 *
 *   DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN   the job's runtime (as distrun_client_open_env)
 *   DISTRUN_PROCESS_ID, DISTRUN_NUM_PROCESSES    the NCCL rank and number of ranks
 *   DISTRUN_LOCAL_DEVICE_IDS                     the GPU: its first id; when empty, DISTRUN_LOCAL_RANK
 *                                                modulo the visible GPUs
 *   DISTRUN_RUN_ID, DISTRUN_RESTART_COUNT        scope the key, so a restarted job never reads an old id
 *
 *     ncclComm_t comm;
 *     if (distrun_nccl_comm_init(&comm) != ncclSuccess) return 1;   // the reason is on stderr
 *
 * Link with -ldistrun_nccl (and the client library, NCCL and the CUDA runtime). Built only where distrun was
 * built with CUDA and NCCL (cmake -DDISTRUN_WITH_NCCL=ON|AUTO). */
#ifndef DISTRUN_NCCL_H_
#define DISTRUN_NCCL_H_

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates the communicator of every worker of the job, named "default", waiting up to 5 minutes for
 * worker 0's id. Call it once per job run from every worker; for more communicators use
 * distrun_nccl_comm_init_named with a distinct name each. On failure it prints one line,
 * "distrun: nccl: ...", on stderr and returns the NCCL result (ncclInvalidUsage for missing variables,
 * ncclSystemError when the key-value store cannot be reached, ncclUnhandledCudaError for CUDA). */
ncclResult_t distrun_nccl_comm_init(ncclComm_t* comm);

/* The same for the communicator `name` (letters, digits, '-', '_', '.'), waiting up to timeout_ms
 * (0: 5 minutes) for worker 0; prints nothing and copies the reason to `error` (when given, cut to
 * error_len). Worker 0 refuses a name already used in this run: two communicators would share an id. */
ncclResult_t distrun_nccl_comm_init_named(ncclComm_t* comm, const char* name, int64_t timeout_ms, char* error,
                                          size_t error_len);

#ifdef __cplusplus
}
#endif

#endif /* DISTRUN_NCCL_H_ */
