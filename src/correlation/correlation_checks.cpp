// Argument validation of correlation, on every backend (the meta kernels run
// it too, so fake tensors raise the same errors), and the output size.

#include "correlation/correlation_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kCorrelationOp;
// Bounds of the options (each kept small enough that every product of them
// with a map side, 2^31 at most, stays far inside int64).
constexpr int64_t kMaxKernel = 1024;
constexpr int64_t kMaxDisplacement = 1024;
constexpr int64_t kMaxStep = int64_t(1) << 20; // stride, padding, dilation, dilation_patch
constexpr int64_t kMaxSide = int64_t(1) << 31;

void check_pair(const char* name, c10::IntArrayRef value, int64_t lo, int64_t hi) {
  TORCH_CHECK(value.size() == 2, kOp, "expected ", name, " to be an int or a pair [h, w], but got ", value.size(),
              " values ", value);
  TORCH_CHECK(value[0] >= lo && value[0] <= hi && value[1] >= lo && value[1] <= hi, kOp, "expected ", name, " in [", lo,
              ", ", hi, "], but got ", value);
}

void check_options(const CorrelationOptions& o) {
  check_pair("kernel_size", o.kernel_size, 1, kMaxKernel);
  TORCH_CHECK(o.max_displacement >= 0 && o.max_displacement <= kMaxDisplacement, kOp,
              "expected max_displacement in [0, ", kMaxDisplacement, "], but got ", o.max_displacement);
  check_pair("stride", o.stride, 1, kMaxStep);
  check_pair("padding", o.padding, 0, kMaxStep);
  check_pair("dilation", o.dilation, 1, kMaxStep);
  check_pair("dilation_patch", o.dilation_patch, 1, kMaxStep);
}

// One output side: max(0, (in + 2 * pad - dilated kernel) / stride + 1), mmcv's
// size where it is >= 0 (an input smaller than the dilated kernel: 0). With
// in + 2 * pad - dilated + stride >= 0 the division is exact floor division
// whatever the rounding, and below it the max gives 0.
c10::SymInt out_side(const c10::SymInt& in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t dilated = (kernel - 1) * dilation + 1;
  return ((in + (2 * pad - dilated + stride)) / stride).max(c10::SymInt(0));
}

void check_input(const char* name, const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4, kOp, "expected ", name, " to be a 4-D tensor [N, C, H, W], but got a ", x.dim(),
              "-D tensor of shape ", shape_of(x));
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), kOp, "expected ", name, " to have a floating point dtype, but got ",
              x.scalar_type());
}

} // namespace

std::vector<c10::SymInt> correlation_output_shape(const at::Tensor& input1, const CorrelationOptions& o) {
  const int64_t patch = 2 * o.max_displacement + 1;
  return {input1.sym_size(0), c10::SymInt(patch), c10::SymInt(patch),
          out_side(input1.sym_size(2), o.kernel_size[0], o.stride[0], o.padding[0], o.dilation[0]),
          out_side(input1.sym_size(3), o.kernel_size[1], o.stride[1], o.padding[1], o.dilation[1])};
}

CorrelationParams check_correlation_forward(const at::Tensor& input1, const at::Tensor& input2,
                                            const CorrelationOptions& o) {
  check_input("input1", input1);
  check_input("input2", input2);
  TORCH_CHECK(input2.scalar_type() == input1.scalar_type(), kOp, "expected input2 to have the dtype of input1 (",
              input1.scalar_type(), "), but got ", input2.scalar_type());
  TORCH_CHECK(input2.device() == input1.device(), kOp, "expected input2 on the device of input1 (", input1.device(),
              "), but got ", input2.device());
  TORCH_CHECK(input2.sym_sizes() == input1.sym_sizes(), kOp, "expected input2 of the shape of input1 ",
              shape_of(input1), ", but got ", shape_of(input2));
  TORCH_SYM_CHECK(input1.sym_size(2).sym_le(kMaxSide) & input1.sym_size(3).sym_le(kMaxSide), kOp,
                  "expected input1's H and W to be at most 2^31, but got shape ", shape_of(input1));
  check_options(o);
  const std::vector<c10::SymInt> shape = correlation_output_shape(input1, o);
  CorrelationParams p{};
  p.batch = int_or_unknown(input1.sym_size(0));
  p.channels = int_or_unknown(input1.sym_size(1));
  p.height = int_or_unknown(input1.sym_size(2));
  p.width = int_or_unknown(input1.sym_size(3));
  p.kernel_h = o.kernel_size[0];
  p.kernel_w = o.kernel_size[1];
  p.max_displacement = o.max_displacement;
  p.patch = 2 * o.max_displacement + 1;
  p.stride_h = o.stride[0];
  p.stride_w = o.stride[1];
  p.pad_h = o.padding[0];
  p.pad_w = o.padding[1];
  p.dilation_h = o.dilation[0];
  p.dilation_w = o.dilation[1];
  p.dilation_patch_h = o.dilation_patch[0];
  p.dilation_patch_w = o.dilation_patch[1];
  p.out_h = int_or_unknown(shape[3]);
  p.out_w = int_or_unknown(shape[4]);
  return p;
}

CorrelationParams check_correlation_backward(const at::Tensor& grad_output, const at::Tensor& input1,
                                             const at::Tensor& input2, const CorrelationOptions& o) {
  const CorrelationParams p = check_correlation_forward(input1, input2, o);
  TORCH_CHECK(grad_output.scalar_type() == input1.scalar_type() && grad_output.device() == input1.device(), kOp,
              "expected grad_output in the dtype and on the device of input1 (", input1.scalar_type(), " on ",
              input1.device(), "), but got ", grad_output.scalar_type(), " on ", grad_output.device());
  const std::vector<c10::SymInt> shape = correlation_output_shape(input1, o);
  TORCH_CHECK(grad_output.sym_sizes() == c10::SymIntArrayRef(shape), kOp, "expected grad_output of shape ",
              c10::SymIntArrayRef(shape), " (the output's), but got ", shape_of(grad_output));
  return p;
}

} // namespace detail
} // namespace mmops
