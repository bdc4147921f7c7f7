// Argument validation of border_align, on every backend (the meta kernels run
// it too, so fake tensors raise the same errors).

#include "border_align/border_align_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

#include <cstdint>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kBorderAlignOp;
using border_align_math::kMaxPoolSize;
using border_align_math::kMaxSide;

void check_pool_size(int64_t pool_size) {
  TORCH_CHECK(pool_size >= 1 && pool_size <= kMaxPoolSize, kOp, "expected pool_size in [1, ", kMaxPoolSize,
              "] (pool_size + 1 points per border), but got ", pool_size);
}

// H and W of the map (`what`: the argument they come from).
void check_map_sides(const char* what, const c10::SymInt& height, const c10::SymInt& width) {
  TORCH_SYM_CHECK(height.sym_le(kMaxSide) & width.sym_le(kMaxSide), kOp, "expected ", what,
                  "'s H and W to be at most 2^30, but got H = ", height, ", W = ", width);
}

// boxes [N, H * W, 4] of a map [N, ?, H, W] in the dtype and on the device of `like`.
void check_boxes(const at::Tensor& boxes, const at::Tensor& like, const char* like_name, const c10::SymInt& batch,
                 const c10::SymInt& height, const c10::SymInt& width) {
  TORCH_CHECK(boxes.dim() == 3, kOp, "expected boxes to be a 3-D tensor [N, H * W, 4] (x1, y1, x2, y2), but got a ",
              boxes.dim(), "-D tensor of shape ", shape_of(boxes));
  TORCH_CHECK(boxes.scalar_type() == like.scalar_type(), kOp, "expected boxes to have the dtype of ", like_name, " (",
              like.scalar_type(), "), but got ", boxes.scalar_type());
  TORCH_CHECK(boxes.device() == like.device(), kOp, "expected boxes on the device of ", like_name, " (", like.device(),
              "), but got ", boxes.device());
  TORCH_SYM_CHECK(boxes.sym_size(2).sym_eq(4), kOp,
                  "expected boxes of shape [N, H * W, 4] (x1, y1, x2, y2), but got boxes of shape ", shape_of(boxes));
  TORCH_SYM_CHECK(boxes.sym_size(0).sym_eq(batch), kOp, "expected boxes to hold N = ", batch, " images (as ", like_name,
                  "), but got boxes of shape ", shape_of(boxes));
  TORCH_SYM_CHECK(boxes.sym_size(1).sym_eq(height * width), kOp, "expected boxes to hold H * W = ", height * width,
                  " boxes per image (one per pixel of the ", height, " x ", width, " map), but got boxes of shape ",
                  shape_of(boxes));
}

BorderAlignParams params_of(const c10::SymInt& batch, const c10::SymInt& channels, const c10::SymInt& height,
                            const c10::SymInt& width, int64_t pool_size) {
  BorderAlignParams p{};
  p.batch = int_or_unknown(batch);
  p.channels = int_or_unknown(channels);
  p.height = int_or_unknown(height);
  p.width = int_or_unknown(width);
  p.boxes = p.height >= 0 && p.width >= 0 ? p.height * p.width : -1; // each <= 2^30: no overflow
  p.pool_size = pool_size;
  return p;
}

} // namespace

BorderAlignParams check_border_align_forward(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
  TORCH_CHECK(input.dim() == 4, kOp, "expected input to be a 4-D tensor [N, 4C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  TORCH_SYM_CHECK((input.sym_size(1) % 4).sym_eq(0), kOp,
                  "expected input to have 4C channels (top, left, bottom and right groups of C), a multiple of 4, "
                  "but got input of shape ",
                  shape_of(input));
  check_map_sides("input", input.sym_size(2), input.sym_size(3));
  check_boxes(boxes, input, "input", input.sym_size(0), input.sym_size(2), input.sym_size(3));
  check_pool_size(pool_size);
  return params_of(input.sym_size(0), input.sym_size(1) / 4, input.sym_size(2), input.sym_size(3), pool_size);
}

BorderAlignParams check_border_align_backward(const at::Tensor& grad_output, const at::Tensor& boxes,
                                              const at::Tensor& argmax_idx, int64_t pool_size,
                                              c10::SymIntArrayRef input_shape) {
  TORCH_CHECK(input_shape.size() == 4, kOp, "expected input_shape to hold 4 values [N, 4C, H, W], but got ",
              input_shape.size());
  TORCH_SYM_CHECK(input_shape[0].sym_ge(0) & input_shape[1].sym_ge(0) & input_shape[2].sym_ge(0) &
                      input_shape[3].sym_ge(0) & (input_shape[1] % 4).sym_eq(0),
                  kOp, "expected input_shape [N, 4C, H, W] of sizes >= 0 with 4C a multiple of 4, but got ",
                  input_shape);
  check_map_sides("input_shape", input_shape[2], input_shape[3]);
  TORCH_CHECK(grad_output.dim() == 4, kOp, "expected grad_output to be a 4-D tensor [N, C, H * W, 4], but got a ",
              grad_output.dim(), "-D tensor of shape ", shape_of(grad_output));
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()), kOp,
              "expected grad_output to have a floating point dtype, but got ", grad_output.scalar_type());
  const c10::SymInt channels = input_shape[1] / 4;
  TORCH_SYM_CHECK(
      grad_output.sym_size(0).sym_eq(input_shape[0]) & grad_output.sym_size(1).sym_eq(channels) &
          grad_output.sym_size(2).sym_eq(input_shape[2] * input_shape[3]) & grad_output.sym_size(3).sym_eq(4),
      kOp, "expected grad_output of shape [N, C, H * W, 4] = [", input_shape[0], ", ", channels, ", ",
      input_shape[2] * input_shape[3], ", 4] (input_shape ", input_shape, "), but got ", shape_of(grad_output));
  check_boxes(boxes, grad_output, "grad_output", input_shape[0], input_shape[2], input_shape[3]);
  TORCH_CHECK(argmax_idx.scalar_type() == at::kInt && argmax_idx.device() == grad_output.device(), kOp,
              "expected argmax_idx to be an int32 tensor on ", grad_output.device(), ", but got ",
              argmax_idx.scalar_type(), " on ", argmax_idx.device());
  TORCH_CHECK(argmax_idx.sym_sizes() == grad_output.sym_sizes(), kOp, "expected argmax_idx of shape ",
              shape_of(grad_output), " (as grad_output), but got ", shape_of(argmax_idx));
  check_pool_size(pool_size);
  return params_of(input_shape[0], channels, input_shape[2], input_shape[3], pool_size);
}

} // namespace detail
} // namespace mmops
