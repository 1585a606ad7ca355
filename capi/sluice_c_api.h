/* The Sluice C API: a C11 surface over the C++ API (framework/, stress/) for embedders and
 * language bindings. Opaque handles, each with a release function; every call that can fail
 * returns a SluiceStatus* (NULL means OK) that the caller releases. No C++ exception ever
 * crosses this boundary: one thrown inside becomes an Internal status (ResourceExhausted for
 * an allocation failure).
 *
 * Ownership: a function named *_create, *_load or returning a handle through an `out`
 * parameter gives the caller one reference, which it ends with the matching *_release
 * (NULL is accepted and ignored). Pointers passed in are borrowed for the call only unless
 * a comment says otherwise. On error, `out` parameters are left unchanged.
 *
 * Thread-safety: a context and the tensors made in it may be used from several threads at
 * once (calls are serialized inside). Option, attribute, program and run-result handles are
 * thread-compatible: no concurrent use of one handle with a call that changes it. An
 * executor runs one program at a time (concurrent runs on one executor are serialized).
 *
 * ABI: SLUICE_C_API_VERSION grows when a function or enumerator is added; an existing
 * signature, struct layout or enumerator value never changes within a major version of the
 * library (libsluice_c.so.0). Compare sluice_api_version() with the macro to detect an older
 * library at run time.
 *
 * Build: -I<prefix>/include/sluice, #include "capi/sluice_c_api.h", link -lsluice_c
 * (pkg-config sluice, or CMake find_package(Sluice) and Sluice::c). */
#ifndef SLUICE_CAPI_SLUICE_C_API_H_
#define SLUICE_CAPI_SLUICE_C_API_H_

#include <stddef.h>
#include <stdint.h>

#if defined(SLUICE_C_BUILDING)
#define SLUICE_C_EXPORT __attribute__((visibility("default")))
#else
#define SLUICE_C_EXPORT
#endif

#define SLUICE_C_API_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status ---- */

/* The values of absl::StatusCode. */
typedef enum SluiceStatusCode {
  SLUICE_OK = 0,
  SLUICE_CANCELLED = 1,
  SLUICE_UNKNOWN = 2,
  SLUICE_INVALID_ARGUMENT = 3,
  SLUICE_DEADLINE_EXCEEDED = 4,
  SLUICE_NOT_FOUND = 5,
  SLUICE_ALREADY_EXISTS = 6,
  SLUICE_PERMISSION_DENIED = 7,
  SLUICE_RESOURCE_EXHAUSTED = 8,
  SLUICE_FAILED_PRECONDITION = 9,
  SLUICE_ABORTED = 10,
  SLUICE_OUT_OF_RANGE = 11,
  SLUICE_UNIMPLEMENTED = 12,
  SLUICE_INTERNAL = 13,
  SLUICE_UNAVAILABLE = 14,
  SLUICE_DATA_LOSS = 15,
  SLUICE_UNAUTHENTICATED = 16
} SluiceStatusCode;

typedef struct SluiceStatus SluiceStatus;

/* The code of `status`; SLUICE_OK for NULL. Any thread. */
SLUICE_C_EXPORT SluiceStatusCode sluice_status_code(const SluiceStatus* status);
/* The message, naming the culprit; "" for NULL. Owned by `status`: valid until it is
 * released. Any thread. */
SLUICE_C_EXPORT const char* sluice_status_message(const SluiceStatus* status);
/* Ends `status` (NULL is ignored). */
SLUICE_C_EXPORT void sluice_status_release(SluiceStatus* status);

/* SLUICE_C_API_VERSION of the library loaded. Any thread. */
SLUICE_C_EXPORT int sluice_api_version(void);

/* ---- Data types ---- */

/* The values of sluice::DataType (core/data_type.h). Bool elements are one byte, 0 or 1.
 * SLUICE_DATA_TYPE_MAX_ENUM is no data type: it makes every int value representable, so a
 * wrong value passed in is reported (InvalidArgument), never undefined behaviour. */
typedef enum SluiceDataType {
  SLUICE_F32 = 0,
  SLUICE_F64 = 1,
  SLUICE_I32 = 2,
  SLUICE_I64 = 3,
  SLUICE_BOOL = 4,
  SLUICE_DATA_TYPE_MAX_ENUM = 0x7FFFFFFF
} SluiceDataType;

/* Bytes per element of `dtype`; 0 for a value outside the enum. Any thread. */
SLUICE_C_EXPORT size_t sluice_dtype_size(SluiceDataType dtype);

/* ---- Context: devices, a VM and the op library ---- */

typedef struct SluiceContextOptions SluiceContextOptions;
typedef struct SluiceContext SluiceContext;

/* Default options: cpu plus sim:0 and sim:1, no jitter, default device cpu, no recording,
 * no sync check. The caller owns *out. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_options_create(SluiceContextOptions** out);
SLUICE_C_EXPORT void sluice_context_options_release(SluiceContextOptions* options);
/* Where ops without tensor inputs run: "cpu", "sim:N" or "cuda:N" (cuda:N also turns the
 * CUDA provider on). InvalidArgument naming the string for any other. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_options_set_device(SluiceContextOptions* options,
                                                                const char* device);
/* Simulated devices sim:0 .. sim:(count-1), 0 to 16. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_options_set_sim_devices(SluiceContextOptions* options,
                                                                     int32_t count);
/* The sim provider's random delay of up to `max_jitter_us` before each work item, drawn
 * from `seed`. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_options_set_sim_jitter(SluiceContextOptions* options,
                                                                    int32_t max_jitter_us,
                                                                    uint64_t seed);
/* Records every VM instruction to `path` (docs/instruction_record_format.md); the record's
 * checksums are written when the context shuts down (sluice_context_shutdown). NULL or ""
 * turns recording off. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_options_set_record_path(SluiceContextOptions* options,
                                                                     const char* path);
/* Checks every access against happens-before; see sluice_context_sync_errors. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_options_set_check_sync(SluiceContextOptions* options,
                                                                    int enabled);

/* A context with `options` (NULL: the defaults). The caller owns *out; tensors and
 * executors made in it keep what they use alive, so they may outlive it. Errors: a device
 * that cannot be created (cuda:N without a GPU), a record file that cannot be opened. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_create(const SluiceContextOptions* options,
                                                    SluiceContext** out);
SLUICE_C_EXPORT void sluice_context_release(SluiceContext* context);
/* Waits for everything submitted so far; the first kernel error since the last sync. Any
 * thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_sync(SluiceContext* context);
/* Waits for all work and shuts the VM down (a recording then ends with the checksums of the
 * tensors still alive); later calls that need the VM fail. Any thread, once. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_shutdown(SluiceContext* context);
/* Unordered accesses the sync checker found so far (0 without the check). Any thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_context_sync_errors(const SluiceContext* context,
                                                         int64_t* out);

/* ---- Tensors ---- */

typedef struct SluiceTensor SluiceTensor;

/* A tensor on `device` (NULL: the context's device) holding a copy of `data`, which must be
 * `byte_size` = elements x sluice_dtype_size(dtype) bytes, row-major; `shape` has `rank`
 * dimensions (NULL when rank is 0: a scalar). Returns once the bytes are copied. The caller
 * owns *out. Any thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_create(SluiceContext* context, SluiceDataType dtype,
                                                   const int64_t* shape, size_t rank,
                                                   const void* data, size_t byte_size,
                                                   const char* device, SluiceTensor** out);
/* Another handle to the same tensor; the caller owns *out. Any thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_share(const SluiceTensor* tensor, SluiceTensor** out);
SLUICE_C_EXPORT void sluice_tensor_release(SluiceTensor* tensor);
/* Copies the tensor's contents into `data` (`byte_size` must be its exact size); waits only
 * for the ops that produce it, and reports their error. Any thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_read(const SluiceTensor* tensor, void* data,
                                                 size_t byte_size);
/* A copy of the tensor on `device`; the caller owns *out. Any thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_to_device(const SluiceTensor* tensor,
                                                      const char* device, SluiceTensor** out);
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_dtype(const SluiceTensor* tensor, SluiceDataType* out);
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_rank(const SluiceTensor* tensor, size_t* out);
/* Writes the `rank` dimensions to `dims`, which holds `capacity`; OutOfRange when too
 * small. */
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_shape(const SluiceTensor* tensor, int64_t* dims,
                                                  size_t capacity);
/* Elements x element size. */
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_byte_size(const SluiceTensor* tensor, size_t* out);
/* "cpu", "sim:N" or "cuda:N"; owned by the tensor handle, valid until it is released. */
SLUICE_C_EXPORT SluiceStatus* sluice_tensor_device(const SluiceTensor* tensor, const char** out);

/* ---- Op calls by name ---- */

typedef struct SluiceAttrs SluiceAttrs;

/* An empty attribute list; the caller owns *out. Setting a name again replaces its value.
 * Thread-compatible. */
SLUICE_C_EXPORT SluiceStatus* sluice_attrs_create(SluiceAttrs** out);
SLUICE_C_EXPORT void sluice_attrs_release(SluiceAttrs* attrs);
SLUICE_C_EXPORT SluiceStatus* sluice_attrs_set_int(SluiceAttrs* attrs, const char* name,
                                                   int64_t value);
SLUICE_C_EXPORT SluiceStatus* sluice_attrs_set_float(SluiceAttrs* attrs, const char* name,
                                                     double value);
/* Stored as the int 0 or 1 (the op schemas' bool attributes are ints). */
SLUICE_C_EXPORT SluiceStatus* sluice_attrs_set_bool(SluiceAttrs* attrs, const char* name,
                                                    int value);
SLUICE_C_EXPORT SluiceStatus* sluice_attrs_set_string(SluiceAttrs* attrs, const char* name,
                                                      const char* value);
/* `values` may be NULL when `count` is 0. */
SLUICE_C_EXPORT SluiceStatus* sluice_attrs_set_ints(SluiceAttrs* attrs, const char* name,
                                                    const int64_t* values, size_t count);

/* Runs the registered op `op` (docs/program-format.md lists them) on `inputs`, given slot by
 * slot: slot i takes slot_sizes[i] tensors, in order (slot_sizes NULL: one tensor per slot).
 * `attrs` may be NULL; `device` NULL: the inputs' device (or the context's). Returns at once:
 * the op runs asynchronously and a kernel error surfaces when an output is read or at the
 * next sync. Up to `capacity` outputs (slots flattened in order) go to `outputs`, each owned
 * by the caller, and their count to *num_outputs; OutOfRange when `capacity` is too small
 * (the outputs are then released). Errors name the op and the operand: an unknown op, a
 * missing or unknown attribute, wrong shapes or dtypes. Any thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_op_call(SluiceContext* context, const char* op,
                                             const SluiceTensor* const* inputs,
                                             const size_t* slot_sizes, size_t num_slots,
                                             const SluiceAttrs* attrs, const char* device,
                                             SluiceTensor** outputs, size_t capacity,
                                             size_t* num_outputs);

/* ---- Programs and executors ---- */

typedef struct SluiceProgram SluiceProgram;
typedef struct SluiceExecutorOptions SluiceExecutorOptions;
typedef struct SluiceExecutor SluiceExecutor;
typedef struct SluiceRunResult SluiceRunResult;

/* A program file (docs/program-format.md); errors name the file and the line. The caller
 * owns *out; a program is immutable and may be run from several threads. */
SLUICE_C_EXPORT SluiceStatus* sluice_program_load(const char* path, SluiceProgram** out);
/* An ONNX model file imported (docs/onnx.md: the op types and opsets mapped). Its
 * initializers travel with the program: a run writes them into the executor's scope when
 * the scope lacks them. Feeds and fetches may be named by their ONNX names. Sluice programs
 * are static: `dim_sizes` "NAME=N[,NAME=N...]" sizes the model's symbolic input dimensions
 * (NULL when it has none). Errors name the file and, for a node that cannot be imported,
 * the node, its op type and opset; Unimplemented in a build without ONNX. The caller owns
 * *out. */
SLUICE_C_EXPORT SluiceStatus* sluice_program_load_onnx(const char* path, const char* dim_sizes,
                                                       SluiceProgram** out);
SLUICE_C_EXPORT void sluice_program_release(SluiceProgram* program);

/* Default options: device cpu, one compute stream, subgraph compilation on. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_options_create(SluiceExecutorOptions** out);
SLUICE_C_EXPORT void sluice_executor_options_release(SluiceExecutorOptions* options);
/* Where the programs run: "cpu", "sim:N" or "cuda:N". */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_options_set_device(SluiceExecutorOptions* options,
                                                                 const char* device);
/* Ops spread over `streams` compute streams, 1 or more. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_options_set_compute_streams(
    SluiceExecutorOptions* options, int32_t streams);
/* Groups of elementwise ops compiled into one kernel each (on by default). */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_options_set_compile_subgraphs(
    SluiceExecutorOptions* options, int enabled);
/* The in-place pass (on by default): an op writes its output into an input that dies at
 * it, where the op allows it (docs/design.md, "Static graphs"). Off: every output gets
 * storage of its own. Results are the same bits either way. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_options_set_inplace(SluiceExecutorOptions* options,
                                                                  int enabled);
/* The add-to pass (off by default, as Paddle's enable_addto): a gradient that several ops
 * contribute to is accumulated in one buffer, the later contributors adding into it, and its
 * sum op goes. Results are the same bits either way. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_options_set_addto(SluiceExecutorOptions* options,
                                                                int enabled);

/* An executor over `context`'s VM with a scope of its own for the persistable variables
 * (parameters) the programs it runs create and update. `options` may be NULL. The caller
 * owns *out; it keeps the context's VM alive. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_create(SluiceContext* context,
                                                     const SluiceExecutorOptions* options,
                                                     SluiceExecutor** out);
SLUICE_C_EXPORT void sluice_executor_release(SluiceExecutor* executor);

/* A host buffer fed to a run: `byte_size` = elements x sluice_dtype_size(dtype) bytes of
 * `data`, row-major, with `rank` dimensions in `shape`. Borrowed for the call. */
typedef struct SluiceHostBuffer {
  SluiceDataType dtype;
  const int64_t* shape;
  size_t rank;
  const void* data;
  size_t byte_size;
} SluiceHostBuffer;

/* sluice_program_load_onnx with graph inputs taken as constants: constant_names[i] is fixed at
 * import to constant_values[i] (a host buffer of the input's declared dtype and shape) and is no
 * longer fed. For inputs that Sluice takes as attributes (a Reshape's shape, a Reduce's axes,
 * Clip's bounds): without a value such an input is refused with a message naming it and
 * "constant_inputs". The values are copied before this returns. */
SLUICE_C_EXPORT SluiceStatus* sluice_program_load_onnx_with_constants(
    const char* path, const char* dim_sizes, const char* const* constant_names,
    const SluiceHostBuffer* constant_values, size_t num_constants, SluiceProgram** out);

/* Runs `program` once and waits: feed variable feed_names[i] from feeds[i], then fetch
 * `fetch_names` into *out (NULL: discard them), owned by the caller. Errors, before
 * anything runs: an unknown feed or fetch name, a missing feed, a wrong dtype, shape or
 * buffer size, an uninitialized persistable; then a failed op. Serialized per executor. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_run(SluiceExecutor* executor,
                                                  const SluiceProgram* program,
                                                  const char* const* feed_names,
                                                  const SluiceHostBuffer* feeds, size_t num_feeds,
                                                  const char* const* fetch_names,
                                                  size_t num_fetches, SluiceRunResult** out);
/* The same with device-resident inputs and outputs (I/O binding): also feed variable
 * device_feed_names[i] from device_feeds[i], a tensor of the executor's context on the
 * program's device with the declared dtype and shape (copied into the run before this
 * returns); fetch_names[i] stays on its device when fetch_on_device[i] is non-zero
 * (NULL: none) and is read with sluice_run_result_device_fetch. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_run_with_device_io(
    SluiceExecutor* executor, const SluiceProgram* program, const char* const* feed_names,
    const SluiceHostBuffer* feeds, size_t num_feeds, const char* const* device_feed_names,
    const SluiceTensor* const* device_feeds, size_t num_device_feeds,
    const char* const* fetch_names, const int* fetch_on_device, size_t num_fetches,
    SluiceRunResult** out);

/* Writes every persistable variable of `program` in the executor's scope to
 * `directory`/NAME.npy (the directory is created), replacing the whole set at once: the
 * files are written into a sibling directory that is then swapped with `directory`, so a
 * reader or a killed process sees the old set or the new one, never a mix. Other files in
 * `directory` are kept. FailedPrecondition when `directory` is a mount point. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_save_persistables(SluiceExecutor* executor,
                                                                const SluiceProgram* program,
                                                                const char* directory);
/* Reads `directory`/NAME.npy into each persistable variable of `program` (dtype and shape
 * must match the program's); NotFound naming every missing file. On error nothing is
 * loaded. */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_load_persistables(SluiceExecutor* executor,
                                                                const SluiceProgram* program,
                                                                const char* directory);
/* As sluice_executor_load_persistables, but loads only the files `directory` holds and
 * leaves every other persistable as it was (as the startup program made it); `directory`
 * itself must exist. How many variables were loaded and left as they were go to
 * `num_loaded` and `num_skipped` (either may be NULL). */
SLUICE_C_EXPORT SluiceStatus* sluice_executor_load_persistables_partial(
    SluiceExecutor* executor, const SluiceProgram* program, const char* directory,
    size_t* num_loaded, size_t* num_skipped);

SLUICE_C_EXPORT void sluice_run_result_release(SluiceRunResult* result);
SLUICE_C_EXPORT SluiceStatus* sluice_run_result_num_fetches(const SluiceRunResult* result,
                                                            size_t* out);
/* Fetch `index` (in fetch order) as it came back to the host: its dtype, shape (rank dims)
 * and bytes, all owned by `result` and valid until it is released. FailedPrecondition for a
 * device-resident fetch. Any argument but `result` and `index` may be NULL. */
SLUICE_C_EXPORT SluiceStatus* sluice_run_result_fetch(const SluiceRunResult* result, size_t index,
                                                      SluiceDataType* dtype, const int64_t** shape,
                                                      size_t* rank, const void** data,
                                                      size_t* byte_size);
/* Device-resident fetch `index` as a tensor of the executor's context; the caller owns *out.
 * FailedPrecondition for a host fetch. */
SLUICE_C_EXPORT SluiceStatus* sluice_run_result_device_fetch(const SluiceRunResult* result,
                                                             size_t index, SluiceTensor** out);

/* ---- VM tools: replay and stress ---- */

/* What a replay found; see sluice_replay. */
typedef struct SluiceReplayReport {
  int64_t instructions;       /* replayed, over every repeat */
  int64_t checksums_compared; /* stored checksums compared with the replayed contents */
  int64_t checksum_mismatches;
  int64_t checksums_skipped; /* on memory the host cannot read */
  int64_t sync_errors;       /* with check_sync */
  int32_t op_errors;         /* 1 when a kernel failed or the VM did not shut down cleanly */
  char first_problem[256];   /* "" when all is well; truncated */
} SluiceReplayReport;

/* Re-executes the instruction record at `path` `repeat` times (>= 1) and compares its
 * checksums. `device_map` "FROM=TO[,FROM=TO...]" (e.g. "sim:1=sim:0") or NULL;
 * `standard_ops` non-zero for records of programs and op calls (0: records of the stress
 * run); `check_sync` runs with the sync checker on. Findings go to *report; errors are for
 * an unreadable or malformed record (naming the line) or an unresolvable op. Any thread. */
SLUICE_C_EXPORT SluiceStatus* sluice_replay(const char* path, const char* device_map,
                                            int standard_ops, int check_sync, int32_t repeat,
                                            SluiceReplayReport* report);

/* The eager stress run of `sluice stress`. */
typedef struct SluiceStressOptions {
  int32_t programs;
  uint64_t seed;
  int32_t streams;     /* compute streams per sim device */
  int32_t sim_devices; /* 1 to 16 */
  int32_t tensors;     /* per program */
  int32_t ops;         /* per program, after the initial fills */
  int64_t elements;    /* floats per tensor */
  int32_t jitter_us;
  int32_t soft_sync;         /* 0: no sync instructions, so the checker must report errors */
  int32_t caller_scheduling; /* non-zero: the VM schedules on the calling thread */
  int32_t timeout_s;         /* a program taking longer counts as a hang */
  const char* record_path;   /* NULL: no recording */
  int32_t progress;          /* non-zero: a line on stderr every 10% */
} SluiceStressOptions;

/* Fills `options` with the defaults of `sluice stress`. */
SLUICE_C_EXPORT void sluice_stress_options_init(SluiceStressOptions* options);

typedef struct SluiceStressTotals {
  int64_t programs;
  int64_t instructions;
  int64_t mismatches; /* tensors that differ from the sequential reference */
  int64_t sync_errors;
  int64_t hangs;
  int64_t op_errors;
  /* Non-zero after a hang: the hung VM was left behind (its memory and threads stay). */
  int32_t abandoned;
  char first_problem[256]; /* "" when there was none; truncated */
} SluiceStressTotals;

/* Runs the eager stress programs (a runtime and VM of its own) and fills *totals.
 * InvalidArgument naming the field for an out-of-range option; other errors when the run
 * cannot be set up. One at a time per process. */
SLUICE_C_EXPORT SluiceStatus* sluice_stress_run(const SluiceStressOptions* options,
                                                SluiceStressTotals* totals);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SLUICE_CAPI_SLUICE_C_API_H_ */
