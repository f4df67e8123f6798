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

#ifdef __cplusplus
}
#endif

#endif /* DISTRUN_CLIENT_H_ */
