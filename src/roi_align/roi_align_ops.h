#pragma once
// Internal pieces of roi_align and multi_level_roi_align shared by their
// registration, meta and autograd files: validation, the pool_mode choices and
// one dispatcher signature per schema (used through detail::op_handle).

#include "roi_align/roi_align_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace mmops {

// Signatures of the schemas in roi_align.cpp.
using RoIAlignFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t,
                              c10::string_view, bool);
using RoIAlignForwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                                             double, int64_t, c10::string_view, bool);
using RoIAlignBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                      double, int64_t, c10::string_view, bool);
using MultiLevelRoIAlignFn = at::Tensor(at::TensorList, const at::Tensor&, c10::SymIntArrayRef, c10::ArrayRef<double>,
                                        int64_t, c10::string_view, bool, int64_t);
using MultiLevelRoIAlignForwardFn = std::tuple<at::Tensor, at::Tensor>(at::TensorList, const at::Tensor&,
                                                                       c10::SymIntArrayRef, c10::ArrayRef<double>,
                                                                       int64_t, c10::string_view, bool, int64_t);
using MultiLevelRoIAlignBackwardFn = std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                             c10::SymIntArrayRef, c10::ArrayRef<double>, int64_t,
                                                             c10::string_view, bool, int64_t);

namespace detail {

// Message prefixes of the two ops' checks (device entries and meta kernels).
inline constexpr const char* kRoIAlign = "mmops::roi_align: ";
inline constexpr const char* kMultiLevel = "mmops::multi_level_roi_align: ";

// The pool_mode strings (for parse_choice / choice_name).
inline constexpr std::pair<const char*, PoolMode> kPoolModes[] = {{"avg", PoolMode::Avg}, {"max", PoolMode::Max}};

// Checks every argument of a forward call (shapes, dtypes, devices, values)
// and returns them parsed; `single` names the one feature map "input".
// Works on real and on fake/meta tensors (no data access).
RoIAlignParams check_forward(const char* op, at::TensorList features, bool single, const at::Tensor& rois,
                             c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                             int64_t sampling_ratio, c10::string_view pool_mode, bool aligned, int64_t finest_scale);

// Checks the arguments of a backward call; `channels` is the features' C.
RoIAlignParams check_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& rois,
                              const at::Tensor& argmax, const c10::SymInt& channels,
                              c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio, c10::string_view pool_mode,
                              bool aligned, int64_t finest_scale);

// roi_align is the one-map case of the checks above (input_shape = [N, C, H, W]).
RoIAlignParams check_roi_align_forward(const char* op, const at::Tensor& input, const at::Tensor& rois,
                                       c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio,
                                       c10::string_view pool_mode, bool aligned);
RoIAlignParams check_roi_align_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& rois,
                                        const at::Tensor& argmax, c10::SymIntArrayRef input_shape, double spatial_scale,
                                        int64_t sampling_ratio, c10::string_view pool_mode, bool aligned);

// multi_level_roi_align's backward: feature_sizes = [N, C, H_0, W_0, H_1, W_1, ...].
RoIAlignParams check_multi_level_roi_align_backward(const char* op, const at::Tensor& grad_output,
                                                    const at::Tensor& rois, const at::Tensor& argmax,
                                                    c10::SymIntArrayRef feature_sizes,
                                                    c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                                                    c10::string_view pool_mode, bool aligned, int64_t finest_scale);

// [N, C, H_l, W_l] of each map from feature_sizes (int64_t or c10::SymInt).
template <typename T>
std::vector<std::vector<T>> feature_shapes(c10::ArrayRef<T> sizes) {
  std::vector<std::vector<T>> shapes;
  for (size_t i = 2; i + 1 < sizes.size(); i += 2) {
    shapes.push_back({sizes[0], sizes[1], sizes[i], sizes[i + 1]});
  }
  return shapes;
}

} // namespace detail
} // namespace mmops
