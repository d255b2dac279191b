/* The C ABI of libnnc_runtime: load an artifact written by `nnc compile --emit=lib`, bind
 * caller-owned input and output buffers, run. The library links neither LLVM nor protobuf.
 *
 * Every function that can fail returns NULL or a negative value and leaves a message for
 * nnc_last_error() (per thread). A model handle may be used by one thread at a time. */
#ifndef NNC_RUNTIME_H
#define NNC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types: the ONNX TensorProto.DataType codes. */
enum {
  NNC_FLOAT32 = 1,
  NNC_UINT8 = 2,
  NNC_INT8 = 3,
  NNC_UINT16 = 4,
  NNC_INT16 = 5,
  NNC_INT32 = 6,
  NNC_INT64 = 7,
  NNC_BOOL = 9,
  NNC_FLOAT16 = 10,
  NNC_FLOAT64 = 11,
  NNC_UINT32 = 12,
  NNC_UINT64 = 13,
  NNC_BFLOAT16 = 16
};

typedef struct nnc_model nnc_model;

/* Loads lib<name>.so (a path: "./libm.so", not a bare name). NULL on error. */
nnc_model *nnc_load(const char *path);
/* nnc_load's flags. NNC_LOAD_PROFILE: time every kernel of every run (CPU: wall time around
 * each kernel; OpenCL: the device's profiling events, which serialize nothing but cost a
 * little per launch), read with nnc_kernel_ms. */
enum { NNC_LOAD_PROFILE = 1 };
/* nnc_load with `flags` (NNC_LOAD_* or'ed; 0 is nnc_load). */
nnc_model *nnc_load_with(const char *path, unsigned flags);
/* Releases the model (NULL is fine). Bound buffers stay the caller's. */
void nnc_free(nnc_model *model);
/* The last error on this thread ("" when none). */
const char *nnc_last_error(void);

/* What the artifact holds and how it was loaded, in lines: what it was compiled from and
 * for, its kernels and tuned configs; for OpenCL the device it runs on and whether the
 * program came from the artifact's device binary or was built from source. */
const char *nnc_describe(const nnc_model *model);

int nnc_num_inputs(const nnc_model *model);
int nnc_num_outputs(const nnc_model *model);
/* Input/output i: name, dtype (NNC_FLOAT32, ...), rank, extents (rank of them), and byte
 * size. NULL or -1 when i is out of range. The shapes are the ones the artifact was compiled
 * for; no other shape runs. */
const char *nnc_input_name(const nnc_model *model, int i);
int nnc_input_dtype(const nnc_model *model, int i);
int nnc_input_rank(const nnc_model *model, int i);
const int64_t *nnc_input_shape(const nnc_model *model, int i);
int64_t nnc_input_bytes(const nnc_model *model, int i);
const char *nnc_output_name(const nnc_model *model, int i);
int nnc_output_dtype(const nnc_model *model, int i);
int nnc_output_rank(const nnc_model *model, int i);
const int64_t *nnc_output_shape(const nnc_model *model, int i);
int64_t nnc_output_bytes(const nnc_model *model, int i);
/* Index of the input/output named `name`, or -1. */
int nnc_input_index(const nnc_model *model, const char *name);
int nnc_output_index(const nnc_model *model, const char *name);

/* Binds input i to `data` holding a tensor of `rank` extents `shape` (checked against the
 * artifact's: a different shape is an error naming both). Not copied: the buffer must stay
 * valid until the last nnc_run that reads it. */
int nnc_bind_input(nnc_model *model, int i, const void *data, int rank, const int64_t *shape);
/* Binds output i to `data` of `bytes` bytes (at least nnc_output_bytes). Kernels write it in
 * place when it is 64-byte aligned; otherwise the result is copied there after the run. */
int nnc_bind_output(nnc_model *model, int i, void *data, size_t bytes);
/* Runs the model on the bound buffers with `threads` threads (0: all cores, 1: this thread
 * only). 0 on success, -1 on error: also when the data fails a check of the model (an index
 * out of range for its axis), with the message naming the node in nnc_last_error; the
 * outputs are then undefined. */
int nnc_run(nnc_model *model, int threads);

/* The kernels in launch order: their count, kernel k's name, and (for a model loaded with
 * NNC_LOAD_PROFILE) its time in milliseconds summed over the runs so far, with how many runs
 * that is. NULL or -1 when k is out of range or the model was not loaded to profile. */
int nnc_num_kernels(const nnc_model *model);
const char *nnc_kernel_name(const nnc_model *model, int k);
double nnc_kernel_ms(const nnc_model *model, int k);
int64_t nnc_profiled_runs(const nnc_model *model);

#ifdef __cplusplus
}
#endif

#endif /* NNC_RUNTIME_H */
