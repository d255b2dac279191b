// The OpenCL code generator: kernel IR -> OpenCL C 1.2 source, one program per executable,
// and a check of emitted source with libclang that needs no OpenCL runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nnc/ir/GpuTarget.h"
#include "nnc/ir/Kernel.h"
#include "nnc/support/KernelAbi.h"

namespace nnc {

/// An OpenCL C program holding every kernel (launched as OpenCLLaunch says, KernelAbi.h).
struct OpenCLProgram {
  std::string source;
  std::vector<OpenCLLaunch> launches; ///< In the order of the kernels given.
};

/// Emits the kernels (schedules applied) for `device`: the outermost loop marked parallel,
/// when it is the whole body, runs over the NDRange (one iteration per work-item, in
/// work-groups of up to 64 that the device's limits allow); other kernels run as one
/// work-item. Fails naming the kernel for what OpenCL C cannot express.
Expected<OpenCLProgram> emitOpenCL(const std::vector<kir::Kernel> &kernels,
                                   const GpuTarget &device);

/// The kernels, with each kernel whose body is several loop nests in sequence (a concat
/// writing each operand's piece, a split, an initialization then an accumulation) cut into one
/// kernel per nest, run in order with the same buffers (the first keeps the name, the others
/// add _p1, _p2, ...), when that makes one of them a grid: on an OpenCL device such a kernel
/// otherwise runs as one work-item. Locals declared before a nest are copied into its kernel;
/// a kernel whose nests pass a local from one to the next, or that has local buffers, stays
/// whole (codegen/opencl/GridPhases.cpp).
std::vector<kir::Kernel> splitGridPhases(std::vector<kir::Kernel> kernels);

/// Parses `source` as OpenCL C 1.2 with libclang; the error lists each problem as
/// `what:LINE:COL: message` with the offending line.
Error checkOpenCLSource(const std::string &source, const std::string &what = "kernels.cl");

} // namespace nnc
