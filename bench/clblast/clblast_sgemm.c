// CLBlast's SGEMM (row-major C = A B, untuned: CLBlast's defaults for a device its database does
// not know) on an OpenCL device: the peer of `nnc bench --target opencl` on an n^3 matmul in
// bench/opencl_device.sh (issue 15's bar: nnc at least 2x CLBlast's GFLOP/s on the same
// device). The device is chosen as nnc's opencl:P.D is (platform P, its device D).
//
//   nnc-clblast-sgemm N [ITERATIONS] [P.D]
//
// Prints the device, then "clblast sgemm N: median M ms = G GFLOP/s" (the median of ITERATIONS
// runs after 3 untimed ones, each run enqueued and waited for alone). Exits 1 with a message
// naming the failing call on any OpenCL or CLBlast error. A benchmark, not a test.
#include "../opencl_common.h"

#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s N [ITERATIONS] [P.D]\n", argv[0]);
    return 1;
  }
  size_t n = strtoul(argv[1], NULL, 10);
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  unsigned pi = 0, di = 0;
  if (argc > 3 && sscanf(argv[3], "%u.%u", &pi, &di) != 2) {
    fprintf(stderr, "clblast_sgemm: device '%s' is not P.D\n", argv[3]);
    return 1;
  }
  if (n == 0 || iters < 1) {
    fprintf(stderr, "clblast_sgemm: N and ITERATIONS must be positive\n");
    return 1;
  }
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q;
  if (benchOpenQueue("clblast_sgemm", pi, di, &dev, &ctx, &q))
    return 1;
  cl_int err = CL_SUCCESS;
  size_t bytes = n * n * sizeof(float);
  float *host = malloc(bytes);
  if (!host) {
    fprintf(stderr, "clblast_sgemm: out of memory for %zu bytes\n", bytes);
    return 1;
  }
  srand(1);
  for (size_t i = 0; i < n * n; ++i)
    host[i] = (float)rand() / (float)RAND_MAX - 0.5f;
  cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, host, &err);
  BENCH_CHECK_CL("clblast_sgemm", err);
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, host, &err);
  BENCH_CHECK_CL("clblast_sgemm", err);
  cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  BENCH_CHECK_CL("clblast_sgemm", err);
  double *ms = malloc(sizeof(double) * (size_t)iters);
  for (int it = -3; it < iters; ++it) {
    double t0 = benchNowMs();
    CLBlastStatusCode s =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f,
                     a, 0, n, b, 0, n, 0.0f, c, 0, n, &q, NULL);
    if (s != CLBlastSuccess) {
      fprintf(stderr, "clblast_sgemm: CLBlastSgemm failed: status %d\n", (int)s);
      return 1;
    }
    BENCH_CHECK_CL("clblast_sgemm", clFinish(q));
    if (it >= 0)
      ms[it] = benchNowMs() - t0;
  }
  qsort(ms, (size_t)iters, sizeof(double), benchCmpDouble);
  double med = ms[iters / 2];
  printf("clblast sgemm %zu: median %.3f ms = %.1f GFLOP/s\n", n, med,
         2.0 * (double)n * (double)n * (double)n / med / 1e6);
  free(ms);
  free(host);
  clReleaseMemObject(a);
  clReleaseMemObject(b);
  clReleaseMemObject(c);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}
