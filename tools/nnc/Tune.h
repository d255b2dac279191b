// `nnc tune` and `nnc cache`, and the tuned-kernel report of run and bench.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "nnc/runtime/Executable.h"

namespace nnc::tools {

/// Adds the `tune` and `cache` subcommands; run() runs whichever was parsed (returns -1 when
/// neither was).
class TuneCommands {
public:
  explicit TuneCommands(CLI::App &app);
  int run();

private:
  int tune();
  int cache();
  CLI::App *tuneCmd_, *cacheCmd_;
  std::string model_, cachePath_, target_ = "cpu";
  int threads_ = 1, trials_ = 0;
  double budget_ = 60;
  bool quiet_ = false;
  std::string action_, filter_;
  bool json_ = false, all_ = false;
};

/// "tuned kernels: 37/41 (missing: ...)".
std::string tunedKernelsLine(const TuningUse &u);

} // namespace nnc::tools
