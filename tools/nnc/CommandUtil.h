// What the `nnc` subcommands share: error reporting, reading inputs, shape options, loading a
// model for inspect/compile, lowering a whole graph, and the tuned-kernel line.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nnc/codegen/Lowering.h"
#include "nnc/driver/Driver.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/GpuTarget.h"
#include "nnc/ir/Graph.h"
#include "nnc/ir/Kernel.h"
#include "nnc/runtime/Executable.h"

namespace nnc::tools {

/// Prints "nnc: error: MSG" on stderr and returns 1.
int fail(const std::string &msg);
int fail(const Error &e);

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t);
double medianOf(std::vector<double> v);
/// `s` inside a JSON string: quotes and backslashes escaped (paths and names, no control
/// characters).
std::string jsonEscape(const std::string &s);

/// Prints every unsupported operator and attribute; returns true when there were any.
bool reportUnsupported(const std::string &model, const std::vector<OnnxIssue> &issues);
bool isOnnx(const std::string &path);

/// "tuned kernels: 37/41 (missing: ...)".
std::string tunedKernelsLine(const TuningUse &u);
/// Prints the tuned-kernel line on stderr; fails under --require-tuned when one is missing.
int reportTuning(const Executable &exe, bool requireTuned);

/// The threads a pool of `requested` threads has (0: all cores).
int effectiveThreads(int requested);

/// Reads the inputs named by --inputs-dir (input_K.pb by position) and --input NAME=FILE, by
/// input name.
Expected<std::map<std::string, Tensor>> readInputs(const std::vector<std::string> &names,
                                                   const std::string &inputsDir,
                                                   const std::vector<std::string> &specs);
/// readInputs for a model whose inputs may be sequences or optionals, of the declared
/// `forms` (ModelFile::inputForms, one per name; none: every input a tensor): the values by
/// input name.
Expected<std::map<std::string, OnnxValue>> readInputValues(const std::vector<std::string> &names,
                                                           const std::vector<ValueForm> &forms,
                                                           const std::string &inputsDir,
                                                           const std::vector<std::string> &specs);
/// Parses --shape NAME=2x3x4 (NAME= for a scalar) into extents by input name.
Expected<std::map<std::string, Extents>> parseShapeSpecs(const std::vector<std::string> &specs);
/// The extents of an input's declared type, each symbolic dim taken as 1 (with a note on
/// stderr; --shape gives other sizes).
Extents defaultExtents(const Value &v);
/// What loadStatic does with the model's loops (scan nodes: RNN, GRU, LSTM time loops, ONNX
/// Loop and Scan).
enum class LoopForm {
  Keep,      ///< as they are
  Unroll,    ///< unrolled into their steps, for consumers that hold no loops (artifacts);
             ///< a while loop is an error
  ListSteps, ///< unrolled where the number of steps is static; a while loop is kept (its
             ///< body's kernels listed once, as they run per step: lowerGraph)
};
/// Loads and optimizes a model with `target`'s pipeline, then specializes its input shapes
/// (for inspect and compile).
Expected<std::unique_ptr<Graph>> loadStatic(const std::string &model,
                                            const std::vector<std::string> &shapeSpecs,
                                            const driver::Target &target,
                                            LoopForm loops = LoopForm::Keep);

/// Every non-constant node lowered to kernels for the target (its CPU; an OpenCL target's
/// device, with OpenCL's template registry), in order (as the executables do); `onTemplate`
/// hears each template choice, with the unit's qdqNote. A loop's kernels are its body's,
/// once (named nI_loop_...: they run once per step). The defaults are those for `threads`
/// threads (0: all cores), as an executable of that many would take.
Expected<std::vector<kir::Kernel>>
lowerGraph(const Graph &g, const driver::Target &target,
           const std::function<void(const tuning::TemplateChoice &, const std::string &note)>
               &onTemplate = nullptr,
           int threads = 0);
/// What a lowering unit's anchor (or node) says about Q/DQ lowering: "integer" for an
/// integer GEMM or conv, "fp32 between Q/DQ: REASON" for a matmul or conv that lower-qdq left
/// in floating point (its qdq_fallback attribute), else empty.
std::string qdqNote(const LoweringUnit &u);
/// A random tensor of `type` with `extents`: floats uniform in [-1, 1), integers and bools
/// zero (they are usually indices or shapes).
Tensor randomTensor(DType dtype, const Extents &extents, std::mt19937 &rng);
/// The target of a command, made once from --target and --cpu: `auto` says on stderr which
/// target it picked; the CPU is --cpu (`cpuName`), else $NNC_CPU, else the host; an OpenCL
/// target's device is chosen here (driver::chooseDevice). Code only written out (`runsHere`
/// false: inspect, compile) may be for a CPU level the host lacks, and without an OpenCL device
/// here is for GpuTarget::generic() (a note on stderr says so); `gpu`, when given, is the
/// device description an OpenCL target is for instead of a device here (--generic-gpu).
Expected<driver::Target> parseTargetOption(const std::string &name, const std::string &cpuName,
                                           bool runsHere = true, const GpuTarget *gpu = nullptr);
/// --cpu NAME (native, x86-64-v4, x86-64-v3, x86-64); empty: $NNC_CPU, else the host. Code
/// that only is written out (`runsHere` false: compile, inspect) may be for a level the host
/// lacks.
Expected<CpuTarget> parseCpuOption(const std::string &name, bool runsHere = true);
/// The help of --precision (driver::setPrecision).
inline constexpr const char *kPrecisionOptionHelp =
    "cpu: matmul precision: fp32 (default) or bf16 (weights packed as bf16, the other operand "
    "rounded to bf16, f32 sums; needs AVX512-BF16)";
/// The help of --cpu.
inline constexpr const char *kCpuOptionHelp =
    "CPU code: native (default), x86-64-v4 (AVX-512) or x86-64-v3 (AVX2); $NNC_CPU sets the "
    "default";

} // namespace nnc::tools
