// Kernel IR -> OpenCL C 1.2: the shared C printer (codegen/c) with OpenCL's types, half loads
// and stores, saturating conversions, the kernel signature and the NDRange mapping.
#include <algorithm>
#include <cstdint>

#include "Grid.h"
#include "c/CPrinter.h"
#include "nnc/codegen/OpenCLCodegen.h"

namespace nnc {
namespace {

class OpenCLPrinter : public cgen::CPrinter {
protected:
  std::string computeType(DType t) override {
    switch (t) {
    case DType::I8: return "char";
    case DType::U8: return "uchar";
    case DType::I16: return "short";
    case DType::U16: return "ushort";
    case DType::I32: return "int";
    case DType::U32: return "uint";
    case DType::I64: return "long";
    case DType::U64: return "ulong";
    default: return CPrinter::computeType(t);
    }
  }
  std::string storageType(DType t) override {
    return t == DType::F16 ? "half" : CPrinter::storageType(t);
  }
  std::string loadElement(DType t, const std::string &buf, const std::string &index) override {
    if (t == DType::F16)
      return fmt::format("vload_half({}, {})", index, buf);
    return CPrinter::loadElement(t, buf, index);
  }
  std::string storeElement(DType t, const std::string &buf, const std::string &index,
                           const std::string &value) override {
    if (t == DType::F16)
      return fmt::format("vstore_half({}, {}, {});", value, index, buf);
    return CPrinter::storeElement(t, buf, index, value);
  }
  std::string roundF16Helper() override {
    need("nnc_round_f16", "static inline float nnc_round_f16(float x) { ushort h; "
                          "vstore_half(x, 0, (half *)&h); return vload_half(0, (half *)&h); }");
    return "nnc_round_f16";
  }
  std::string floatAsUint() override { return "as_uint"; }
  std::string uintAsFloat() override { return "as_float"; }
  std::string bitCast(const std::string &v, DType to) override {
    return fmt::format("as_{}({})", computeType(to), v);
  }
  std::string mathFn(const char *name, DType) override { return name; }
  std::string barrierStmt() override { return "barrier(CLK_LOCAL_MEM_FENCE);"; }
  static bool vectorizable(DType t, size_t lanes) {
    return (lanes == 2 || lanes == 4 || lanes == 8 || lanes == 16) && !isStorageOnly(t) &&
           t != DType::F16 && t != DType::BF16 && t != DType::Bool;
  }
  static const char *lane(size_t l) {
    static const char *names[] = {"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7",
                                  "s8", "s9", "sa", "sb", "sc", "sd", "se", "sf"};
    return names[l];
  }
  std::string vectorLoad(DType t, const std::vector<std::string> &lanes, const std::string &buf,
                         const std::string &index) override {
    if (!vectorizable(t, lanes.size()))
      return "";
    std::string ct = computeType(t), v = lanes[0] + "_v";
    std::string out =
        fmt::format("{0}{1} {2} = vload{1}(0, {3} + ({4}));", ct, lanes.size(), v, buf, index);
    for (size_t l = 0; l < lanes.size(); ++l)
      out += fmt::format(" {} {} = {}.{};", ct, lanes[l], v, lane(l));
    return out;
  }
  std::string vectorStore(DType t, const std::vector<std::string> &values, const std::string &buf,
                          const std::string &index) override {
    if (!vectorizable(t, values.size()))
      return "";
    std::string joined;
    for (size_t l = 0; l < values.size(); ++l)
      joined += (l ? ", " : "") + values[l];
    return fmt::format("vstore{0}(({1}{0})({2}), 0, {3} + ({4}));", values.size(), computeType(t),
                       joined, buf, index);
  }

  /// A GemmTile as rows of floatW accumulators (W: the widest of 16, 8, 4, 2 dividing nr):
  /// per k step one vloadW per vector of B's row and one fma of each A value, broadcast,
  /// into its row's vectors. The products are summed in k order, as in the scalar nest.
  std::string gemmTileVectors(const kir::GemmTileShape &t, const std::string &a,
                              const std::string &b, const std::string &c,
                              const std::string &pad) override {
    if (t.elems != kir::GemmElems::F32) // the scalar nest: exact integer sums
      return "";
    int64_t w = 16;
    while (w >= 2 && t.nr % w != 0)
      w /= 2;
    if (w < 2)
      return "";
    std::string vt = fmt::format("float{}", w), p2 = pad + "  ", out;
    int64_t vecs = t.nr / w;
    // With sumEvery: runs of that many k steps, each from zero, added to gt_s (the sums).
    const bool runs = t.sumEvery > 0;
    for (int64_t r = 0; r < t.mr; ++r)
      for (int64_t v = 0; v < vecs; ++v) {
        std::string init =
            t.accumulate ? fmt::format("vload{}(0, {} + gt_c + {})", w, c, r * t.ldc + v * w)
                         : fmt::format("({})(0.0f)", vt);
        if (runs)
          out += fmt::format("{}{} gt_s{}_{} = {};\n", pad, vt, r, v, init);
        out += fmt::format("{}{} gt_c{}_{} = {};\n", pad, vt, r, v,
                           runs ? fmt::format("({})(0.0f)", vt) : init);
      }
    // Runs: an outer loop over them, the k steps of each inside, then the run's sums added.
    std::string kp = pad, bp = p2;
    if (runs) {
      out += fmt::format("{}for (long gt_q = 0; gt_q < gt_k; gt_q += {}) {{\n", pad, t.sumEvery);
      out += fmt::format("{}long gt_e = min(gt_q + {}L, gt_k);\n", p2, t.sumEvery);
      kp = p2;
      bp = p2 + "  ";
    }
    out += fmt::format("{}for (long gt_p = {}; gt_p < {}; ++gt_p) {{\n", kp,
                       runs ? "gt_q" : "0", runs ? "gt_e" : "gt_k");
    for (int64_t v = 0; v < vecs; ++v)
      out += fmt::format("{}{} gt_b{} = vload{}(0, {} + gt_b + gt_p * {} + {});\n", bp, vt, v, w, b,
                         t.ldb, v * w);
    for (int64_t r = 0; r < t.mr; ++r) {
      out += fmt::format("{}{} gt_a{} = ({})({}[gt_a + {} + gt_p * {}]);\n", bp, vt, r, vt, a,
                         r * t.lda, t.ak);
      for (int64_t v = 0; v < vecs; ++v)
        out += fmt::format("{}gt_c{}_{} = fma(gt_a{}, gt_b{}, gt_c{}_{});\n", bp, r, v, r, v, r, v);
    }
    out += kp + "}\n";
    if (runs) {
      for (int64_t r = 0; r < t.mr; ++r)
        for (int64_t v = 0; v < vecs; ++v)
          out += fmt::format("{}gt_s{}_{} += gt_c{}_{};\n{}gt_c{}_{} = ({})(0.0f);\n", p2, r, v, r,
                             v, p2, r, v, vt);
      out += pad + "}\n";
    }
    for (int64_t r = 0; r < t.mr; ++r)
      for (int64_t v = 0; v < vecs; ++v)
        out += fmt::format("{}vstore{}(gt_{}{}_{}, 0, {} + gt_c + {});\n", pad, w,
                           runs ? "s" : "c", r, v, c, r * t.ldc + v * w);
    return out;
  }

private:
  /// A kernel whose outermost loops are bound to the NDRange (gpu_block / gpu_thread loops,
  /// checked by the verifier): each becomes get_group_id / get_local_id of its dimension, the
  /// work-group is the thread loops' extents, and the body below them runs per work-item.
  Expected<std::string> gpuNest(const kir::Kernel &k, kir::Stmt s, const GpuTarget &device,
                                std::string &out, OpenCLLaunch &l,
                                const std::vector<kir::Stmt> &prologue) {
    std::array<int64_t, 3> blocks{1, 1, 1}, threads{1, 1, 1};
    int dims = 1;
    while (s && ((s->kind == kir::StmtKind::Block && s->body.size() == 1) ||
                 clgrid::isWorkGroupLoop(s))) {
      if (s->kind == kir::StmtKind::For) {
        bool block = s->loopKind == kir::LoopKind::GpuBlock;
        int a = s->gpuAxis;
        if (a < 0 || a > 2 || !s->extent || s->extent->kind != kir::ExprKind::IntImm)
          return makeError("kernel {}: loop '{}' is not a constant-extent NDRange loop", k.name,
                           s->name);
        (block ? blocks : threads)[a] = s->extent->intValue;
        dims = std::max(dims, a + 1);
        out += fmt::format("  long {} = (long)get_{}_id({});\n", varName(s->name),
                           block ? "group" : "local", a);
      }
      s = s->body[0];
    }
    int64_t group = threads[0] * threads[1] * threads[2];
    for (int a = 0; a < 3; ++a)
      if (threads[a] > device.maxWorkItemSizes[a])
        return makeError("kernel {}: {} work-items in dimension {}, more than {} allows ({})",
                         k.name, threads[a], a, device.name, device.maxWorkItemSizes[a]);
    if (group > device.maxWorkGroupSize)
      return makeError("kernel {}: work-groups of {} work-items, more than {} allows ({})", k.name,
                       group, device.name, device.maxWorkGroupSize);
    l.dims = dims;
    for (int a = 0; a < 3; ++a) {
      l.globalSize[a] = blocks[a] * threads[a];
      l.localSize[a] = threads[a];
    }
    for (const kir::Stmt &d : prologue) {
      NNC_ASSIGN_OR_RETURN(std::string text, printBody(k, d, 2));
      out += text;
    }
    NNC_ASSIGN_OR_RETURN(std::string text, printBody(k, s, 2));
    return out + text + "}\n";
  }

public:
  /// One `__kernel` function.
  Expected<std::string> kernel(const kir::Kernel &k, const kir::Stmt &body, const GpuTarget &device,
                               OpenCLLaunch &l) {
    k_ = &k;
    std::string out = fmt::format("__kernel void {}(", k.name);
    std::string ptrs;
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      std::string b = bufferName(static_cast<int>(i));
      out += fmt::format("{}__global uchar *{}_base, ulong {}_off", i ? ", " : "", b, b);
      std::string st = storageType(k.buffers[i].dtype);
      ptrs += fmt::format("  __global {0} *{1} = (__global {0} *)({1}_base + {1}_off);\n", st, b);
    }
    out += ") {\n" + ptrs;
    kir::Stmt s = clgrid::unwrapBlocks(body);
    // Locals declared before the loops (a fused group's scalar leaves, read once) do not
    // keep the loops from being the grid: each work-item declares them itself.
    std::vector<kir::Stmt> prologue;
    if (s && s->kind == kir::StmtKind::Block && s->body.size() >= 2 &&
        s->body.back() && s->body.back()->kind == kir::StmtKind::For &&
        std::all_of(s->body.begin(), s->body.end() - 1, [](const kir::Stmt &c) {
          return c && c->kind == kir::StmtKind::Decl;
        })) {
      prologue.assign(s->body.begin(), s->body.end() - 1);
      s = s->body.back();
    }
    l.name = k.name;
    int64_t localBytes = 0;
    for (size_t i = 0; i < k.locals.size(); ++i) {
      const kir::LocalBuffer &lb = k.locals[i];
      localBytes += lb.numElements * static_cast<int64_t>(dtypeSize(lb.dtype));
      out += fmt::format("  __local {} {}[{}];\n", storageType(lb.dtype),
                         bufferName(kir::kLocalBufferBase + static_cast<int>(i)), lb.numElements);
    }
    if (localBytes > device.localMemBytes)
      return makeError("kernel {}: {} bytes of local buffers, more than {} allows ({})", k.name,
                       localBytes, device.name, device.localMemBytes);
    if (!k.locals.empty() && !clgrid::isWorkGroupLoop(s))
      return makeError("kernel {}: local buffers without a work-group nest", k.name);
    if (clgrid::isWorkGroupLoop(s))
      return gpuNest(k, s, device, out, l, prologue);
    // The grid: the outermost loop when it is parallel or independent, with the loops
    // perfectly nested in it that are independent too (constant extents all), collapsed
    // into one flat NDRange. The innermost loop varies fastest across neighbouring
    // work-items, so their accesses along it coalesce.
    if (clgrid::isGridLoop(s)) {
      std::vector<kir::Stmt> grid{s};
      int64_t n = s->extent->intValue;
      for (;;) {
        const kir::Stmt &last = grid.back();
        if (last->body.size() != 1)
          break;
        kir::Stmt c = clgrid::unwrapBlocks(last->body[0]);
        if (!c || c->kind != kir::StmtKind::For || !c->independent || !c->extent ||
            c->extent->kind != kir::ExprKind::IntImm || c->extent->intValue <= 0 ||
            n > (int64_t(1) << 40) / c->extent->intValue)
          break;
        n *= c->extent->intValue;
        grid.push_back(c);
      }
      // Work-groups of 64 work-items (two NVIDIA warps, one AMD wavefront) where the device
      // allows it; a smaller grid runs as one group of its size rounded up to a power of two.
      // The work-items past n return at once.
      int64_t wg = device.workGroupSize1D(n, 64);
      l.localSize[0] = wg;
      l.globalSize[0] = (n + wg - 1) / wg * wg;
      if (grid.size() == 1) {
        std::string v = varName(s->name);
        out += fmt::format("  long {} = (long)get_global_id(0);\n  if ({} >= {}L) return;\n", v,
                           v, n);
      } else {
        // 32-bit index arithmetic where the grid allows it: division by a constant is a
        // multiply and a shift, cheaper still in 32 bits.
        bool narrow = n <= INT32_MAX;
        const char *it = narrow ? "uint" : "ulong", *sfx = narrow ? "u" : "UL";
        out += fmt::format("  {} nnc_gid = ({})get_global_id(0);\n  if (nnc_gid >= {}{}) return;\n", it,
                           it, n, sfx);
        for (size_t d = grid.size(); d-- > 0;) {
          std::string v = varName(grid[d]->name);
          int64_t e = grid[d]->extent->intValue;
          if (d == 0)
            out += fmt::format("  long {} = (long)nnc_gid;\n", v);
          else
            out += fmt::format("  long {} = (long)(nnc_gid % {}{});\n  nnc_gid /= {}{};\n", v, e, sfx,
                               e, sfx);
        }
      }
      for (const kir::Stmt &c : prologue) {
        NNC_ASSIGN_OR_RETURN(std::string text, printBody(k, c, 2));
        out += text;
      }
      for (const kir::Stmt &c : grid.back()->body) {
        NNC_ASSIGN_OR_RETURN(std::string text, printBody(k, c, 2));
        out += text;
      }
    } else {
      l.globalSize[0] = 1;
      l.localSize[0] = 0;
      NNC_ASSIGN_OR_RETURN(std::string text, printBody(k, body, 2));
      out += text;
    }
    return out + "}\n";
  }
};

} // namespace

Expected<OpenCLProgram> emitOpenCL(const std::vector<kir::Kernel> &kernels,
                                   const GpuTarget &device) {
  OpenCLPrinter p;
  OpenCLProgram prog;
  std::string text;
  for (const kir::Kernel &k : kernels) {
    Expected<kir::Stmt> body = kir::codegenBody(k);
    if (!body)
      return body.takeError().withContext("kernel " + k.name);
    OpenCLLaunch l;
    NNC_ASSIGN_OR_RETURN(std::string kt, p.kernel(k, *body, device, l));
    text += kt + "\n";
    prog.launches.push_back(l);
  }
  prog.source = "// Generated by nnc.\n#pragma OPENCL FP_CONTRACT OFF\n";
  if (p.usesDouble())
    prog.source += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  prog.source += "\n" + p.helpers() + "\n" + text;
  return prog;
}

} // namespace nnc
