// Shape rules of the detection and vision ops: grid_sample, roi_align and
// non_max_suppression.
#include "ShapeRules.h"

namespace nnc::shape {

namespace {

using Types = Expected<std::vector<TensorType>>;

Error requirePresent(const Node &node, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!node.operand(i))
      return node.error("operand {} is missing", i);
  return Error::success();
}

/// Dim `d` of `v` is the static `want` (or symbolic); else an error naming `what`.
Error requireDim(const Node &node, const Value *v, size_t d, int64_t want, const char *what) {
  const Dim &dim = v->shape()[d];
  if (dim.isStatic() && dim.value() != want)
    return node.error("{} has shape {}: its dim {} must be {}", what, v->type().str(), d, want);
  return Error::success();
}

/// A dim both values give (the static one where only one is).
Dim sameDim(const Dim &a, const Dim &b) {
  return a.isStatic() ? a : b;
}

Error requireSameDim(const Node &node, const Dim &a, const Dim &b, const char *what) {
  if (a.isStatic() && b.isStatic() && a.value() != b.value())
    return node.error("{}: {} vs {}", what, a.value(), b.value());
  return Error::success();
}

} // namespace

Types inferGridSample(const Node &node) {
  NNC_TRY(requirePresent(node, 2));
  const Value *x = node.operand(0), *grid = node.operand(1);
  if (!isFloat(x->dtype()))
    return node.error("X must be floating-point, got {}", dtypeName(x->dtype()));
  if (grid->dtype() != x->dtype())
    return node.error("grid has dtype {}, X has {}: they must be one", dtypeName(grid->dtype()),
                      dtypeName(x->dtype()));
  std::string mode = node.getString("mode", "linear");
  if (mode != "linear" && mode != "nearest" && mode != "cubic")
    return node.error("unknown mode '{}' (linear, nearest or cubic)", mode);
  std::string pad = node.getString("padding_mode", "zeros");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    return node.error("unknown padding_mode '{}' (zeros, border or reflection)", pad);
  int64_t ac = node.getInt("align_corners", 0);
  if (ac != 0 && ac != 1)
    return node.error("align_corners must be 0 or 1, got {}", ac);
  int64_t r = x->rank();
  if (r < 3)
    return node.error("X must be [N, C, D1, ...] with at least one spatial dim, got {}",
                      x->type().str());
  if (grid->rank() != r)
    return node.error("grid has shape {} but X has {}: grid must be [N, O1.., {}] of rank {}",
                      grid->type().str(), x->type().str(), r - 2, r);
  NNC_TRY(requireDim(node, grid, static_cast<size_t>(r - 1), r - 2, "grid"));
  NNC_TRY(requireSameDim(node, x->shape()[0], grid->shape()[0],
                         "X and grid have different batch sizes"));
  Shape out{sameDim(x->shape()[0], grid->shape()[0]), x->shape()[1]};
  for (int64_t d = 1; d + 1 < r; ++d)
    out.push_back(grid->shape()[d]);
  return std::vector<TensorType>{TensorType(x->dtype(), out)};
}

Types inferRoiAlign(const Node &node) {
  NNC_TRY(requirePresent(node, 3));
  const Value *x = node.operand(0), *rois = node.operand(1), *bi = node.operand(2);
  if (!isFloat(x->dtype()))
    return node.error("X must be floating-point, got {}", dtypeName(x->dtype()));
  if (rois->dtype() != x->dtype())
    return node.error("rois has dtype {}, X has {}: they must be one", dtypeName(rois->dtype()),
                      dtypeName(x->dtype()));
  if (!isInteger(bi->dtype()))
    return node.error("batch_indices must be an integer tensor, got {}", bi->type().str());
  if (x->rank() != 4)
    return node.error("X must be [N, C, H, W], got {}", x->type().str());
  if (rois->rank() != 2)
    return node.error("rois must be [num_rois, 4], got {}", rois->type().str());
  NNC_TRY(requireDim(node, rois, 1, 4, "rois"));
  if (bi->rank() != 1)
    return node.error("batch_indices must be [num_rois], got {}", bi->type().str());
  NNC_TRY(requireSameDim(node, rois->shape()[0], bi->shape()[0],
                         "rois and batch_indices have different numbers of rois"));
  std::string mode = node.getString("mode", "avg");
  if (mode != "avg" && mode != "max")
    return node.error("unknown mode '{}' (avg or max)", mode);
  std::string ctm = node.getString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return node.error("unknown coordinate_transformation_mode '{}' (half_pixel or "
                      "output_half_pixel)",
                      ctm);
  int64_t oh = node.getInt("output_height", 1), ow = node.getInt("output_width", 1);
  if (oh < 1 || ow < 1)
    return node.error("output_height and output_width must be positive, got {} and {}", oh, ow);
  if (node.getInt("sampling_ratio", 0) < 0)
    return node.error("sampling_ratio must not be negative, got {}",
                      node.getInt("sampling_ratio", 0));
  Shape out{sameDim(rois->shape()[0], bi->shape()[0]), x->shape()[1], Dim(oh), Dim(ow)};
  return std::vector<TensorType>{TensorType(x->dtype(), out)};
}

Types inferNonMaxSuppression(const Node &node) {
  NNC_TRY(requirePresent(node, 2));
  const Value *boxes = node.operand(0), *scores = node.operand(1);
  if (!isFloat(boxes->dtype()) || scores->dtype() != boxes->dtype())
    return node.error("boxes and scores must be one floating-point dtype, got {} and {}",
                      boxes->type().str(), scores->type().str());
  if (boxes->rank() != 3)
    return node.error("boxes must be [batches, boxes, 4], got {}", boxes->type().str());
  NNC_TRY(requireDim(node, boxes, 2, 4, "boxes"));
  if (scores->rank() != 3)
    return node.error("scores must be [batches, classes, boxes], got {}", scores->type().str());
  NNC_TRY(requireSameDim(node, boxes->shape()[0], scores->shape()[0],
                         "boxes and scores have different batch sizes"));
  NNC_TRY(requireSameDim(node, boxes->shape()[1], scores->shape()[2],
                         "boxes and scores have different numbers of boxes"));
  int64_t cpb = node.getInt("center_point_box", 0);
  if (cpb != 0 && cpb != 1)
    return node.error("center_point_box must be 0 or 1, got {}", cpb);
  auto scalarOperand = [&](size_t i, bool integer, const char *what) -> Error {
    const Value *v = node.operand(i);
    if (!v)
      return Error::success();
    bool ok = integer ? isInteger(v->dtype()) : isFloat(v->dtype());
    int64_t n = 1;
    for (const Dim &d : v->shape())
      n = d.isStatic() ? n * d.value() : n;
    if (!ok || v->rank() > 1 || n != 1)
      return node.error("{} must be one {} value, got {}", what,
                        integer ? "integer" : "floating-point", v->type().str());
    return Error::success();
  };
  NNC_TRY(scalarOperand(2, true, "max_output_boxes_per_class"));
  NNC_TRY(scalarOperand(3, false, "iou_threshold"));
  NNC_TRY(scalarOperand(4, false, "score_threshold"));
  return std::vector<TensorType>{TensorType(DType::I64, {node.graph()->freshDim(), Dim(3)})};
}

} // namespace nnc::shape
