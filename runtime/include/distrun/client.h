/* distrun's worker client: the runtime's key-value store and barriers from any language (DESIGN §4).
 *
 * A C API so that Python (ctypes), Rust, Go and others can bind it. distrun_client_open_env() reads
 * DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN and DISTRUN_PROCESS_ID as distrun set them for the worker;
 * distrun_client_open() takes them as arguments.
 *
 * Every call returns 0 on success or a distrun_status code; distrun_client_last_error() then says what
 * happened, naming the key, barrier or worker concerned. A handle may be shared by threads; the last error
 * is then the last one of any thread. Buffers the library returns are freed with distrun_free(). */
#ifndef DISTRUN_CLIENT_H_
#define DISTRUN_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum distrun_status {
  DISTRUN_OK = 0,
  DISTRUN_INVALID_ARGUMENT = 1,
  DISTRUN_NOT_FOUND = 2,
  DISTRUN_ALREADY_EXISTS = 3,
  DISTRUN_FAILED_PRECONDITION = 4,
  DISTRUN_OUT_OF_RANGE = 5,
  DISTRUN_DEADLINE_EXCEEDED = 6, /* a wait timed out */
  DISTRUN_RESOURCE_EXHAUSTED = 7,
  DISTRUN_ABORTED = 8, /* the job stopped or is restarting */
  DISTRUN_UNAVAILABLE = 9,
  DISTRUN_UNAUTHENTICATED = 10,
  DISTRUN_CANCELLED = 11,
} distrun_status;

typedef struct distrun_client distrun_client;

typedef struct distrun_kv_entry {
  char* key; /* NUL-terminated */
  char* value;
  size_t value_len;
} distrun_kv_entry;

/* Opens a client; does not block (the connection is made by the first call). `call_timeout_ms` bounds calls
 * that do not wait (0: 30 s). Returns NULL with a message in `error` (when given) for unusable arguments. */
distrun_client* distrun_client_open(const char* coordinator_address, const char* token, int process_id,
                                    int64_t call_timeout_ms, char* error, size_t error_len);
/* The same, from the variables distrun sets for every worker: DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN and
 * DISTRUN_PROCESS_ID. Returns NULL with a message in `error` (when given) when they are missing or bad. */
distrun_client* distrun_client_open_env(int64_t call_timeout_ms, char* error, size_t error_len);
void distrun_client_close(distrun_client* client);

/* Copies the last error message, NUL-terminated and cut to `len`. Returns its full length. */
size_t distrun_client_last_error(distrun_client* client, char* buffer, size_t len);

int distrun_kv_set(distrun_client* client, const char* key, const void* value, size_t value_len);
/* Waits up to timeout_ms for the key. *value is NUL-terminated (not counted in *value_len). */
int distrun_kv_get(distrun_client* client, const char* key, int64_t timeout_ms, char** value,
                   size_t* value_len);
/* *found is 0 and *value NULL when the key does not exist. */
int distrun_kv_try_get(distrun_client* client, const char* key, int* found, char** value, size_t* value_len);
/* Adds delta to the decimal integer under key (absent: 0) and returns the sum. */
int distrun_kv_add(distrun_client* client, const char* key, int64_t delta, int64_t* result);
/* Sets key to desired if it holds expected (expected NULL: if it is absent). *swapped says whether it did. */
int distrun_kv_cas(distrun_client* client, const char* key, const void* expected, size_t expected_len,
                   const void* desired, size_t desired_len, int* swapped);
int distrun_kv_del(distrun_client* client, const char* key, int* deleted);
/* Every key starting with prefix, sorted; free with distrun_kv_list_free. */
int distrun_kv_list(distrun_client* client, const char* prefix, distrun_kv_entry** entries, size_t* count);
void distrun_kv_list_free(distrun_kv_entry* entries, size_t count);

/* Waits until `count` workers (0: every worker of the job) reached barrier `name`, up to timeout_ms. */
int distrun_barrier(distrun_client* client, const char* name, int count, int64_t timeout_ms);

void distrun_free(void* buffer);

/* Progress for distrun's hang watch: this worker reached `step` (any number that grows as the job advances,
 * e.g. the training step). Needs no client and no network: it writes this worker's slot of a board distrun
 * shares with its workers (DISTRUN_PROGRESS_FILE, DISTRUN_PROGRESS_SLOT), a few hundred nanoseconds; call it
 * as often as you like. The first report arms the watch for this worker (distrun --hang-timeout). Returns
 * DISTRUN_FAILED_PRECONDITION outside a distrun job, or when the board cannot be mapped; then every later
 * call returns the same at once. Thread-safe. */
int distrun_progress(int64_t step);

/* Sections, for distrun's straggler detection: mark this worker's own compute (the forward pass, say), not
 * the time spent waiting in collectives. distrun compares each rank's median time in a section with the
 * fastest rank's (distrun --straggler-threshold). Like distrun_progress: no client, no network, a few
 * stores to shared memory per run. enter starts a run of section `name` (at most 31 bytes; a worker has 8
 * names) on this thread; exit ends the thread's innermost open run. Sections nest, 16 deep per thread.
 * Returns DISTRUN_FAILED_PRECONDITION outside a distrun job, DISTRUN_INVALID_ARGUMENT for a ninth name, an
 * empty name, a run 16 deep or an exit without an enter. Thread-safe; each thread its own runs. */
int distrun_section_enter(const char* name);
int distrun_section_exit(void);

/* Recovering in place (distrun --recovery in-process): this worker's side of its node's worker channel, for
 * programs that are not Python (distrun.torch does the same). distrun_recovery_open() connects to the
 * channel DISTRUN_RECOVERY_SOCKET names and says hello; distrun answers with the running world (a spare's
 * worker: the world that first seats it). When the job's world changes, distrun sends a notice: abort and
 * tear down your communicators, call distrun_recovery_ready(), wait for the next world, form your
 * communicators for it (under its store_prefix) and call distrun_recovery_up(). A worker that is not ready
 * within --recovery-timeout of the notice is killed and started again. One handle per worker process; not
 * thread-safe (use it from one thread, or guard it). */
typedef struct distrun_recovery distrun_recovery;

typedef struct distrun_world {
  int generation; /* the job's epoch (DISTRUN_EPOCH) */
  int rank, world_size, local_rank, local_world_size, group_rank, group_world_size;
  int is_new;         /* this process holds no training state: take it from `source` or a checkpoint */
  int source;         /* the rank every rank takes its state from; -1: none kept any */
  int* lost;          /* ranks of the previous world whose processes are gone */
  size_t lost_count;
  int* joined;        /* ranks of this world held by new processes */
  size_t joined_count;
  char* store_prefix; /* the store namespace of this generation ("distrun/g3") */
  char** env;         /* "NAME=value": the worker's variables in this world (RANK, WORLD_SIZE, ...) */
  size_t env_count;
} distrun_world;

/* Connects (DISTRUN_RECOVERY_SOCKET) and says hello. NULL with a message in `error` (when given) outside a
 * distrun --recovery in-process job or when distrun cannot be reached. */
distrun_recovery* distrun_recovery_open(char* error, size_t error_len);
void distrun_recovery_close(distrun_recovery* recovery);
/* Readable (poll) when distrun sent something: call distrun_recovery_changed() then. */
int distrun_recovery_fd(distrun_recovery* recovery);
/* Reads what arrived, without waiting; returns the newest generation a notice named, or -1 (none), or a
 * negative distrun_status when the channel ended (-DISTRUN_UNAVAILABLE). */
int distrun_recovery_changed(distrun_recovery* recovery);
/* Waits up to timeout_ms (negative: no limit) for a notice of a generation newer than `held` (the world
 * this process holds); *generation is the newest named. DISTRUN_DEADLINE_EXCEEDED when none came. */
int distrun_recovery_wait_change(distrun_recovery* recovery, int held, int64_t timeout_ms, int* generation);
/* Waits up to timeout_ms (negative: no limit) for a world of min_generation or later; fills *world (free it
 * with distrun_world_free). */
int distrun_recovery_wait_world(distrun_recovery* recovery, int min_generation, int64_t timeout_ms,
                                distrun_world* world);
/* This process tore its communicators down and waits for a world of `generation` or later. */
int distrun_recovery_ready(distrun_recovery* recovery, int generation);
/* This process formed its communicators of `generation`. */
int distrun_recovery_up(distrun_recovery* recovery, int generation);
void distrun_world_free(distrun_world* world);
/* What the last call that failed said; as distrun_client_last_error. */
size_t distrun_recovery_last_error(distrun_recovery* recovery, char* buffer, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* DISTRUN_CLIENT_H_ */
