/* Runs an artifact through the C ABI of libnnc_runtime on ONNX test data and compares with
 * the expected outputs (floats: rtol 1e-3, atol 1e-4, the tolerances of the conformance
 * runner's models suite, whose expected outputs are PyTorch's; others exact). C, linked
 * against libnnc_runtime only.
 *   artifact_check LIB DATA_DIR [THREADS]     load, bind input_K.pb, run, compare output_K.pb
 *   artifact_check --compare OUT_DIR EXPECTED_DIR   compare output_K.pb files (nnc-exec's) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnc/runtime/nnc_runtime.h"
#include "onnx_tensor.h"

/* 0 when `got` (dtype, bytes) matches `want` within tolerance; prints what differs. */
static int compare(const char *what, int dtype, const void *got, size_t bytes,
                   const nnc_pb_tensor *want) {
  if (dtype != want->data_type || bytes != want->bytes) {
    fprintf(stderr, "%s: dtype %d, %zu bytes; expected dtype %d, %zu bytes\n", what, dtype,
            bytes, want->data_type, want->bytes);
    return 1;
  }
  if (dtype != NNC_FLOAT32)
    return memcmp(got, want->data, bytes) != 0 ? (fprintf(stderr, "%s differs\n", what), 1) : 0;
  const float *a = got, *e = want->data;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < bytes / 4; ++i) {
    if (isnan(a[i]) && isnan(e[i]))
      continue;
    if (!(fabs((double)a[i] - e[i]) <= 1e-4 + 1e-3 * fabs((double)e[i]))) {
      if (!bad++)
        first = i;
    }
  }
  if (bad)
    fprintf(stderr, "%s: %zu of %zu elements differ; first at %zu: %g, expected %g\n", what, bad,
            bytes / 4, first, a[first], e[first]);
  return bad != 0;
}

static int compareDirs(const char *outDir, const char *expectedDir) {
  char path[4096], err[512];
  int failures = 0, k = 0;
  for (;; ++k) {
    nnc_pb_tensor want, got;
    snprintf(path, sizeof path, "%s/output_%d.pb", expectedDir, k);
    if (nnc_pb_read(path, &want, err, sizeof err) != 0)
      break;
    snprintf(path, sizeof path, "%s/output_%d.pb", outDir, k);
    if (nnc_pb_read(path, &got, err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      nnc_pb_free(&want);
      return 1;
    }
    failures += compare(path, got.data_type, got.data, got.bytes, &want);
    nnc_pb_free(&want);
    nnc_pb_free(&got);
  }
  if (k == 0) {
    fprintf(stderr, "%s: no output_0.pb\n", expectedDir);
    return 1;
  }
  printf("%d outputs %s\n", k, failures ? "DIFFER" : "match");
  return failures != 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--compare") == 0)
    return compareDirs(argv[2], argv[3]);
  if (argc < 3) {
    fprintf(stderr, "usage: artifact_check LIB DATA_DIR [THREADS] | --compare OUT EXPECTED\n");
    return 2;
  }
  int threads = argc > 3 ? atoi(argv[3]) : 1;
  nnc_model *m = nnc_load(argv[1]);
  if (!m) {
    fprintf(stderr, "nnc_load: %s\n", nnc_last_error());
    return 1;
  }
  char path[4096], err[512];
  int numIn = nnc_num_inputs(m), numOut = nnc_num_outputs(m), failures = 0;
  nnc_pb_tensor *in = calloc((size_t)numIn + 1, sizeof *in);
  void **out = calloc((size_t)numOut + 1, sizeof *out);
  for (int i = 0; i < numIn; ++i) {
    snprintf(path, sizeof path, "%s/input_%d.pb", argv[2], i);
    if (nnc_pb_read(path, &in[i], err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    if (nnc_bind_input(m, i, in[i].data, in[i].rank, in[i].dims) != 0) {
      fprintf(stderr, "%s\n", nnc_last_error());
      return 1;
    }
  }
  for (int i = 0; i < numOut; ++i) {
    out[i] = aligned_alloc(64, ((size_t)nnc_output_bytes(m, i) + 63) / 64 * 64 + 64);
    nnc_bind_output(m, i, out[i], (size_t)nnc_output_bytes(m, i));
  }
  /* Twice: the second run reuses the arena and must give the same answer. */
  for (int run = 0; run < 2; ++run) {
    if (nnc_run(m, threads) != 0) {
      fprintf(stderr, "nnc_run: %s\n", nnc_last_error());
      return 1;
    }
    for (int i = 0; i < numOut; ++i) {
      nnc_pb_tensor want;
      snprintf(path, sizeof path, "%s/output_%d.pb", argv[2], i);
      if (nnc_pb_read(path, &want, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
      }
      failures += compare(nnc_output_name(m, i), nnc_output_dtype(m, i), out[i],
                          (size_t)nnc_output_bytes(m, i), &want);
      nnc_pb_free(&want);
    }
  }
  printf("%s: %d inputs, %d outputs, %s\n", argv[1], numIn, numOut,
         failures ? "outputs DIFFER" : "outputs match the test data");
  for (int i = 0; i < numIn; ++i)
    nnc_pb_free(&in[i]);
  for (int i = 0; i < numOut; ++i)
    free(out[i]);
  free(in);
  free(out);
  nnc_free(m);
  return failures != 0;
}
