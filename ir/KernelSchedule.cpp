// Schedules of the kernel-level IR: their text form and applySchedule(), which rewrites a
// deep copy of a kernel's canonical loop nest by the schedule's steps.
#include <functional>
#include <set>

#include <fmt/format.h>

#include "TextSyntax.h"
#include "nnc/ir/Kernel.h"

namespace nnc::kir {

namespace {

std::string stepStr(const ScheduleStep &s) {
  switch (s.kind) {
  case ScheduleStep::Split:
    return fmt::format("split({}, {})", text::kernelName(s.loop), s.factor);
  case ScheduleStep::Reorder: {
    std::string r = "reorder(";
    for (size_t k = 0; k < s.loops.size(); ++k)
      r += (k ? ", " : "") + text::kernelName(s.loops[k]);
    return r + ")";
  }
  case ScheduleStep::Vectorize:
    return fmt::format("vectorize({})", text::kernelName(s.loop));
  case ScheduleStep::Unroll:
    return fmt::format("unroll({})", text::kernelName(s.loop));
  case ScheduleStep::Parallel:
    return fmt::format("parallel({})", text::kernelName(s.loop));
  case ScheduleStep::GpuBlocks:
    return fmt::format("gpu_blocks({}, {})", text::kernelName(s.loop), s.factor);
  case ScheduleStep::GpuThreads:
    return fmt::format("gpu_threads({}, {})", text::kernelName(s.loop), s.factor);
  case ScheduleStep::GpuGrid: {
    std::string r = "gpu_grid(";
    for (size_t k = 0; k < s.loops.size(); ++k)
      r += (k ? ", " : "") + text::kernelName(s.loops[k]);
    return r + ")";
  }
  }
  return "?";
}

Stmt cloneStmt(const Stmt &s) {
  if (!s)
    return nullptr;
  auto c = std::make_shared<StmtNode>(*s);
  for (Stmt &b : c->body)
    b = cloneStmt(b);
  return c;
}

/// The replacement of every Var `name` by `with`, for rewrite() and rewriteStmt().
std::function<Expr(const Expr &)> replaceVar(const std::string &name, const Expr &with) {
  return [name, with](const Expr &x) {
    return x->kind == ExprKind::Var && x->name == name ? with : Expr();
  };
}

void substituteStmt(const Stmt &s, const std::string &name, const Expr &with) {
  rewriteStmt(s, replaceVar(name, with));
}

/// Finds loop `name`: the path of statement slots from the root to it (inclusive).
bool findLoop(Stmt &slot, const std::string &name, std::vector<Stmt *> &path) {
  if (!slot)
    return false;
  path.push_back(&slot);
  if (slot->kind == StmtKind::For && slot->name == name)
    return true;
  for (Stmt &b : slot->body)
    if (findLoop(b, name, path))
      return true;
  path.pop_back();
  return false;
}

void collectNames(const Stmt &s, std::set<std::string> &names) {
  if (!s)
    return;
  if (s->kind == StmtKind::For || s->kind == StmtKind::Decl)
    names.insert(s->name);
  names.insert(s->names.begin(), s->names.end());
  for (const Stmt &b : s->body)
    collectNames(b, names);
}

bool containsParallel(const Stmt &s) {
  if (!s)
    return false;
  if (s->kind == StmtKind::For && s->loopKind == LoopKind::Parallel)
    return true;
  for (const Stmt &b : s->body)
    if (containsParallel(b))
      return true;
  return false;
}

/// The single loop directly inside loop `s`, through one-statement blocks and guards (ifs
/// without else, as split leaves them), whose conditions are appended to `guards`; or null.
Stmt *innerLoop(const Stmt &s, std::vector<Expr> &guards) {
  Stmt *b = &s->body[0];
  while (*b) {
    if ((*b)->kind == StmtKind::Block && (*b)->body.size() == 1) {
      b = &(*b)->body[0];
    } else if ((*b)->kind == StmtKind::If && ((*b)->body.size() < 2 || !(*b)->body[1])) {
      guards.push_back((*b)->value);
      b = &(*b)->body[0];
    } else {
      break;
    }
  }
  return *b && (*b)->kind == StmtKind::For ? b : nullptr;
}

struct Scheduler {
  const Kernel &k;
  Stmt root;

  Error fail(const ScheduleStep &step, const std::string &msg) const {
    return makeError("kernel {}: schedule step '{}': {}", k.name, stepStr(step), msg);
  }

  Expected<std::vector<Stmt *>> find(const ScheduleStep &step, const std::string &name) {
    std::vector<Stmt *> path;
    if (!findLoop(root, name, path))
      return fail(step, fmt::format("no loop named '{}'", name));
    return path;
  }

  Error split(const ScheduleStep &step) {
    if (step.factor <= 0)
      return fail(step, "the factor must be positive");
    NNC_ASSIGN_OR_RETURN(std::vector<Stmt *> path, find(step, step.loop));
    Stmt loop = *path.back();
    std::string outer = step.loop + ".o", inner = step.loop + ".i";
    std::set<std::string> names;
    collectNames(root, names);
    for (const std::string &n : {outer, inner})
      if (names.count(n))
        return fail(step, fmt::format("a loop or local named '{}' already exists", n));
    Expr n = loop->extent;
    Expr f = intImm(step.factor);
    Expr index = add(mul(var(outer), f), var(inner));
    Stmt body = loop->body[0];
    substituteStmt(body, step.loop, index);
    Expr outerExtent;
    bool guard = true;
    if (n->kind == ExprKind::IntImm) {
      outerExtent = intImm((n->intValue + step.factor - 1) / step.factor);
      guard = n->intValue % step.factor != 0;
    } else {
      outerExtent = div(add(n, intImm(step.factor - 1)), f);
    }
    if (guard)
      body = ifThen(lt(index, n), body);
    Stmt in = forLoop(inner, f, body);
    in->independent = loop->independent;
    *path.back() = forLoop(outer, outerExtent, in, loop->loopKind);
    (*path.back())->independent = loop->independent;
    return Error::success();
  }

  Error reorder(const ScheduleStep &step) {
    if (step.loops.size() < 2)
      return Error::success();
    std::set<std::string> wanted(step.loops.begin(), step.loops.end());
    if (wanted.size() != step.loops.size())
      return fail(step, "a loop is named twice");
    // The outermost of the named loops has the shortest path.
    size_t bestDepth = SIZE_MAX;
    Stmt *top = nullptr;
    for (const std::string &name : step.loops) {
      NNC_ASSIGN_OR_RETURN(std::vector<Stmt *> path, find(step, name));
      if (path.size() < bestDepth) {
        bestDepth = path.size();
        top = path.back();
      }
    }
    // Walk down the perfect nest from it until every named loop is on the chain.
    // Guards met on the way (split tails) move inside the innermost loop of the chain, where
    // every variable they test is defined whatever the order.
    std::vector<Stmt *> chain{top};
    std::vector<Expr> guards;
    size_t found = wanted.count((*top)->name);
    while (found < wanted.size()) {
      Stmt *next = innerLoop(*chain.back(), guards);
      if (!next)
        return fail(step, fmt::format("the loops are not perfectly nested (loop '{}' holds more "
                                      "than one loop)",
                                      (*chain.back())->name));
      chain.push_back(next);
      found += wanted.count((*next)->name);
    }
    std::set<std::string> chainVars;
    for (Stmt *s : chain)
      chainVars.insert((*s)->name);
    for (Stmt *s : chain)
      if (mentions((*s)->extent, chainVars))
        return fail(step, fmt::format("the extent of loop '{}' depends on another loop of the nest",
                                      (*s)->name));
    // Named loops take the chain positions of named loops, in the order given.
    struct Header {
      std::string name;
      Expr extent;
      LoopKind kind;
      bool independent;
    };
    std::vector<Header> headers;
    for (const std::string &name : step.loops)
      for (Stmt *s : chain)
        if ((*s)->name == name)
          headers.push_back({(*s)->name, (*s)->extent, (*s)->loopKind, (*s)->independent});
    std::vector<Stmt> loops; // held by value: relinking frees the guards' nodes
    for (Stmt *s : chain)
      loops.push_back(*s);
    if (!guards.empty()) {
      for (size_t c = 0; c + 1 < loops.size(); ++c)
        loops[c]->body[0] = loops[c + 1];
      Expr cond = guards[0];
      for (size_t g = 1; g < guards.size(); ++g)
        cond = land(cond, guards[g]);
      Stmt &innermost = loops.back()->body[0];
      innermost = ifThen(cond, innermost);
    }
    size_t next = 0;
    for (const Stmt &s : loops) {
      if (!wanted.count(s->name))
        continue;
      const Header &h = headers[next++];
      s->name = h.name;
      s->extent = h.extent;
      s->loopKind = h.kind;
      s->independent = h.independent;
    }
    return Error::success();
  }

  Error mark(const ScheduleStep &step, LoopKind kind) {
    NNC_ASSIGN_OR_RETURN(std::vector<Stmt *> path, find(step, step.loop));
    Stmt &loop = *path.back();
    if (kind == LoopKind::Parallel) {
      for (size_t i = 0; i + 1 < path.size(); ++i)
        if ((*path[i])->kind == StmtKind::For && (*path[i])->loopKind == LoopKind::Parallel)
          return fail(step, fmt::format("loop '{}' is inside parallel loop '{}'", step.loop,
                                        (*path[i])->name));
      if (containsParallel(loop->body[0]))
        return fail(step, fmt::format("loop '{}' contains a parallel loop", step.loop));
    }
    if (kind == LoopKind::GpuBlock || kind == LoopKind::GpuThread) {
      if (step.factor < 0 || step.factor > 2)
        return fail(step, fmt::format("NDRange dimension {} is not 0, 1 or 2", step.factor));
      loop->gpuAxis = static_cast<int>(step.factor);
    }
    loop->loopKind = kind;
    return Error::success();
  }

  Error apply(const ScheduleStep &step) {
    switch (step.kind) {
    case ScheduleStep::Split: return split(step);
    case ScheduleStep::Reorder: return reorder(step);
    case ScheduleStep::Vectorize: return mark(step, LoopKind::Vectorized);
    case ScheduleStep::Unroll: return mark(step, LoopKind::Unrolled);
    case ScheduleStep::Parallel: return mark(step, LoopKind::Parallel);
    case ScheduleStep::GpuBlocks:
      return mark(step, LoopKind::GpuBlock);
    case ScheduleStep::GpuThreads:
      return mark(step, LoopKind::GpuThread);
    case ScheduleStep::GpuGrid:
      for (const std::string &name : step.loops) {
        NNC_ASSIGN_OR_RETURN(std::vector<Stmt *> path, find(step, name));
        (*path.back())->independent = true;
      }
      return Error::success();
    }
    return fail(step, "unknown step");
  }
};

/// A split tail's guard `for v in 0..E { if (A + v < N) S }` (A and N free of v) becomes
/// `for v in 0..min(E, N - A) { S }`: the same iterations, but a loop without a condition in
/// its body, which LLVM vectorizes with a plain remainder instead of masking every lane.
void tightenGuardedLoops(const Stmt &s) {
  if (!s)
    return;
  for (const Stmt &b : s->body)
    tightenGuardedLoops(b);
  if (s->kind != StmtKind::For || s->body.size() != 1 || !s->body[0])
    return;
  const Stmt &g = s->body[0];
  if (g->kind != StmtKind::If || g->body.empty() || (g->body.size() > 1 && g->body[1]))
    return;
  const Expr &c = g->value;
  if (c->kind != ExprKind::Op || c->op != OpKind::Less || c->args.size() != 2)
    return;
  const Expr &x = c->args[0], &n = c->args[1];
  if (x->kind != ExprKind::Op || x->op != OpKind::Add || x->args.size() != 2)
    return;
  const Expr &a = x->args[0], &v = x->args[1];
  std::set<std::string> self{s->name};
  if (v->kind != ExprKind::Var || v->name != s->name || mentions(a, self) || mentions(n, self))
    return;
  s->extent = min(s->extent, sub(n, a));
  Stmt body = g->body[0];
  s->body[0] = body;
}

} // namespace

std::string Schedule::str() const {
  std::string s;
  for (size_t k = 0; k < steps.size(); ++k)
    s += (k ? "; " : "") + stepStr(steps[k]);
  return s;
}

Expected<Stmt> applySchedule(const Kernel &k) {
  if (!k.body)
    return makeError("kernel {}: no body", k.name);
  Scheduler s{k, cloneStmt(k.body)};
  for (const ScheduleStep &step : k.schedule.steps)
    NNC_TRY(s.apply(step));
  tightenGuardedLoops(s.root);
  return s.root;
}

} // namespace nnc::kir
