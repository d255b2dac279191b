// ONNX lowerings of the shape, data-movement, gather/scatter and tensor-creation operators, and
// Det.
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/ranges.h>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {
namespace {

Attribute intA(int64_t v) {
  return Attribute(v);
}

/// `v` converted to i64 (shape-like operands of the IR are i64 vectors) with a cast node.
Expected<Value *> toI64(LoweringContext &ctx, Value *v) {
  if (!v || v->dtype() == DType::I64)
    return v;
  if (!isInteger(v->dtype()))
    return ctx.error("expected an integer tensor, got {}", dtypeName(v->dtype()));
  return ctx.emit(OpKind::Cast, {v}, {{"to", Attribute(DType::I64)}});
}

/// Optional input i as an i64 value; null when absent. A compile-time input (an initializer,
/// a Constant or a known graph input) becomes an i64 constant, so that shape rules see it.
Expected<Value *> optI64(LoweringContext &ctx, size_t i) {
  Value *v = ctx.input(i);
  if (!v)
    return nullptr;
  if (const Tensor *t = ctx.tryConstantInput(i)) {
    if (!isInteger(t->dtype()))
      return ctx.error("input {} must be an integer tensor, got {}", i, dtypeName(t->dtype()));
    if (t->dtype() == DType::I64 && !v->isGraphInput())
      return v;
    return ctx.constant(Tensor::fromVector<int64_t>(DType::I64, t->extents(), t->toInt64Vector()));
  }
  return toI64(ctx, v);
}

Expected<Value *> needI64(LoweringContext &ctx, size_t i, const char *what) {
  NNC_TRY(ctx.requiredInput(i, what).takeError());
  return optI64(ctx, i);
}

/// Integer list from a compile-time input.
Expected<std::vector<int64_t>> constInts(LoweringContext &ctx, size_t i, const char *what) {
  NNC_ASSIGN_OR_RETURN(Tensor t, ctx.constantInput(i, what));
  if (!isInteger(t.dtype()))
    return ctx.error("input '{}' must be an integer tensor, got {}", what, dtypeName(t.dtype()));
  return t.toInt64Vector();
}

Error single(LoweringContext &ctx, Expected<Value *> v) {
  if (!v)
    return v.takeError();
  return ctx.setOutput(0, *v);
}

// ---- Shape and layout ------------------------------------------------------------------

Error lowerShape(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(int64_t start, ctx.intAttr("start", 0));
  AttrMap attrs{{"start", intA(start)}};
  if (ctx.hasAttr("end")) {
    NNC_ASSIGN_OR_RETURN(int64_t end, ctx.intAttr("end", 0));
    attrs["end"] = intA(end);
  }
  return single(ctx, ctx.emit(OpKind::ShapeOf, {x}, attrs));
}

Error lowerReshape(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(int64_t allowZero, ctx.intAttr("allowzero", 0));
  Value *shape = nullptr;
  if (ctx.input(1)) {
    NNC_ASSIGN_OR_RETURN(shape, needI64(ctx, 1, "shape"));
  } else if (ctx.hasAttr("shape")) { // Reshape-1.
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> s, ctx.intsAttr("shape", {}));
    shape = ctx.i64Vector(s);
  } else {
    return ctx.error("missing the target shape (input 1)");
  }
  return single(ctx, ctx.emit(OpKind::Reshape, {x, shape}, {{"allowzero", intA(allowZero)}}));
}

Error lowerFlatten(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", 1));
  if (axis < -x->rank() || axis > x->rank())
    return ctx.error("axis {} is out of range for rank {}", axis, x->rank());
  return single(ctx, ctx.emit(OpKind::Flatten, {x}, {{"axis", intA(axis)}}));
}

/// Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input from 13 on.
Expected<std::vector<int64_t>> squeezeAxes(LoweringContext &ctx, bool *given) {
  *given = true;
  if (ctx.hasAttr("axes"))
    return ctx.intsAttr("axes", {});
  if (ctx.input(1))
    return constInts(ctx, 1, "axes");
  *given = false;
  return std::vector<int64_t>{};
}

Error lowerSqueeze(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  bool given;
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, squeezeAxes(ctx, &given));
  for (int64_t &a : axes) {
    NNC_ASSIGN_OR_RETURN(a, ctx.normalizeAxis(a, x->rank(), "squeeze axis"));
  }
  return single(ctx, ctx.emit(OpKind::Squeeze, {x}, {{"axes", Attribute(axes)}}));
}

Error lowerUnsqueeze(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  bool given;
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, squeezeAxes(ctx, &given));
  if (!given || axes.empty())
    return ctx.error("Unsqueeze needs a non-empty 'axes'");
  int64_t outRank = x->rank() + static_cast<int64_t>(axes.size());
  for (int64_t &a : axes) {
    NNC_ASSIGN_OR_RETURN(a, ctx.normalizeAxis(a, outRank, "unsqueeze axis"));
  }
  return single(ctx, ctx.emit(OpKind::Unsqueeze, {x}, {{"axes", Attribute(axes)}}));
}

Error lowerTranspose(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  std::vector<int64_t> reversed(x->rank());
  for (int64_t i = 0; i < x->rank(); ++i)
    reversed[i] = x->rank() - 1 - i;
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.intsAttr("perm", reversed));
  if (static_cast<int64_t>(perm.size()) != x->rank())
    return ctx.error("perm has {} entries for an input of rank {}", perm.size(), x->rank());
  return single(ctx, ctx.emit(OpKind::Transpose, {x}, {{"perm", Attribute(perm)}}));
}

Error lowerExpand(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * shape, needI64(ctx, 1, "shape"));
  return single(ctx, ctx.emit(OpKind::Expand, {x, shape}));
}

Error lowerConcat(LoweringContext &ctx) {
  std::vector<Value *> ins;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    if (Value *v = ctx.input(i))
      ins.push_back(v);
  if (ins.empty())
    return ctx.error("Concat needs at least one input");
  if (!ctx.hasAttr("axis") && ctx.opset() >= 4)
    return ctx.error("missing required attribute 'axis'");
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", 1)); // Concat-1 defaults to 1.
  return single(ctx, ctx.emit(OpKind::Concat, ins, {{"axis", intA(axis)}}));
}

// ---- Split -------------------------------------------------------------------------------

Error lowerSplit(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t axisAttr, ctx.intAttr("axis", 0));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.normalizeAxis(axisAttr, x->rank(), "axis"));
  int64_t n = static_cast<int64_t>(ctx.numOutputs());
  if (n < 1)
    return ctx.error("Split has no outputs");

  std::vector<int64_t> sizes;
  bool haveSizes = false;
  if (ctx.hasAttr("split")) { // Split-1 .. Split-11.
    NNC_ASSIGN_OR_RETURN(sizes, ctx.intsAttr("split", {}));
    haveSizes = true;
  } else if (ctx.input(1)) { // Split-1 optional input, Split-13 on; empty means absent.
    NNC_ASSIGN_OR_RETURN(sizes, constInts(ctx, 1, "split"));
    haveSizes = !sizes.empty();
  }
  bool hasNumOutputs = ctx.hasAttr("num_outputs");
  if (haveSizes && hasNumOutputs)
    return ctx.error("'split' and 'num_outputs' must not both be given");
  if (hasNumOutputs) {
    NNC_ASSIGN_OR_RETURN(int64_t numOutputs, ctx.intAttr("num_outputs", 0));
    if (numOutputs < 1)
      return ctx.error("num_outputs must be positive, got {}", numOutputs);
    if (numOutputs != n)
      return ctx.error("num_outputs is {} but the node has {} outputs", numOutputs, n);
  }
  if (haveSizes) {
    if (static_cast<int64_t>(sizes.size()) != n)
      return ctx.error("'split' has {} entries but the node has {} outputs", sizes.size(), n);
    for (int64_t s : sizes)
      if (s < 0)
        return ctx.error("'split' has a negative size {}", s);
    const Dim &d = x->shape()[axis];
    int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    if (d.isStatic() && d.value() != total)
      return ctx.error("'split' sizes sum to {} but axis {} has size {}", total, axis, d.value());
  } else {
    const Dim &d = x->shape()[axis];
    if (d.isStatic()) {
      int64_t dim = d.value();
      // Equal chunks of ceil(dim / n); the last one takes what is left (Split-18 says so;
      // the reference evaluator does the same for older versions).
      int64_t chunk = (dim + n - 1) / n;
      int64_t last = dim - chunk * (n - 1);
      if (last < 0)
        return ctx.error("cannot split a dim of size {} into {} outputs", dim, n);
      sizes.assign(n, chunk);
      sizes.back() = last;
    } else {
      // Symbolic dim: slices with starts and ends computed at run time.
      NNC_ASSIGN_OR_RETURN(
          Value * dimV,
          ctx.emit(OpKind::ShapeOf, {x}, {{"start", intA(axis)}, {"end", intA(axis + 1)}}));
      NNC_ASSIGN_OR_RETURN(Value * chunk, ctx.emit(OpKind::Add, {dimV, ctx.i64Vector({n - 1})}));
      NNC_ASSIGN_OR_RETURN(chunk, ctx.emit(OpKind::Div, {chunk, ctx.i64Vector({n})}));
      Value *axes = ctx.i64Vector({axis});
      for (int64_t k = 0; k < n; ++k) {
        NNC_ASSIGN_OR_RETURN(Value * start, ctx.emit(OpKind::Mul, {chunk, ctx.i64Vector({k})}));
        Value *end = ctx.i64Vector({std::numeric_limits<int64_t>::max()});
        if (k + 1 < n) {
          NNC_ASSIGN_OR_RETURN(end, ctx.emit(OpKind::Mul, {chunk, ctx.i64Vector({k + 1})}));
        }
        NNC_ASSIGN_OR_RETURN(Value * piece, ctx.emit(OpKind::Slice, {x, start, end, axes}));
        NNC_TRY(ctx.setOutput(k, piece));
      }
      return Error::success();
    }
  }
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> outs,
                       ctx.emitMulti(OpKind::Split, {x},
                                     {{"axis", intA(axis)}, {"sizes", Attribute(sizes)}},
                                     static_cast<int>(n)));
  for (int64_t k = 0; k < n; ++k)
    NNC_TRY(ctx.setOutput(k, outs[k]));
  return Error::success();
}

// ---- Slice, Pad, Tile ----------------------------------------------------------------------

Error lowerSlice(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  if (ctx.hasAttr("starts") || ctx.hasAttr("ends")) { // Slice-1: attributes.
    if (!ctx.hasAttr("starts") || !ctx.hasAttr("ends"))
      return ctx.error("Slice-1 needs both 'starts' and 'ends'");
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ctx.intsAttr("starts", {}));
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ctx.intsAttr("ends", {}));
    std::vector<Value *> ops{x, ctx.i64Vector(starts), ctx.i64Vector(ends)};
    if (ctx.hasAttr("axes")) {
      NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.intsAttr("axes", {}));
      ops.push_back(ctx.i64Vector(axes));
    }
    return single(ctx, ctx.emit(OpKind::Slice, ops));
  }
  NNC_ASSIGN_OR_RETURN(Value * starts, needI64(ctx, 1, "starts"));
  NNC_ASSIGN_OR_RETURN(Value * ends, needI64(ctx, 2, "ends"));
  NNC_ASSIGN_OR_RETURN(Value * axes, optI64(ctx, 3));
  NNC_ASSIGN_OR_RETURN(Value * steps, optI64(ctx, 4));
  std::vector<Value *> ops{x, starts, ends};
  if (axes || steps)
    ops.push_back(axes);
  if (steps)
    ops.push_back(steps);
  return single(ctx, ctx.emit(OpKind::Slice, ops));
}

/// CenterCropPad-18 as one Pad whose negative pads crop: along each of `axes`, an input
/// longer than the target loses floor((in - target) / 2) elements at the front and the rest at
/// the back; a shorter one gains floor((target - in) / 2) zeros at the front and the rest at
/// the back (the spec's function body). The target shape must be a constant and the input's
/// sizes on those axes static, so the pads are constants.
Error lowerCenterCropPad(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input_data"));
  if (!ctx.input(1))
    return ctx.error("missing required input 1 ('shape')");
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> target, constInts(ctx, 1, "shape"));
  int64_t rank = x->rank();
  std::vector<int64_t> axes;
  if (ctx.hasAttr("axes")) {
    NNC_ASSIGN_OR_RETURN(axes, ctx.intsAttr("axes", {}));
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (axes.size() != target.size())
    return ctx.error("'shape' has {} entries for {} axes", target.size(), axes.size());
  std::vector<int64_t> pads(2 * rank, 0);
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < axes.size(); ++j) {
    NNC_ASSIGN_OR_RETURN(int64_t a, ctx.normalizeAxis(axes[j], rank, "axis"));
    if (seen[a])
      return ctx.error("axis {} is repeated", axes[j]);
    seen[a] = true;
    if (target[j] < 0)
      return ctx.error("'shape' entry {} is negative ({})", j, target[j]);
    const Dim &d = x->shape()[a];
    if (!d.isStatic())
      return ctx.error("axis {} of the input has the symbolic size {}: CenterCropPad needs "
                       "static sizes on the axes it crops or pads",
                       a, d.str());
    int64_t in = d.value(), t = target[j];
    int64_t diff = in >= t ? in - t : t - in, front = diff / 2, back = diff - front;
    pads[a] = in >= t ? -front : front;
    pads[rank + a] = in >= t ? -back : back;
  }
  return single(ctx, ctx.emit(OpKind::Pad, {x, ctx.i64Vector(pads)},
                              {{"mode", Attribute(std::string("constant"))}}));
}

Error lowerPad(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return ctx.error("unsupported pad mode '{}'", mode);
  int64_t rank = x->rank();
  Value *pads = nullptr;
  Value *value = nullptr;
  if (ctx.hasAttr("pads") || ctx.hasAttr("paddings")) { // Pad-1 and Pad-2: attributes.
    const char *name = ctx.hasAttr("pads") ? "pads" : "paddings";
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> p, ctx.intsAttr(name, {}));
    if (static_cast<int64_t>(p.size()) != 2 * rank)
      return ctx.error("'{}' has {} entries for an input of rank {}", name, p.size(), rank);
    pads = ctx.i64Vector(p);
    NNC_ASSIGN_OR_RETURN(double v, ctx.floatAttr("value", 0.0));
    if (mode == "constant" && v != 0.0)
      value = ctx.scalar(x->dtype(), v);
  } else {
    NNC_ASSIGN_OR_RETURN(pads, needI64(ctx, 1, "pads"));
    value = ctx.input(2);
    if (ctx.input(3)) { // Pad-18: pads cover only `axes`.
      NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, constInts(ctx, 3, "axes"));
      int64_t k = static_cast<int64_t>(axes.size());
      std::vector<int64_t> posOf(rank, -1);
      for (int64_t j = 0; j < k; ++j) {
        NNC_ASSIGN_OR_RETURN(int64_t a, ctx.normalizeAxis(axes[j], rank, "pad axis"));
        if (posOf[a] >= 0)
          return ctx.error("pad axis {} is repeated", axes[j]);
        posOf[a] = j;
      }
      if (pads->rank() != 1 || (pads->shape()[0].isStatic() && pads->shape()[0].value() != 2 * k))
        return ctx.error("'pads' must have 2 * {} entries (one pair per axis)", k);
      if (const Tensor *pt = ctx.tryConstantInput(1)) {
        std::vector<int64_t> p = pt->toInt64Vector(), full(2 * rank, 0);
        for (int64_t d = 0; d < rank; ++d)
          if (posOf[d] >= 0) {
            full[d] = p[posOf[d]];
            full[rank + d] = p[k + posOf[d]];
          }
        pads = ctx.i64Vector(full);
      } else {
        // Scatter the run-time pads into a full-rank list: gather from [pads..., 0].
        NNC_ASSIGN_OR_RETURN(
            Value * ext, ctx.emit(OpKind::Concat, {pads, ctx.i64Vector({0})}, {{"axis", intA(0)}}));
        std::vector<int64_t> idx(2 * rank, 2 * k);
        for (int64_t d = 0; d < rank; ++d)
          if (posOf[d] >= 0) {
            idx[d] = posOf[d];
            idx[rank + d] = k + posOf[d];
          }
        NNC_ASSIGN_OR_RETURN(
            pads, ctx.emit(OpKind::Gather, {ext, ctx.i64Vector(idx)}, {{"axis", intA(0)}}));
      }
    }
  }
  std::vector<Value *> ops{x, pads};
  if (value) {
    if (value->dtype() != x->dtype())
      return ctx.error("constant_value has dtype {} but data has {}", dtypeName(value->dtype()),
                       dtypeName(x->dtype()));
    ops.push_back(value);
  }
  return single(ctx, ctx.emit(OpKind::Pad, ops, {{"mode", Attribute(mode)}}));
}

Error lowerTile(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  if (ctx.input(2)) { // Tile-1: (input, tiles, axis) repeats along one axis.
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> tiles, constInts(ctx, 1, "tiles"));
    NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axisV, constInts(ctx, 2, "axis"));
    if (tiles.size() != 1 || axisV.size() != 1)
      return ctx.error("Tile-1 'tiles' and 'axis' must be scalars");
    NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.normalizeAxis(axisV[0], x->rank(), "axis"));
    std::vector<int64_t> repeats(x->rank(), 1);
    repeats[axis] = tiles[0];
    return single(ctx, ctx.emit(OpKind::Tile, {x, ctx.i64Vector(repeats)}));
  }
  NNC_ASSIGN_OR_RETURN(Value * repeats, needI64(ctx, 1, "repeats"));
  return single(ctx, ctx.emit(OpKind::Tile, {x, repeats}));
}

// ---- Gather and scatter --------------------------------------------------------------------

Error lowerGather(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.requiredInput(1, "indices"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", 0));
  return single(ctx, ctx.emit(OpKind::Gather, {x, idx}, {{"axis", intA(axis)}}));
}

Error lowerGatherElements(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.requiredInput(1, "indices"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", 0));
  return single(ctx, ctx.emit(OpKind::GatherElements, {x, idx}, {{"axis", intA(axis)}}));
}

Error lowerGatherND(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.requiredInput(1, "indices"));
  NNC_ASSIGN_OR_RETURN(int64_t batchDims, ctx.intAttr("batch_dims", 0));
  return single(ctx, ctx.emit(OpKind::GatherND, {x, idx}, {{"batch_dims", intA(batchDims)}}));
}

Expected<std::string> reductionAttr(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(std::string r, ctx.stringAttr("reduction", "none"));
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return ctx.error("unsupported reduction '{}'", r);
  return r;
}

Error lowerScatterElements(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.requiredInput(1, "indices"));
  NNC_ASSIGN_OR_RETURN(Value * upd, ctx.requiredInput(2, "updates"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", 0));
  NNC_ASSIGN_OR_RETURN(std::string reduction, reductionAttr(ctx));
  return single(ctx, ctx.emit(OpKind::ScatterElements, {x, idx, upd},
                              {{"axis", intA(axis)}, {"reduction", Attribute(reduction)}}));
}

Error lowerScatterND(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "data"));
  NNC_ASSIGN_OR_RETURN(Value * idx, ctx.requiredInput(1, "indices"));
  NNC_ASSIGN_OR_RETURN(Value * upd, ctx.requiredInput(2, "updates"));
  NNC_ASSIGN_OR_RETURN(std::string reduction, reductionAttr(ctx));
  return single(ctx,
                ctx.emit(OpKind::ScatterND, {x, idx, upd}, {{"reduction", Attribute(reduction)}}));
}

/// MaxUnpool: zeros of the unpooled shape, with each value of X written at its index in I.
/// I holds what MaxPool's Indices hold: flat positions in the whole (N x C x spatial) tensor,
/// so the op is a scatter into the flattened zeros, and an index out of range is the
/// scatter's error. The unpooled shape is N x C x ((in - 1) * stride + kernel - pad_begin -
/// pad_end); an `output_shape` input pads that with zeros at the end of each dim (ONNX's
/// reference: the indices keep referring to the unpooled shape).
Error lowerMaxUnpool(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * idx, needI64(ctx, 1, "I"));
  int64_t rank = x->rank();
  if (rank < 3)
    return ctx.error("input X must have rank >= 3 (N x C x spatial...), got {}",
                     x->type().str());
  if (idx->rank() != rank)
    return ctx.error("I has shape {} but X has {}: they must have one shape",
                     shapeStr(idx->shape()), shapeStr(x->shape()));
  int64_t spatial = rank - 2;
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.intsAttr("kernel_shape", {}));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                       ctx.intsAttr("strides", std::vector<int64_t>(spatial, 1)));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                       ctx.intsAttr("pads", std::vector<int64_t>(2 * spatial, 0)));
  if (static_cast<int64_t>(kernel.size()) != spatial)
    return ctx.error("'kernel_shape' must have {} values (one per spatial dim), has {}", spatial,
                     kernel.size());
  if (static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return ctx.error("'strides' must have {} values and 'pads' {}", spatial, 2 * spatial);
  for (int64_t d = 0; d < spatial; ++d)
    if (kernel[d] <= 0 || strides[d] <= 0 || pads[d] < 0 || pads[spatial + d] < 0)
      return ctx.error("kernel_shape and strides must be positive and pads non-negative");
  std::vector<int64_t> unpooled;
  for (int64_t d = 0; d < rank; ++d) {
    const Dim &dim = x->shape()[d];
    if (!dim.isStatic())
      return ctx.error("dim {} of X has the symbolic size {}: MaxUnpool needs static sizes", d,
                       dim.str());
    int64_t n = dim.value();
    if (d >= 2) {
      int64_t a = d - 2;
      n = (n - 1) * strides[a] + kernel[a] - pads[a] - pads[spatial + a];
      if (n < 0)
        return ctx.error("the unpooled spatial dim {} would have the negative size {}", a, n);
    }
    unpooled.push_back(n);
  }
  Value *flatShape = ctx.i64Vector({-1});
  auto flat = [&](Value *v) {
    return ctx.emit(OpKind::Reshape, {v, flatShape}, {{"allowzero", intA(0)}});
  };
  std::optional<int64_t> count = checkedNumElements(unpooled);
  if (!count || *count > maxTensorBytes() / static_cast<int64_t>(dtypeSize(x->dtype())))
    return ctx.error("the unpooled result [{}] is too large to allocate (NNC_MAX_TENSOR_BYTES)",
                     fmt::join(unpooled, ", "));
  NNC_ASSIGN_OR_RETURN(Value * zeros,
                       ctx.emit(OpKind::ConstantOfShape, {ctx.i64Vector({*count})},
                                {{"value", Attribute(Tensor::zeros(x->dtype(), {1}))}}));
  NNC_ASSIGN_OR_RETURN(Value * flatIdx, flat(idx));
  NNC_ASSIGN_OR_RETURN(Value * flatX, flat(x));
  NNC_ASSIGN_OR_RETURN(
      Value * scattered,
      ctx.emit(OpKind::ScatterElements, {zeros, flatIdx, flatX},
               {{"axis", intA(0)}, {"reduction", Attribute(std::string("none"))}}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Reshape, {scattered, ctx.i64Vector(unpooled)},
                                           {{"allowzero", intA(0)}}));
  if (!ctx.input(2))
    return ctx.setOutput(0, y);
  // Zeros after the unpooled values up to output_shape: pads [0..., output_shape - unpooled].
  Value *padsV = nullptr;
  if (const Tensor *os = ctx.tryConstantInput(2)) {
    std::vector<int64_t> shape = os->toInt64Vector(), p(2 * rank, 0);
    if (static_cast<int64_t>(shape.size()) != rank)
      return ctx.error("'output_shape' has {} entries for an input of rank {}", shape.size(),
                       rank);
    for (int64_t d = 0; d < rank; ++d) {
      if (shape[d] < unpooled[d])
        return ctx.error("'output_shape' dim {} is {}, smaller than the unpooled size {}", d,
                         shape[d], unpooled[d]);
      p[rank + d] = shape[d] - unpooled[d];
    }
    padsV = ctx.i64Vector(p);
  } else {
    NNC_ASSIGN_OR_RETURN(Value * shape, needI64(ctx, 2, "output_shape"));
    NNC_ASSIGN_OR_RETURN(Value * ends, ctx.emit(OpKind::Sub, {shape, ctx.i64Vector(unpooled)}));
    NNC_ASSIGN_OR_RETURN(padsV, ctx.emit(OpKind::Concat,
                                         {ctx.i64Vector(std::vector<int64_t>(rank, 0)), ends},
                                         {{"axis", intA(0)}}));
  }
  return single(ctx,
                ctx.emit(OpKind::Pad, {y, padsV}, {{"mode", Attribute(std::string("constant"))}}));
}

// ---- Creation ------------------------------------------------------------------------------

Error lowerRange(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * start, ctx.requiredInput(0, "start"));
  NNC_ASSIGN_OR_RETURN(Value * limit, ctx.requiredInput(1, "limit"));
  NNC_ASSIGN_OR_RETURN(Value * delta, ctx.requiredInput(2, "delta"));
  return single(ctx, ctx.emit(OpKind::Range, {start, limit, delta}));
}

Error lowerConstantOfShape(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * shape, needI64(ctx, 0, "input"));
  Tensor value = Tensor::scalar<float>(DType::F32, 0.0f);
  if (ctx.hasAttr("value")) {
    NNC_ASSIGN_OR_RETURN(value, ctx.tensorAttr("value"));
    if (value.numElements() != 1)
      return ctx.error("'value' must hold exactly one element, has {}", value.numElements());
  }
  return single(ctx, ctx.emit(OpKind::ConstantOfShape, {shape}, {{"value", Attribute(value)}}));
}

Error lowerOneHot(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * indices, ctx.requiredInput(0, "indices"));
  NNC_ASSIGN_OR_RETURN(Value * depth, ctx.requiredInput(1, "depth"));
  NNC_ASSIGN_OR_RETURN(Value * values, ctx.requiredInput(2, "values"));
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", -1));
  return single(ctx, ctx.emit(OpKind::OneHot, {indices, depth, values}, {{"axis", intA(axis)}}));
}

Error lowerEyeLike(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t k, ctx.intAttr("k", 0));
  DType dtype = x->dtype();
  if (ctx.hasAttr("dtype")) {
    NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("dtype", 0));
    std::optional<DType> t = dtypeFromOnnx(static_cast<int>(code));
    if (!t)
      return ctx.error("unsupported dtype {} in attribute 'dtype'", code);
    dtype = *t;
  }
  if (x->rank() != 2)
    return ctx.error("EyeLike needs a 2-D input, got rank {}", x->rank());
  return single(ctx, ctx.emit(OpKind::EyeLike, {x}, {{"k", intA(k)}, {"dtype", Attribute(dtype)}}));
}

Error lowerTrilu(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * k, optI64(ctx, 1));
  NNC_ASSIGN_OR_RETURN(int64_t upper, ctx.intAttr("upper", 1));
  std::vector<Value *> ops{x};
  if (k)
    ops.push_back(k);
  return single(ctx, ctx.emit(OpKind::Trilu, ops, {{"upper", intA(upper)}}));
}

Error lowerDet(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  return single(ctx, ctx.emit(OpKind::Det, {x}));
}

Error lowerNonZero(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  return single(ctx, ctx.emit(OpKind::NonZero, {x}));
}

/// Unique-11 as unique, with as many results as the last wanted output needs.
Error lowerUnique(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(int64_t sorted, ctx.intAttr("sorted", 1));
  AttrMap attrs{{"sorted", intA(sorted)}};
  if (ctx.hasAttr("axis")) {
    NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", 0));
    NNC_ASSIGN_OR_RETURN(axis, ctx.normalizeAxis(axis, x->rank()));
    attrs["axis"] = intA(axis);
  }
  int n = 1;
  for (int i = 1; i < 4; ++i)
    if (ctx.hasOutput(size_t(i)))
      n = i + 1;
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> ys, ctx.emitMulti(OpKind::Unique, {x}, attrs, n));
  for (size_t i = 0; i < ys.size(); ++i)
    NNC_TRY(ctx.setOutput(i, ys[i]));
  return Error::success();
}

/// Compress(x, condition) = gather(x, squeeze(nonzero(condition))) along the axis, after
/// cutting x to the condition's length (a shorter condition drops the rest).
Error lowerCompress(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(Value * cond, ctx.requiredInput(1, "condition"));
  if (cond->rank() != 1)
    return ctx.error("condition must be 1-D, got rank {}", cond->rank());
  int64_t axis = 0;
  if (ctx.hasAttr("axis")) {
    NNC_ASSIGN_OR_RETURN(int64_t a, ctx.intAttr("axis", 0));
    NNC_ASSIGN_OR_RETURN(axis, ctx.normalizeAxis(a, x->rank(), "axis"));
  } else {
    NNC_ASSIGN_OR_RETURN(
        x, ctx.emit(OpKind::Reshape, {x, ctx.i64Vector({-1})}, {{"allowzero", intA(0)}}));
  }
  if (cond->dtype() != DType::Bool) {
    NNC_ASSIGN_OR_RETURN(cond, ctx.emit(OpKind::Cast, {cond}, {{"to", Attribute(DType::Bool)}}));
  }
  const Dim &xd = x->shape()[axis];
  const Dim &cd = cond->shape()[0];
  if (xd != cd) {
    NNC_ASSIGN_OR_RETURN(Value * len, ctx.emit(OpKind::ShapeOf, {cond}, {{"start", intA(0)}}));
    NNC_ASSIGN_OR_RETURN(
        x, ctx.emit(OpKind::Slice, {x, ctx.i64Vector({0}), len, ctx.i64Vector({axis})}));
  }
  NNC_ASSIGN_OR_RETURN(Value * nz, ctx.emit(OpKind::NonZero, {cond}));
  NNC_ASSIGN_OR_RETURN(
      Value * idx, ctx.emit(OpKind::Squeeze, {nz}, {{"axes", Attribute(std::vector<int64_t>{0})}}));
  return single(ctx, ctx.emit(OpKind::Gather, {x, idx}, {{"axis", intA(axis)}}));
}

// ---- Depth/space -------------------------------------------------------------------------

Expected<int64_t> blocksize(LoweringContext &ctx) {
  if (!ctx.hasAttr("blocksize"))
    return ctx.error("missing required attribute 'blocksize'");
  NNC_ASSIGN_OR_RETURN(int64_t b, ctx.intAttr("blocksize", 0));
  if (b < 1)
    return ctx.error("blocksize must be positive, got {}", b);
  return b;
}

Error lowerDepthToSpace(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t b, blocksize(ctx));
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD")
    return ctx.error("unsupported mode '{}' (expected DCR or CRD)", mode);
  if (x->rank() != 4)
    return ctx.error("DepthToSpace needs a 4-D input, got rank {}", x->rank());
  return single(ctx, ctx.emit(OpKind::DepthToSpace, {x},
                              {{"blocksize", intA(b)}, {"mode", Attribute(mode)}}));
}

Error lowerSpaceToDepth(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  NNC_ASSIGN_OR_RETURN(int64_t b, blocksize(ctx));
  if (x->rank() != 4)
    return ctx.error("SpaceToDepth needs a 4-D input, got rank {}", x->rank());
  return single(ctx, ctx.emit(OpKind::SpaceToDepth, {x}, {{"blocksize", intA(b)}}));
}

} // namespace

void registerTensorLowerings(LoweringTable &t) {
  t["Shape"] = {{"start", "end"}, lowerShape};
  t["Reshape"] = {{"allowzero", "shape", "consumed_inputs"}, lowerReshape};
  t["Flatten"] = {{"axis"}, lowerFlatten};
  t["Squeeze"] = {{"axes"}, lowerSqueeze};
  t["Unsqueeze"] = {{"axes"}, lowerUnsqueeze};
  t["Transpose"] = {{"perm"}, lowerTranspose};
  t["Expand"] = {{}, lowerExpand};
  t["Concat"] = {{"axis"}, lowerConcat};
  t["Split"] = {{"axis", "split", "num_outputs"}, lowerSplit};
  t["Slice"] = {{"starts", "ends", "axes"}, lowerSlice};
  t["Pad"] = {{"mode", "pads", "paddings", "value"}, lowerPad};
  t["CenterCropPad"] = {{"axes"}, lowerCenterCropPad};
  t["Tile"] = {{}, lowerTile};
  t["Gather"] = {{"axis"}, lowerGather};
  t["GatherElements"] = {{"axis"}, lowerGatherElements};
  t["GatherND"] = {{"batch_dims"}, lowerGatherND};
  t["ScatterElements"] = {{"axis", "reduction"}, lowerScatterElements};
  t["MaxUnpool"] = {{"kernel_shape", "pads", "strides"}, lowerMaxUnpool};
  t["Scatter"] = {{"axis"}, lowerScatterElements};
  t["ScatterND"] = {{"reduction"}, lowerScatterND};
  t["Range"] = {{}, lowerRange};
  t["ConstantOfShape"] = {{"value"}, lowerConstantOfShape};
  t["OneHot"] = {{"axis"}, lowerOneHot};
  t["EyeLike"] = {{"dtype", "k"}, lowerEyeLike};
  t["Trilu"] = {{"upper"}, lowerTrilu};
  t["Det"] = {{}, lowerDet};
  t["NonZero"] = {{}, lowerNonZero};
  t["Unique"] = {{"axis", "sorted"}, lowerUnique};
  t["Compress"] = {{"axis"}, lowerCompress};
  t["DepthToSpace"] = {{"blocksize", "mode"}, lowerDepthToSpace};
  t["SpaceToDepth"] = {{"blocksize"}, lowerSpaceToDepth};
}

} // namespace nnc::onnxfe
