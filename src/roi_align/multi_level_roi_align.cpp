// mmops::multi_level_roi_align: schemas, CPU/CUDA/Meta registration and the
// public C++ API. It shares validation and kernels with roi_align; autograd is
// in multi_level_roi_align_autograd.cpp.

#include "roi_align/roi_align_ops.h"
#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <mmops/multi_level_roi_align.h>

#include <ATen/ops/empty.h>
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  m.def(
      "multi_level_roi_align(Tensor[] features, Tensor rois, SymInt[2] output_size, "
      "float[] spatial_scales, int sampling_ratio=0, str pool_mode=\"avg\", bool aligned=True, "
      "int finest_scale=56) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "_multi_level_roi_align_forward(Tensor[] features, Tensor rois, SymInt[2] output_size, "
      "float[] spatial_scales, int sampling_ratio, str pool_mode, bool aligned, int finest_scale) "
      "-> (Tensor output, Tensor argmax)",
      {at::Tag::pt2_compliant_tag});
  // feature_sizes = [N, C, H_0, W_0, H_1, W_1, ...]; returns one gradient per map.
  m.def(
      "_multi_level_roi_align_backward(Tensor grad_output, Tensor rois, Tensor argmax, "
      "SymInt[] feature_sizes, float[] spatial_scales, int sampling_ratio, str pool_mode, "
      "bool aligned, int finest_scale) -> Tensor[]",
      {at::Tag::pt2_compliant_tag});
}

namespace mmops {
namespace {

constexpr const char* kOp = "mmops::multi_level_roi_align: ";

RoIAlignParams forward_params(at::TensorList features, const at::Tensor& rois,
                              c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                              int64_t sampling_ratio, c10::string_view pool_mode, bool aligned,
                              int64_t finest_scale) {
  const RoIAlignParams p = detail::check_forward(kOp, features, /*single=*/false, rois, output_size,
                                                 spatial_scales, sampling_ratio, pool_mode, aligned,
                                                 finest_scale);
  detail::check_roi_batch_indices(kOp, rois, features.front().size(0));
  return p;
}

void check_feature_sizes(c10::SymIntArrayRef feature_sizes, size_t num_levels) {
  TORCH_CHECK(feature_sizes.size() == 2 + 2 * num_levels, kOp,
              "expected feature_sizes = [N, C, H_0, W_0, ...] with 2 + 2 * ", num_levels,
              " values, but got ", feature_sizes.size());
}

// [N, C, H_l, W_l] of each map from feature_sizes.
template <typename T>
std::vector<std::vector<T>> split_sizes(c10::ArrayRef<T> sizes) {
  std::vector<std::vector<T>> shapes;
  for (size_t i = 2; i + 1 < sizes.size(); i += 2) {
    shapes.push_back({sizes[0], sizes[1], sizes[i], sizes[i + 1]});
  }
  return shapes;
}

template <auto Forward>
at::Tensor multi_level_kernel(at::TensorList features, const at::Tensor& rois,
                              c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                              int64_t sampling_ratio, c10::string_view pool_mode, bool aligned,
                              int64_t finest_scale) {
  const RoIAlignParams p = forward_params(features, rois, output_size, spatial_scales,
                                          sampling_ratio, pool_mode, aligned, finest_scale);
  return std::get<0>(Forward(features, rois, p, /*with_argmax=*/false));
}

template <auto Forward>
std::tuple<at::Tensor, at::Tensor> multi_level_forward_kernel(
    at::TensorList features, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio, c10::string_view pool_mode,
    bool aligned, int64_t finest_scale) {
  const RoIAlignParams p = forward_params(features, rois, output_size, spatial_scales,
                                          sampling_ratio, pool_mode, aligned, finest_scale);
  return Forward(features, rois, p, /*with_argmax=*/true);
}

template <auto Backward>
std::vector<at::Tensor> multi_level_backward_kernel(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    c10::SymIntArrayRef feature_sizes, c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
    c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  check_feature_sizes(feature_sizes, spatial_scales.size());
  const RoIAlignParams p = detail::check_backward(kOp, grad_output, rois, argmax, feature_sizes[1],
                                                  spatial_scales, sampling_ratio, pool_mode, aligned,
                                                  finest_scale);
  const std::vector<int64_t> sizes = detail::concrete(feature_sizes);
  detail::check_roi_batch_indices(kOp, rois, sizes[0]);
  return Backward(grad_output, rois, argmax, split_sizes<int64_t>(sizes), p);
}

// ----- Meta ------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> multi_level_forward_meta(
    at::TensorList features, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio, c10::string_view pool_mode,
    bool aligned, int64_t finest_scale) {
  const RoIAlignParams p = detail::check_forward(kOp, features, false, rois, output_size,
                                                 spatial_scales, sampling_ratio, pool_mode, aligned,
                                                 finest_scale);
  const at::Tensor& first = features.front();
  const std::vector<c10::SymInt> shape{rois.sym_size(0), first.sym_size(1), output_size[0], output_size[1]};
  at::Tensor output = at::empty_symint(shape, first.options());
  at::Tensor argmax = p.pool_mode == PoolMode::Max
      ? at::empty_symint(shape, first.options().dtype(at::kInt))
      : at::empty_symint({0}, first.options().dtype(at::kInt));
  return {output, argmax};
}

at::Tensor multi_level_meta(at::TensorList features, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                            int64_t sampling_ratio, c10::string_view pool_mode, bool aligned,
                            int64_t finest_scale) {
  return std::get<0>(multi_level_forward_meta(features, rois, output_size, spatial_scales,
                                              sampling_ratio, pool_mode, aligned, finest_scale));
}

std::vector<at::Tensor> multi_level_backward_meta(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    c10::SymIntArrayRef feature_sizes, c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
    c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  check_feature_sizes(feature_sizes, spatial_scales.size());
  detail::check_backward(kOp, grad_output, rois, argmax, feature_sizes[1], spatial_scales,
                         sampling_ratio, pool_mode, aligned, finest_scale);
  std::vector<at::Tensor> grads;
  for (const auto& shape : split_sizes<c10::SymInt>(feature_sizes)) {
    grads.push_back(at::empty_symint(shape, grad_output.options()));
  }
  return grads;
}

} // namespace

at::Tensor multi_level_roi_align(at::TensorList features, const at::Tensor& rois,
                                 at::IntArrayRef output_size, at::ArrayRef<double> spatial_scales,
                                 int64_t sampling_ratio, c10::string_view pool_mode, bool aligned,
                                 int64_t finest_scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::multi_level_roi_align", "")
                       .typed<at::Tensor(at::TensorList, const at::Tensor&, c10::SymIntArrayRef,
                                         c10::ArrayRef<double>, int64_t, c10::string_view, bool,
                                         int64_t)>();
  return op.call(features, rois, c10::fromIntArrayRefSlow(output_size), spatial_scales,
                 sampling_ratio, pool_mode, aligned, finest_scale);
}

} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, CPU, m) {
  using namespace mmops;
  m.impl("multi_level_roi_align", &multi_level_kernel<kernels::roi_align_forward_cpu>);
  m.impl("_multi_level_roi_align_forward", &multi_level_forward_kernel<kernels::roi_align_forward_cpu>);
  m.impl("_multi_level_roi_align_backward", &multi_level_backward_kernel<kernels::roi_align_backward_cpu>);
}

#ifdef MMOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(mmops, CUDA, m) {
  using namespace mmops;
  m.impl("multi_level_roi_align", &multi_level_kernel<kernels::roi_align_forward_cuda>);
  m.impl("_multi_level_roi_align_forward", &multi_level_forward_kernel<kernels::roi_align_forward_cuda>);
  m.impl("_multi_level_roi_align_backward", &multi_level_backward_kernel<kernels::roi_align_backward_cuda>);
}
#endif

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  using namespace mmops;
  m.impl("multi_level_roi_align", &multi_level_meta);
  m.impl("_multi_level_roi_align_forward", &multi_level_forward_meta);
  m.impl("_multi_level_roi_align_backward", &multi_level_backward_meta);
}
