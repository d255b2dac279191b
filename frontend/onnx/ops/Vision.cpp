// ONNX lowerings of the detection and vision operators: GridSample, AffineGrid, RoiAlign and
// NonMaxSuppression.
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

Attribute intA(int64_t v) {
  return Attribute(v);
}

/// GridSample-16 (4-D; modes bilinear, nearest, bicubic) and -20 (N-D; linear, nearest,
/// cubic) as grid_sample, whose modes are -20's names.
Error lowerGridSample(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * grid, ctx.requiredInput(1, "grid"));
  bool v16 = ctx.opset() < 20;
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", v16 ? "bilinear" : "linear"));
  if (v16 && (mode == "linear" || mode == "cubic"))
    return ctx.error("mode '{}' is GridSample-20's; opset {} spells it '{}'", mode, ctx.opset(),
                     mode == "linear" ? "bilinear" : "bicubic");
  if (!v16 && (mode == "bilinear" || mode == "bicubic"))
    return ctx.error("mode '{}' is GridSample-16's; opset {} spells it '{}'", mode, ctx.opset(),
                     mode == "bilinear" ? "linear" : "cubic");
  if (mode == "bilinear")
    mode = "linear";
  else if (mode == "bicubic")
    mode = "cubic";
  if (v16 && x->rank() != 4)
    return ctx.error("GridSample-{} takes a 4-D X, got {} (N-D sampling is GridSample-20's)",
                     ctx.opset(), x->type().str());
  NNC_ASSIGN_OR_RETURN(std::string pad, ctx.stringAttr("padding_mode", "zeros"));
  NNC_ASSIGN_OR_RETURN(int64_t align, ctx.intAttr("align_corners", 0));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::GridSample, {x, grid},
                                           {{"mode", Attribute(mode)},
                                            {"padding_mode", Attribute(pad)},
                                            {"align_corners", intA(align)}}));
  return ctx.setOutput(0, y);
}

/// AffineGrid-20 as ONNX's own definition computes it: the base grid of the constant `size`
/// (normalized coordinates x, y[, z] and 1 per position) is a constant [k + 1, positions],
/// and grid = transpose(theta @ base) reshaped to [N, spatial..., k].
Error lowerAffineGrid(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * theta, ctx.requiredInput(0, "theta"));
  if (!ctx.input(1))
    return ctx.error("missing required input 1 ('size')");
  NNC_ASSIGN_OR_RETURN(Tensor sizeT, ctx.constantInput(1, "size"));
  std::vector<int64_t> size = sizeT.toInt64Vector();
  NNC_ASSIGN_OR_RETURN(int64_t align, ctx.intAttr("align_corners", 0));
  if (size.size() != 4 && size.size() != 5)
    return ctx.error("'size' must be [N, C, H, W] or [N, C, D, H, W], has {} entries", size.size());
  int64_t k = static_cast<int64_t>(size.size()) - 2;
  if (!isFloat(theta->dtype()) || theta->rank() != 3)
    return ctx.error("theta must be a floating-point [N, {}, {}], got {}", k, k + 1,
                     theta->type().str());
  std::vector<int64_t> spatial(size.begin() + 2, size.end());
  int64_t positions = 1;
  for (int64_t s : spatial) {
    if (s <= 0 || s > (int64_t(1) << 24))
      return ctx.error("'size' [{}] must have positive spatial sizes up to 2^24",
                       fmt::join(size, ", "));
    positions *= s;
    if (positions > (int64_t(1) << 30))
      return ctx.error("'size' [{}] has too many positions", fmt::join(size, ", "));
  }
  // Row c of the base holds coordinate c of every position: x (the last spatial axis)
  // first, then y (and z), then ones.
  std::vector<double> base(static_cast<size_t>((k + 1) * positions), 1.0);
  std::vector<int64_t> idx(static_cast<size_t>(k), 0);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t c = 0; c < k; ++c) {
      int64_t axis = k - 1 - c, len = spatial[static_cast<size_t>(axis)];
      double i = static_cast<double>(idx[static_cast<size_t>(axis)]);
      double v = align ? (len == 1 ? -1.0 : -1.0 + i * (2.0 / static_cast<double>(len - 1)))
                       : -1.0 + (2.0 / static_cast<double>(len)) / 2 +
                             i * (2.0 / static_cast<double>(len));
      base[static_cast<size_t>(c * positions + p)] = v;
    }
    for (int64_t d = k; d-- > 0;) {
      if (++idx[static_cast<size_t>(d)] < spatial[static_cast<size_t>(d)])
        break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  Value *baseV = ctx.constant(Tensor::fromVector<double>(DType::F64, {k + 1, positions}, base));
  if (theta->dtype() != DType::F64) {
    NNC_ASSIGN_OR_RETURN(baseV, ctx.emit(OpKind::Cast, {baseV}, {{"to", theta->dtype()}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * prod, ctx.emit(OpKind::MatMul, {theta, baseV}));
  NNC_ASSIGN_OR_RETURN(Value * t, ctx.emit(OpKind::Transpose, {prod},
                                           {{"perm", Attribute(std::vector<int64_t>{0, 2, 1})}}));
  std::vector<int64_t> shape{size[0]};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  shape.push_back(k);
  NNC_ASSIGN_OR_RETURN(
      Value * grid, ctx.emit(OpKind::Reshape, {t, ctx.i64Vector(shape)}, {{"allowzero", intA(0)}}));
  return ctx.setOutput(0, grid);
}

Error lowerRoiAlign(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * rois, ctx.requiredInput(1, "rois"));
  NNC_ASSIGN_OR_RETURN(Value * bi, ctx.requiredInput(2, "batch_indices"));
  std::string ctmDefault = ctx.opset() < 16 ? "output_half_pixel" : "half_pixel";
  NNC_ASSIGN_OR_RETURN(std::string ctm,
                       ctx.stringAttr("coordinate_transformation_mode", ctmDefault));
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", "avg"));
  NNC_ASSIGN_OR_RETURN(int64_t oh, ctx.intAttr("output_height", 1));
  NNC_ASSIGN_OR_RETURN(int64_t ow, ctx.intAttr("output_width", 1));
  NNC_ASSIGN_OR_RETURN(int64_t ratio, ctx.intAttr("sampling_ratio", 0));
  NNC_ASSIGN_OR_RETURN(double scale, ctx.floatAttr("spatial_scale", 1.0));
  if (bi->dtype() != DType::I64) {
    NNC_ASSIGN_OR_RETURN(bi, ctx.emit(OpKind::Cast, {bi}, {{"to", DType::I64}}));
  }
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::RoiAlign, {x, rois, bi},
                                           {{"mode", Attribute(mode)},
                                            {"output_height", intA(oh)},
                                            {"output_width", intA(ow)},
                                            {"sampling_ratio", intA(ratio)},
                                            {"spatial_scale", Attribute(scale)},
                                            {"coordinate_transformation_mode", Attribute(ctm)}}));
  return ctx.setOutput(0, y);
}

Error lowerNonMaxSuppression(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * boxes, ctx.requiredInput(0, "boxes"));
  NNC_ASSIGN_OR_RETURN(Value * scores, ctx.requiredInput(1, "scores"));
  NNC_ASSIGN_OR_RETURN(int64_t cpb, ctx.intAttr("center_point_box", 0));
  std::vector<Value *> ops{boxes, scores};
  for (size_t i = 2; i < 5; ++i)
    ops.push_back(ctx.input(i));
  if (ops[2] && ops[2]->dtype() != DType::I64) {
    NNC_ASSIGN_OR_RETURN(ops[2], ctx.emit(OpKind::Cast, {ops[2]}, {{"to", DType::I64}}));
  }
  while (!ops.back())
    ops.pop_back();
  NNC_ASSIGN_OR_RETURN(Value * y,
                       ctx.emit(OpKind::NonMaxSuppression, ops, {{"center_point_box", intA(cpb)}}));
  return ctx.setOutput(0, y);
}

} // namespace

void registerVisionLowerings(LoweringTable &t) {
  t["GridSample"] = {{"align_corners", "mode", "padding_mode"}, lowerGridSample};
  t["AffineGrid"] = {{"align_corners"}, lowerAffineGrid};
  t["RoiAlign"] = {{"coordinate_transformation_mode", "mode", "output_height", "output_width",
                    "sampling_ratio", "spatial_scale"},
                   lowerRoiAlign};
  t["NonMaxSuppression"] = {{"center_point_box"}, lowerNonMaxSuppression};
}

} // namespace nnc::onnxfe
