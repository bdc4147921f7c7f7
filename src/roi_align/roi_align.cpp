// mmops::roi_align: schemas, argument validation, CPU/CUDA registration and
// the public C++ API. Kernels live in kernels/roi_align, the meta (shape)
// functions in roi_align_meta.cpp and autograd in roi_align_autograd.cpp.

#include "roi_align/roi_align_ops.h"

#include <mmops/config.h>
#include <mmops/roi_align.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/select.h>
#include <c10/core/SymInt.h>
#include <torch/library.h>

#include <cmath>
#include <sstream>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  m.def(
      "roi_align(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0, "
      "int sampling_ratio=0, str pool_mode=\"avg\", bool aligned=True) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  // Forward that also returns, in max mode, the winning sample of every output
  // (int32, -1 when the bin had no sample) for the backward. Autograd uses it.
  m.def(
      "_roi_align_forward(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale, "
      "int sampling_ratio, str pool_mode, bool aligned) -> (Tensor output, Tensor argmax)",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "_roi_align_backward(Tensor grad_output, Tensor rois, Tensor argmax, SymInt[4] input_shape, "
      "float spatial_scale, int sampling_ratio, str pool_mode, bool aligned) -> Tensor",
      {at::Tag::pt2_compliant_tag});
}

namespace mmops {
namespace {

constexpr const char* kOp = "mmops::roi_align: ";

std::string shape_of(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sym_sizes();
  return s.str();
}

PoolMode parse_pool_mode(c10::string_view pool_mode) {
  if (pool_mode == "avg") {
    return PoolMode::Avg;
  }
  if (pool_mode == "max") {
    return PoolMode::Max;
  }
  TORCH_CHECK(false, kOp, "pool_mode must be \"avg\" or \"max\", but got \"", std::string(pool_mode), "\"");
}

// Parameters common to forward and backward.
RoIAlignParams check_common(const at::Tensor& rois, double spatial_scale, int64_t sampling_ratio,
                            c10::string_view pool_mode) {
  TORCH_CHECK(rois.dim() == 2 && rois.sym_size(1) == 5, kOp,
              "expected rois to be a 2-D tensor of shape [K, 5] (batch_index, x1, y1, x2, y2), but got shape ",
              shape_of(rois));
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(sampling_ratio >= 0, kOp,
              "sampling_ratio must be >= 0 (0 means adaptive), but got ", sampling_ratio);
  RoIAlignParams p{};
  p.spatial_scale = spatial_scale;
  p.sampling_ratio = sampling_ratio;
  p.pool_mode = parse_pool_mode(pool_mode);
  return p;
}

// The batch index lives in tensor data: this reads it (a device-to-host copy
// for CUDA tensors, hence only on CPU or in strict mode).
void check_batch_indices(const at::Tensor& rois, int64_t batch) {
  if (rois.size(0) == 0) {
    return;
  }
  const at::Tensor index = rois.select(1, 0).to(at::kCPU, at::kDouble).contiguous();
  const double* values = index.const_data_ptr<double>();
  for (int64_t k = 0; k < index.numel(); ++k) {
    TORCH_CHECK(values[k] >= 0 && values[k] < static_cast<double>(batch), kOp,
                "the batch index rois[:, 0] must lie in [0, N) with N = input.size(0) = ", batch,
                ", but rois[", k, ", 0] = ", values[k]);
  }
}

bool should_check_batch_indices(const at::Tensor& rois) {
  if (rois.is_cpu()) {
    return true;
  }
#ifdef MMOPS_WITH_CUDA
  if (rois.is_cuda()) {
    return strict_index_check() && !kernels::current_cuda_stream_is_capturing();
  }
#endif
  return strict_index_check();
}

RoIAlignParams forward_params(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  RoIAlignParams p =
      check_roi_align_args(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode);
  p.aligned = aligned;
  if (should_check_batch_indices(rois)) {
    check_batch_indices(rois, input.size(0));
  }
  return p;
}

RoIAlignParams backward_params(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
    c10::string_view pool_mode, bool aligned) {
  RoIAlignParams p = check_roi_align_backward_args(grad_output, rois, argmax, input_shape,
                                                   spatial_scale, sampling_ratio, pool_mode);
  p.aligned = aligned;
  return p;
}

std::vector<int64_t> concrete(c10::SymIntArrayRef sizes) {
  std::vector<int64_t> out;
  for (const c10::SymInt& s : sizes) {
    out.push_back(s.guard_int(__FILE__, __LINE__));
  }
  return out;
}

// Dispatcher entry points, one instance per device: validate, then call that
// device's kernel (Forward / Backward from kernels/roi_align).

template <auto Forward>
at::Tensor roi_align_kernel(const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale,
                            int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = forward_params(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
  return std::get<0>(Forward(input, rois, p, /*with_argmax=*/false));
}

template <auto Forward>
std::tuple<at::Tensor, at::Tensor> roi_align_forward_kernel(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = forward_params(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
  return Forward(input, rois, p, /*with_argmax=*/true);
}

template <auto Backward>
at::Tensor roi_align_backward_kernel(const at::Tensor& grad_output, const at::Tensor& rois,
                                     const at::Tensor& argmax, c10::SymIntArrayRef input_shape,
                                     double spatial_scale, int64_t sampling_ratio,
                                     c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = backward_params(grad_output, rois, argmax, input_shape, spatial_scale,
                                           sampling_ratio, pool_mode, aligned);
  const std::vector<int64_t> shape = concrete(input_shape);
  if (should_check_batch_indices(rois)) {
    check_batch_indices(rois, shape[0]);
  }
  return Backward(grad_output, rois, argmax, shape, p);
}

} // namespace

RoIAlignParams check_roi_align_args(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode) {
  TORCH_CHECK(input.dim() == 4, kOp, "expected input to be a 4-D tensor [N, C, H, W], but got a ",
              input.dim(), "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp,
              "expected input to have a floating point dtype, but got ", input.scalar_type());
  RoIAlignParams p = check_common(rois, spatial_scale, sampling_ratio, pool_mode);
  TORCH_CHECK(rois.scalar_type() == input.scalar_type(), kOp,
              "expected rois to have the dtype of input (", input.scalar_type(), "), but got ",
              rois.scalar_type());
  TORCH_CHECK(rois.device() == input.device(), kOp,
              "expected rois on the device of input (", input.device(), "), but got ", rois.device());
  TORCH_CHECK(output_size.size() == 2, kOp,
              "expected output_size to hold 2 values (out_h, out_w), but got ", output_size.size());
  for (size_t i = 0; i < 2; ++i) {
    TORCH_SYM_CHECK(output_size[i].sym_gt(0), kOp,
                    "output_size values must be positive, but got ", output_size);
  }
  p.pooled_height = output_size[0].maybe_as_int().value_or(-1);
  p.pooled_width = output_size[1].maybe_as_int().value_or(-1);
  return p;
}

RoIAlignParams check_roi_align_backward_args(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
    c10::string_view pool_mode) {
  RoIAlignParams p = check_common(rois, spatial_scale, sampling_ratio, pool_mode);
  TORCH_CHECK(grad_output.dim() == 4, kOp,
              "expected grad_output to be a 4-D tensor [K, C, out_h, out_w], but got shape ",
              shape_of(grad_output));
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()) &&
                  rois.scalar_type() == grad_output.scalar_type(),
              kOp, "expected grad_output and rois to share one floating dtype, but got ",
              grad_output.scalar_type(), " and ", rois.scalar_type());
  TORCH_CHECK(rois.device() == grad_output.device(), kOp,
              "expected rois on the device of grad_output (", grad_output.device(), "), but got ",
              rois.device());
  TORCH_CHECK(input_shape.size() == 4, kOp, "expected input_shape to hold 4 values, but got ",
              input_shape.size());
  TORCH_SYM_CHECK(grad_output.sym_size(0).sym_eq(rois.sym_size(0)), kOp,
                  "grad_output has ", grad_output.sym_size(0), " rows but rois has ", rois.sym_size(0));
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input_shape[1]), kOp,
                  "grad_output has ", grad_output.sym_size(1), " channels but input_shape has ", input_shape[1]);
  if (p.pool_mode == PoolMode::Max) {
    TORCH_CHECK(argmax.scalar_type() == at::kInt && argmax.device() == grad_output.device(), kOp,
                "expected argmax to be an int32 tensor on ", grad_output.device(), ", but got ",
                argmax.scalar_type(), " on ", argmax.device());
    TORCH_CHECK(argmax.sym_sizes() == grad_output.sym_sizes(), kOp,
                "expected argmax of shape ", shape_of(grad_output), ", but got ", shape_of(argmax));
  }
  p.pooled_height = grad_output.sym_size(2).maybe_as_int().value_or(-1);
  p.pooled_width = grad_output.sym_size(3).maybe_as_int().value_or(-1);
  return p;
}

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                     double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode,
                     bool aligned) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::roi_align", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                         double, int64_t, c10::string_view, bool)>();
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale,
                 sampling_ratio, pool_mode, aligned);
}

} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, CPU, m) {
  using namespace mmops;
  m.impl("roi_align", &roi_align_kernel<kernels::roi_align_forward_cpu>);
  m.impl("_roi_align_forward", &roi_align_forward_kernel<kernels::roi_align_forward_cpu>);
  m.impl("_roi_align_backward", &roi_align_backward_kernel<kernels::roi_align_backward_cpu>);
}

#ifdef MMOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(mmops, CUDA, m) {
  using namespace mmops;
  m.impl("roi_align", &roi_align_kernel<kernels::roi_align_forward_cuda>);
  m.impl("_roi_align_forward", &roi_align_forward_kernel<kernels::roi_align_forward_cuda>);
  m.impl("_roi_align_backward", &roi_align_backward_kernel<kernels::roi_align_backward_cuda>);
}
#endif
