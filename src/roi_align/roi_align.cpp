// mmops::roi_align and mmops::multi_level_roi_align: schemas, CPU/CUDA
// registration and the public C++ API. Both ops share validation
// (roi_align_checks.cpp) and kernels (kernels/roi_align, where roi_align is the
// one-level case); the meta (shape) functions are in roi_align_meta.cpp and
// autograd in roi_align_autograd.cpp.

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"
#include "roi_align/roi_align_ops.h"

#include <mmops/multi_level_roi_align.h>
#include <mmops/roi_align.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "roi_align(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0, "
            "int sampling_ratio=0, str pool_mode=\"avg\", bool aligned=True) -> Tensor");
  // Forward that also returns, in max mode, the winning sample of every output
  // (int32, -1 when the bin had no sample) for the backward. Autograd uses it.
  define_op(m,
            "_roi_align_forward(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale, "
            "int sampling_ratio, str pool_mode, bool aligned) -> (Tensor output, Tensor argmax)");
  define_op(m,
            "_roi_align_backward(Tensor grad_output, Tensor rois, Tensor argmax, SymInt[4] input_shape, "
            "float spatial_scale, int sampling_ratio, str pool_mode, bool aligned) -> Tensor");

  define_op(m,
            "multi_level_roi_align(Tensor[] features, Tensor rois, SymInt[2] output_size, "
            "float[] spatial_scales, int sampling_ratio=0, str pool_mode=\"avg\", bool aligned=True, "
            "int finest_scale=56) -> Tensor");
  define_op(m,
            "_multi_level_roi_align_forward(Tensor[] features, Tensor rois, SymInt[2] output_size, "
            "float[] spatial_scales, int sampling_ratio, str pool_mode, bool aligned, int finest_scale) "
            "-> (Tensor output, Tensor argmax)");
  // feature_sizes = [N, C, H_0, W_0, H_1, W_1, ...]; returns one gradient per map.
  define_op(m,
            "_multi_level_roi_align_backward(Tensor grad_output, Tensor rois, Tensor argmax, "
            "SymInt[] feature_sizes, float[] spatial_scales, int sampling_ratio, str pool_mode, "
            "bool aligned, int finest_scale) -> Tensor[]");
}

namespace mmops {
namespace {

// Device entries, one instance per device: validate (as the meta kernels do),
// check the batch index when the index policy says so, then call that device's
// kernel (Forward / Backward from kernels/roi_align).

RoIAlignParams roi_align_params(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode,
                                bool aligned) {
  const RoIAlignParams p = detail::check_roi_align_forward(detail::kRoIAlign, input, rois, output_size, spatial_scale,
                                                           sampling_ratio, pool_mode, aligned);
  detail::check_roi_batch_indices(detail::kRoIAlign, rois, input.size(0));
  return p;
}

template <auto Forward>
at::Tensor roi_align_entry(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                           double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p =
      roi_align_params(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
  return std::get<0>(Forward(input, rois, p, /*with_argmax=*/false));
}

template <auto Forward>
std::tuple<at::Tensor, at::Tensor> roi_align_forward_entry(const at::Tensor& input, const at::Tensor& rois,
                                                           c10::SymIntArrayRef output_size, double spatial_scale,
                                                           int64_t sampling_ratio, c10::string_view pool_mode,
                                                           bool aligned) {
  const RoIAlignParams p =
      roi_align_params(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
  return Forward(input, rois, p, /*with_argmax=*/true);
}

template <auto Backward>
at::Tensor roi_align_backward_entry(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                                    c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
                                    c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = detail::check_roi_align_backward(detail::kRoIAlign, grad_output, rois, argmax, input_shape,
                                                            spatial_scale, sampling_ratio, pool_mode, aligned);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(detail::kRoIAlign, rois, shape[0]);
  return Backward(grad_output, rois, argmax, {shape}, p)[0];
}

RoIAlignParams multi_level_params(at::TensorList features, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                  c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                                  c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  const RoIAlignParams p = detail::check_forward(detail::kMultiLevel, features, /*single=*/false, rois, output_size,
                                                 spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  detail::check_roi_batch_indices(detail::kMultiLevel, rois, features.front().size(0));
  return p;
}

template <auto Forward>
at::Tensor multi_level_entry(at::TensorList features, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                             c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio, c10::string_view pool_mode,
                             bool aligned, int64_t finest_scale) {
  const RoIAlignParams p =
      multi_level_params(features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  return std::get<0>(Forward(features, rois, p, /*with_argmax=*/false));
}

template <auto Forward>
std::tuple<at::Tensor, at::Tensor> multi_level_forward_entry(at::TensorList features, const at::Tensor& rois,
                                                             c10::SymIntArrayRef output_size,
                                                             c10::ArrayRef<double> spatial_scales,
                                                             int64_t sampling_ratio, c10::string_view pool_mode,
                                                             bool aligned, int64_t finest_scale) {
  const RoIAlignParams p =
      multi_level_params(features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  return Forward(features, rois, p, /*with_argmax=*/true);
}

template <auto Backward>
std::vector<at::Tensor> multi_level_backward_entry(const at::Tensor& grad_output, const at::Tensor& rois,
                                                   const at::Tensor& argmax, c10::SymIntArrayRef feature_sizes,
                                                   c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                                                   c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  const RoIAlignParams p =
      detail::check_multi_level_roi_align_backward(detail::kMultiLevel, grad_output, rois, argmax, feature_sizes,
                                                   spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  const std::vector<int64_t> sizes = detail::concrete(feature_sizes);
  detail::check_roi_batch_indices(detail::kMultiLevel, rois, sizes[0]);
  return Backward(grad_output, rois, argmax, detail::feature_shapes<int64_t>(sizes), p);
}

} // namespace

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size, double spatial_scale,
                     int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  static const auto op = detail::op_handle<RoIAlignFn>("mmops::roi_align");
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale, sampling_ratio, pool_mode, aligned);
}

at::Tensor multi_level_roi_align(at::TensorList features, const at::Tensor& rois, at::IntArrayRef output_size,
                                 at::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                                 c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  static const auto op = detail::op_handle<MultiLevelRoIAlignFn>("mmops::multi_level_roi_align");
  return op.call(features, rois, c10::fromIntArrayRefSlow(output_size), spatial_scales, sampling_ratio, pool_mode,
                 aligned, finest_scale);
}

} // namespace mmops

#define MMOPS_ROI_ALIGN_ENTRIES(m, device)                                                                   \
  m.impl("roi_align", &roi_align_entry<kernels::roi_align_forward_##device>);                                \
  m.impl("_roi_align_forward", &roi_align_forward_entry<kernels::roi_align_forward_##device>);               \
  m.impl("_roi_align_backward", &roi_align_backward_entry<kernels::roi_align_backward_##device>);            \
  m.impl("multi_level_roi_align", &multi_level_entry<kernels::roi_align_forward_##device>);                  \
  m.impl("_multi_level_roi_align_forward", &multi_level_forward_entry<kernels::roi_align_forward_##device>); \
  m.impl("_multi_level_roi_align_backward", &multi_level_backward_entry<kernels::roi_align_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ROI_ALIGN_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "roi_align", "multi_level_roi_align")
