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
#define CL_TARGET_OPENCL_VERSION 120
#include <clblast_c.h>

#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmpDouble(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define CHECK_CL(call)                                                                        \
  do {                                                                                        \
    cl_int e_ = (call);                                                                       \
    if (e_ != CL_SUCCESS) {                                                                   \
      fprintf(stderr, "clblast_sgemm: %s failed: OpenCL error %d\n", #call, (int)e_);         \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

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
  cl_platform_id platforms[16];
  cl_uint np = 0;
  CHECK_CL(clGetPlatformIDs(16, platforms, &np));
  if (pi >= np) {
    fprintf(stderr, "clblast_sgemm: no platform %u (%u platforms)\n", pi, np);
    return 1;
  }
  cl_device_id devices[16];
  cl_uint nd = 0;
  CHECK_CL(clGetDeviceIDs(platforms[pi], CL_DEVICE_TYPE_ALL, 16, devices, &nd));
  if (di >= nd) {
    fprintf(stderr, "clblast_sgemm: platform %u has no device %u (%u devices)\n", pi, di, nd);
    return 1;
  }
  cl_device_id dev = devices[di];
  char name[256] = "";
  CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL));
  printf("device %u.%u: %s\n", pi, di, name);
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK_CL(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  CHECK_CL(err);
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
  CHECK_CL(err);
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, host, &err);
  CHECK_CL(err);
  cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  CHECK_CL(err);
  double *ms = malloc(sizeof(double) * (size_t)iters);
  for (int it = -3; it < iters; ++it) {
    double t0 = nowMs();
    CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                       CLBlastTransposeNo, n, n, n, 1.0f, a, 0, n, b, 0, n, 0.0f,
                                       c, 0, n, &q, NULL);
    if (s != CLBlastSuccess) {
      fprintf(stderr, "clblast_sgemm: CLBlastSgemm failed: status %d\n", (int)s);
      return 1;
    }
    CHECK_CL(clFinish(q));
    if (it >= 0)
      ms[it] = nowMs() - t0;
  }
  qsort(ms, (size_t)iters, sizeof(double), cmpDouble);
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
