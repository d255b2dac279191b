// The per-run floor of an OpenCL device: what one run of a model costs before any kernel does
// work. A run uploads its input, enqueues its kernels and reads its output back; this times
// that with kernels that do (almost) nothing, so a model's own time can be read against it
// (bench/opencl_device.sh; issue 15: a model whose CPU time is far below this floor cannot be
// within a small factor of the CPU on this device, whatever its kernels do).
//
//   nnc-opencl-floor [P.D] [RUNS]
//
// For K = 0, 1, 3 and 8 kernels of 64 work-items each, three ways of moving the data: a
// 3,136-byte write and a 40-byte blocking read (as nnc's runtime does), a blocking map and
// unmap of host-pointer buffers (zero copy), and clFinish alone (no data). Prints the median
// and the minimum of RUNS runs (after 10 untimed) per case. Exits 1 naming the failing call.
#include "../opencl_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kBytes = 1 << 20 };
static float hostIn[kBytes / 4] __attribute__((aligned(4096)));
static float hostOut[kBytes / 4] __attribute__((aligned(4096)));

int main(int argc, char **argv) {
  unsigned pi = 0, di = 0;
  if (argc > 1 && sscanf(argv[1], "%u.%u", &pi, &di) != 2) {
    fprintf(stderr, "usage: %s [P.D] [RUNS]\n", argv[0]);
    return 1;
  }
  int runs = argc > 2 ? atoi(argv[2]) : 300;
  if (runs < 1) {
    fprintf(stderr, "opencl_floor: RUNS must be positive\n");
    return 1;
  }
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q;
  if (benchOpenQueue("opencl_floor", pi, di, &dev, &ctx, &q))
    return 1;
  cl_int err = CL_SUCCESS;
  const char *src = "__kernel void k(__global const float *a, __global float *o) {\n"
                    "  size_t i = get_global_id(0); o[i] = a[i] + 1.0f;\n}\n";
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  BENCH_CHECK_CL("opencl_floor", err);
  BENCH_CHECK_CL("opencl_floor", clBuildProgram(prog, 1, &dev, "", NULL, NULL));
  cl_kernel kern = clCreateKernel(prog, "k", &err);
  BENCH_CHECK_CL("opencl_floor", err);
  double *ms = malloc(sizeof(double) * (size_t)runs);
  static const char *modes[] = {"write + read", "map + unmap", "finish only"};
  const int counts[] = {0, 1, 3, 8};
  for (int mode = 0; mode < 3; ++mode) {
    cl_mem in, out;
    if (mode == 1) {
      in = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, kBytes, hostIn, &err);
      BENCH_CHECK_CL("opencl_floor", err);
      out = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, kBytes, hostOut, &err);
    } else {
      in = clCreateBuffer(ctx, CL_MEM_READ_WRITE, kBytes, NULL, &err);
      BENCH_CHECK_CL("opencl_floor", err);
      out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, kBytes, NULL, &err);
    }
    BENCH_CHECK_CL("opencl_floor", err);
    BENCH_CHECK_CL("opencl_floor", clSetKernelArg(kern, 0, sizeof in, &in));
    BENCH_CHECK_CL("opencl_floor", clSetKernelArg(kern, 1, sizeof out, &out));
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
      int k = counts[c];
      size_t global = 64;
      for (int r = -10; r < runs; ++r) {
        double t0 = benchNowMs();
        if (mode == 0)
          BENCH_CHECK_CL("opencl_floor",
                         clEnqueueWriteBuffer(q, in, CL_FALSE, 0, 3136, hostIn, 0, NULL, NULL));
        for (int j = 0; j < k; ++j)
          BENCH_CHECK_CL("opencl_floor",
                         clEnqueueNDRangeKernel(q, kern, 1, NULL, &global, NULL, 0, NULL, NULL));
        if (mode == 0) {
          BENCH_CHECK_CL("opencl_floor",
                         clEnqueueReadBuffer(q, out, CL_TRUE, 0, 40, hostOut, 0, NULL, NULL));
        } else if (mode == 1) {
          void *p = clEnqueueMapBuffer(q, out, CL_TRUE, CL_MAP_READ, 0, 40, 0, NULL, NULL, &err);
          BENCH_CHECK_CL("opencl_floor", err);
          BENCH_CHECK_CL("opencl_floor", clEnqueueUnmapMemObject(q, out, p, 0, NULL, NULL));
          BENCH_CHECK_CL("opencl_floor", clFinish(q));
        } else {
          BENCH_CHECK_CL("opencl_floor", clFinish(q));
        }
        if (r >= 0)
          ms[r] = benchNowMs() - t0;
      }
      qsort(ms, (size_t)runs, sizeof(double), benchCmpDouble);
      printf("%-12s %d kernels: median %.4f ms, min %.4f ms\n", modes[mode], k, ms[runs / 2],
             ms[0]);
    }
    clReleaseMemObject(in);
    clReleaseMemObject(out);
  }
  free(ms);
  clReleaseKernel(kern);
  clReleaseProgram(prog);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}
