// The peers' thread counts: oneDNN's OpenMP runtime and OpenBLAS read theirs from the
// environment when their libraries load, before main() runs, so a bench that sets them must
// re-execute itself with them in place (a setenv() in main() comes too late: the peer then
// runs on every core while nnc runs on --threads).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace nncbench {

/// Re-executes the program once with OMP_NUM_THREADS and OPENBLAS_NUM_THREADS = `threads`
/// (and whatever `extra` sets), marked by `marker` so the child runs on. Returns only in the
/// child, or with 1 after printing why the re-execution failed.
template <typename Extra>
int reexecWithPeerThreads(char **argv, int threads, const char *marker, Extra extra) {
  if (std::getenv(marker))
    return 0;
  std::string t = std::to_string(threads);
  setenv(marker, "1", 1);
  setenv("OMP_NUM_THREADS", t.c_str(), 1);
  setenv("OPENBLAS_NUM_THREADS", t.c_str(), 1);
  extra();
  execv("/proc/self/exe", argv);
  std::perror("execv");
  return 1;
}

} // namespace nncbench
