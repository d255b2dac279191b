// Which statement the OpenCL printer runs over the NDRange (OpenCLEmitter.cpp), shared with the
// cut of kernels into one kernel per nest (GridPhases.cpp), so that both read it the same way.
#pragma once

#include "nnc/ir/Kernel.h"

namespace nnc::clgrid {

/// `s` without the blocks of a single statement around it.
inline kir::Stmt unwrapBlocks(kir::Stmt s) {
  while (s && s->kind == kir::StmtKind::Block && s->body.size() == 1)
    s = s->body[0];
  return s;
}

/// A loop of a work-group nest (gpu_block / gpu_thread): the printer maps it to group and
/// local ids.
inline bool isWorkGroupLoop(const kir::Stmt &s) {
  return s && s->kind == kir::StmtKind::For &&
         (s->loopKind == kir::LoopKind::GpuBlock || s->loopKind == kir::LoopKind::GpuThread);
}

/// A loop the printer makes the flat NDRange: parallel or independent, of constant extent.
inline bool isGridLoop(const kir::Stmt &s) {
  return s && s->kind == kir::StmtKind::For &&
         (s->loopKind == kir::LoopKind::Parallel || s->independent) && s->extent &&
         s->extent->kind == kir::ExprKind::IntImm;
}

} // namespace nnc::clgrid
