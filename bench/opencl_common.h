// Helpers of the bench's small OpenCL programs (bench/clblast, bench/opencl_floor): a
// monotonic clock, a comparison for qsort, an error check that names the failing call, and the
// device nnc's opencl:P.D would pick (platform P, its device D).
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <time.h>

static inline double benchNowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static inline int benchCmpDouble(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/// Returns 1 from the enclosing function (main) with the call and its OpenCL error printed.
#define BENCH_CHECK_CL(tool, call)                                                                 \
  do {                                                                                             \
    cl_int e_ = (call);                                                                            \
    if (e_ != CL_SUCCESS) {                                                                        \
      fprintf(stderr, "%s: %s failed: OpenCL error %d\n", tool, #call, (int)e_);                   \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/// Device D of platform P into *dev, its name printed; 0 on success, else 1 with a message.
static inline int benchPickDevice(const char *tool, unsigned pi, unsigned di, cl_device_id *dev) {
  cl_platform_id platforms[16];
  cl_uint np = 0;
  BENCH_CHECK_CL(tool, clGetPlatformIDs(16, platforms, &np));
  if (pi >= np) {
    fprintf(stderr, "%s: no platform %u (%u platforms)\n", tool, pi, np);
    return 1;
  }
  cl_device_id devices[16];
  cl_uint nd = 0;
  BENCH_CHECK_CL(tool, clGetDeviceIDs(platforms[pi], CL_DEVICE_TYPE_ALL, 16, devices, &nd));
  if (di >= nd) {
    fprintf(stderr, "%s: platform %u has no device %u (%u devices)\n", tool, pi, di, nd);
    return 1;
  }
  *dev = devices[di];
  char name[256] = "";
  BENCH_CHECK_CL(tool, clGetDeviceInfo(*dev, CL_DEVICE_NAME, sizeof name, name, NULL));
  printf("device %u.%u: %s\n", pi, di, name);
  return 0;
}

/// benchPickDevice, then a context and an in-order queue on that device; 0 on success, else 1
/// with a message.
static inline int benchOpenQueue(const char *tool, unsigned pi, unsigned di, cl_device_id *dev,
                                 cl_context *ctx, cl_command_queue *q) {
  if (benchPickDevice(tool, pi, di, dev))
    return 1;
  cl_int err = CL_SUCCESS;
  *ctx = clCreateContext(NULL, 1, dev, NULL, NULL, &err);
  BENCH_CHECK_CL(tool, err);
  *q = clCreateCommandQueue(*ctx, *dev, 0, &err);
  BENCH_CHECK_CL(tool, err);
  return 0;
}
