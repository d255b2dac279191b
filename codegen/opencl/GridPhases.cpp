// Kernels cut into one kernel per loop nest for an OpenCL device (splitGridPhases in
// OpenCLCodegen.h).
//
// A kernel is one NDRange: the printer runs a kernel over the device's work-items only when its
// body is one grid (a parallel or independent loop nest, after locals it declares first). A
// kernel whose body is several nests in sequence ran as one work-item, all of it: a concat
// writing each operand's piece, a split writing each result, an initialization before an
// accumulation. On a GPU that is one of thousands of lanes doing the whole node.
//
// Algorithm, per kernel:
//  1. Its body (blocks flattened into their statements) must be locals (Decl) and loops;
//     a kernel with local buffers (a work-group nest) or with other statements stays whole.
//  2. Each loop is a phase; it keeps the locals declared before it (copied: each work-item
//     declares them). A phase that assigns one of those locals carries state into the next
//     phase through a private variable, which separate kernels cannot: the kernel stays whole;
//     so does one with a local read from a buffer the kernel writes (each phase would read it
//     again, after the phases before it stored there).
//  3. Each phase gets the schedule steps of its own loops (and of the loops the steps derive
//     from them, a split's .o and .i); the kernel is cut only when some phase becomes a grid.
//  4. The phases run in order, as the kernels of one node do (an in-order queue), with the
//     kernel's buffers: scratch buffers are the node's, shared by its kernels, so what one
//     phase leaves in scratch the next reads.
#include <functional>
#include <set>

#include "Grid.h"
#include "nnc/codegen/OpenCLCodegen.h"

namespace nnc {
namespace {

void loopNames(const kir::Stmt &s, std::set<std::string> &out) {
  if (!s)
    return;
  if (s->kind == kir::StmtKind::For)
    out.insert(s->name);
  for (const kir::Stmt &c : s->body)
    loopNames(c, out);
}

bool assignsAny(const kir::Stmt &s, const std::set<std::string> &vars) {
  if (!s)
    return false;
  if (s->kind == kir::StmtKind::Assign && vars.count(s->name))
    return true;
  for (const kir::Stmt &c : s->body)
    if (assignsAny(c, vars))
      return true;
  return false;
}

/// True when `e` loads from a buffer the kernel writes: a local computed from it before the
/// nests holds the value before their stores, which a later phase, a kernel of its own that
/// runs after them, would not see.
bool readsWritten(const kir::Expr &e, const kir::Kernel &k) {
  if (!e)
    return false;
  if (e->kind == kir::ExprKind::Load && e->buffer >= 0 &&
      static_cast<size_t>(e->buffer) < k.buffers.size() && k.buffers[e->buffer].written)
    return true;
  for (const kir::Expr &a : e->args)
    if (readsWritten(a, k))
      return true;
  return false;
}

/// The steps of `steps` that name only loops of `loops` (which grows by the loops a kept split
/// creates); a gpu_grid step keeps the loops of its list that are there.
kir::Schedule stepsFor(const kir::Schedule &steps, std::set<std::string> loops) {
  kir::Schedule out;
  for (const kir::ScheduleStep &st : steps.steps) {
    if (st.kind == kir::ScheduleStep::GpuGrid) {
      kir::ScheduleStep g = st;
      g.loops.clear();
      for (const std::string &l : st.loops)
        if (loops.count(l))
          g.loops.push_back(l);
      if (!g.loops.empty())
        out.steps.push_back(std::move(g));
      continue;
    }
    bool mine = st.kind == kir::ScheduleStep::Reorder
                    ? !st.loops.empty() && loops.count(st.loops.front())
                    : loops.count(st.loop) > 0;
    if (!mine)
      continue;
    if (st.kind == kir::ScheduleStep::Split) {
      loops.insert(st.loop + ".o");
      loops.insert(st.loop + ".i");
    }
    out.steps.push_back(st);
  }
  return out;
}

/// True when `k`, scheduled, runs over the NDRange as the printer reads it: its body (after
/// the locals it declares first) is a work-group nest or a grid loop (Grid.h).
bool runsAsGrid(const kir::Kernel &k) {
  Expected<kir::Stmt> body = kir::codegenBody(k);
  if (!body)
    return false;
  kir::Stmt s = clgrid::unwrapBlocks(*body);
  if (s && s->kind == kir::StmtKind::Block && !s->body.empty())
    s = clgrid::unwrapBlocks(s->body.back());
  return clgrid::isWorkGroupLoop(s) || clgrid::isGridLoop(s);
}

} // namespace

std::vector<kir::Kernel> splitGridPhases(std::vector<kir::Kernel> kernels) {
  std::vector<kir::Kernel> out;
  for (kir::Kernel &k : kernels) {
    kir::Stmt body = clgrid::unwrapBlocks(k.body);
    std::vector<kir::Kernel> phases;
    if (k.locals.empty() && body && body->kind == kir::StmtKind::Block) {
      std::vector<kir::Stmt> decls;
      std::set<std::string> declared;
      bool whole = false;
      std::vector<std::vector<kir::Stmt>> bodies;
      // Nested blocks run in sequence like their statements: a fused concat's hoisted scalar
      // operands come first, then a block of the pieces' nests (YOLO's box decode concat,
      // which otherwise runs as one work-item).
      std::vector<kir::Stmt> flat;
      std::function<void(const kir::Stmt &)> flatten = [&](const kir::Stmt &c) {
        if (c && c->kind == kir::StmtKind::Block)
          for (const kir::Stmt &s : c->body)
            flatten(s);
        else
          flat.push_back(c);
      };
      flatten(body);
      for (const kir::Stmt &c : flat) {
        if (!c)
          continue;
        if (c->kind == kir::StmtKind::Decl) {
          if (readsWritten(c->value, k)) {
            whole = true;
            break;
          }
          decls.push_back(c);
          declared.insert(c->name);
          continue;
        }
        if (c->kind != kir::StmtKind::For || assignsAny(c, declared)) {
          whole = true;
          break;
        }
        std::vector<kir::Stmt> b = decls;
        b.push_back(c);
        bodies.push_back(std::move(b));
      }
      bool anyGrid = false;
      if (!whole && bodies.size() >= 2)
        for (size_t i = 0; i < bodies.size(); ++i) {
          kir::Kernel p = k;
          if (i > 0)
            p.name = k.name + "_p" + std::to_string(i);
          // The work stays with the last phase: those before it prepare its operands (pack
          // panels, copy windows), as a template's kernels before its GEMM do.
          if (i + 1 < bodies.size())
            p.flops = 0;
          std::set<std::string> loops;
          loopNames(bodies[i].back(), loops);
          p.schedule = stepsFor(k.schedule, loops);
          p.body = kir::block(std::move(bodies[i]));
          anyGrid = anyGrid || runsAsGrid(p);
          phases.push_back(std::move(p));
        }
      if (!anyGrid)
        phases.clear();
    }
    if (phases.empty()) {
      out.push_back(std::move(k));
      continue;
    }
    for (kir::Kernel &p : phases)
      out.push_back(std::move(p));
  }
  return out;
}

} // namespace nnc
