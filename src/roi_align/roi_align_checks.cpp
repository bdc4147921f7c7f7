// Argument validation shared by roi_align and multi_level_roi_align, on every
// backend (the meta kernels run it too, so fake tensors raise the same errors).

#include "common/check_utils.h"
#include "common/roi_checks.h"
#include "roi_align/roi_align_math.h"
#include "roi_align/roi_align_ops.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace mmops {
namespace detail {
namespace {

// The bounds that keep the kernels' narrower arithmetic exact (checked here, so
// that no kernel needs a per-sample check): a roi's samples along one axis,
// out * grid side, are counted in int32 by the CUDA kernels.
static_assert(kMaxRoiOutputSide * roi_align_math::kMaxGridSide <= std::numeric_limits<int32_t>::max(),
              "a roi's per-axis samples must fit in int32");
static_assert(int64_t(roi_align_math::kMaxGridSide) * roi_align_math::kMaxGridSide <=
                  std::numeric_limits<int32_t>::max(),
              "a bin's sample index (argmax) must fit in int32");

// The largest sampling_ratio: the cap of the adaptive grid, so that a fixed
// grid bounds the work per output value as the adaptive one does.
constexpr int64_t kMaxSamplingRatio = roi_align_math::kMaxGridSide;

// The largest finest_scale: the kernels compute the level in the inputs'
// accumulation type (float for float32 and below), exact up to 2^24.
constexpr int64_t kMaxFinestScale = int64_t(1) << 24;

// rois, scales, sampling ratio, pool mode: what forward and backward share.
RoIAlignParams check_common(const char* op, const at::Tensor& rois, c10::ArrayRef<double> spatial_scales,
                            int64_t sampling_ratio, c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  check_rois_tensor(op, rois);
  TORCH_CHECK(!spatial_scales.empty() && spatial_scales.size() <= static_cast<size_t>(kMaxLevels), op, "expected 1 to ",
              kMaxLevels, " feature maps, but got ", spatial_scales.size());
  for (size_t l = 0; l < spatial_scales.size(); ++l) {
    TORCH_CHECK(std::isfinite(spatial_scales[l]) && spatial_scales[l] > 0, op,
                spatial_scales.size() == 1 ? std::string("spatial_scale") : "spatial_scales[" + std::to_string(l) + "]",
                " must be a positive finite number, but got ", spatial_scales[l]);
  }
  TORCH_CHECK(sampling_ratio >= 0, op, "sampling_ratio must be >= 0 (0 means adaptive), but got ", sampling_ratio);
  TORCH_CHECK(sampling_ratio <= kMaxSamplingRatio, op, "sampling_ratio must be at most ", kMaxSamplingRatio,
              " (samples per bin side, the cap of the adaptive grid), but got ", sampling_ratio);
  TORCH_CHECK(finest_scale > 0, op, "finest_scale must be positive, but got ", finest_scale);
  TORCH_CHECK(finest_scale <= kMaxFinestScale, op, "finest_scale must be at most 2^24 = ", kMaxFinestScale,
              ", but got ", finest_scale);
  RoIAlignParams p{};
  p.sampling_ratio = sampling_ratio;
  p.pool_mode = parse_choice(op, "pool_mode", pool_mode, kPoolModes);
  p.aligned = aligned;
  p.num_levels = static_cast<int>(spatial_scales.size());
  for (size_t l = 0; l < spatial_scales.size(); ++l) {
    p.spatial_scale[l] = spatial_scales[l];
  }
  p.finest_scale = static_cast<double>(finest_scale);
  return p;
}

} // namespace

RoIAlignParams check_forward(const char* op, at::TensorList features, bool single, const at::Tensor& rois,
                             c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                             int64_t sampling_ratio, c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  TORCH_CHECK(!features.empty(), op, "expected at least one feature map, but features is empty");
  TORCH_CHECK(features.size() == spatial_scales.size(), op, "expected one spatial scale per feature map (",
              features.size(), "), but got ", spatial_scales.size());
  const at::Tensor& first = features.front();
  for (size_t l = 0; l < features.size(); ++l) {
    const at::Tensor& f = features[l];
    const std::string name = single ? std::string("input") : "features[" + std::to_string(l) + "]";
    TORCH_CHECK(f.dim() == 4, op, "expected ", name, " to be a 4-D tensor [N, C, H, W], but got a ", f.dim(),
                "-D tensor of shape ", shape_of(f));
    TORCH_CHECK(at::isFloatingType(f.scalar_type()), op, "expected ", name, " to have a floating point dtype, but got ",
                f.scalar_type());
    TORCH_CHECK(f.scalar_type() == first.scalar_type() && f.device() == first.device(), op, "expected ", name,
                " to have the dtype and device of features[0] (", first.scalar_type(), ", ", first.device(),
                "), but got ", f.scalar_type(), ", ", f.device());
    TORCH_SYM_CHECK(f.sym_size(0).sym_eq(first.sym_size(0)).sym_and(f.sym_size(1).sym_eq(first.sym_size(1))), op,
                    "expected ", name, " to have the batch size and channels of features[0] (", shape_of(first),
                    "), but got ", shape_of(f));
    check_roi_map_shape(op, name, f.sym_size(0), f.sym_size(1), f.sym_size(2), f.sym_size(3));
  }
  RoIAlignParams p = check_common(op, rois, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  const std::string first_name = single ? "input" : "features";
  TORCH_CHECK(rois.scalar_type() == first.scalar_type(), op, "expected rois to have the dtype of ", first_name, " (",
              first.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == first.device(), op, "expected rois on the device of ", first_name, " (", first.device(),
              "), but got ", rois.device());
  check_roi_output_size(op, output_size);
  check_roi_output_numel(op, rois.sym_size(0), first.sym_size(1), output_size);
  p.pooled_height = output_size[0].maybe_as_int().value_or(-1);
  p.pooled_width = output_size[1].maybe_as_int().value_or(-1);
  return p;
}

RoIAlignParams check_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& rois,
                              const at::Tensor& argmax, const c10::SymInt& channels,
                              c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio, c10::string_view pool_mode,
                              bool aligned, int64_t finest_scale) {
  RoIAlignParams p = check_common(op, rois, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  check_roi_grad_output(op, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(channels), op, "grad_output has ", grad_output.sym_size(1),
                  " channels but the features have ", channels);
  if (p.pool_mode == PoolMode::Max) {
    TORCH_CHECK(argmax.scalar_type() == at::kInt && argmax.device() == grad_output.device(), op,
                "expected argmax to be an int32 tensor on ", grad_output.device(), ", but got ", argmax.scalar_type(),
                " on ", argmax.device());
    TORCH_CHECK(argmax.sym_sizes() == grad_output.sym_sizes(), op, "expected argmax of shape ", shape_of(grad_output),
                ", but got ", shape_of(argmax));
  }
  p.pooled_height = grad_output.sym_size(2).maybe_as_int().value_or(-1);
  p.pooled_width = grad_output.sym_size(3).maybe_as_int().value_or(-1);
  return p;
}

// One map needs no level mapping; any positive finest_scale passes the checks.
constexpr int64_t kSingleMapFinestScale = 1;

RoIAlignParams check_roi_align_forward(const char* op, const at::Tensor& input, const at::Tensor& rois,
                                       c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio,
                                       c10::string_view pool_mode, bool aligned) {
  return check_forward(op, input, /*single=*/true, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned,
                       kSingleMapFinestScale);
}

RoIAlignParams check_roi_align_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& rois,
                                        const at::Tensor& argmax, c10::SymIntArrayRef input_shape, double spatial_scale,
                                        int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  TORCH_CHECK(input_shape.size() == 4, op, "expected input_shape to hold 4 values, but got ", input_shape.size());
  check_roi_map_shape(op, "input_shape", input_shape[0], input_shape[1], input_shape[2], input_shape[3]);
  return check_backward(op, grad_output, rois, argmax, input_shape[1], spatial_scale, sampling_ratio, pool_mode,
                        aligned, kSingleMapFinestScale);
}

RoIAlignParams check_multi_level_roi_align_backward(const char* op, const at::Tensor& grad_output,
                                                    const at::Tensor& rois, const at::Tensor& argmax,
                                                    c10::SymIntArrayRef feature_sizes,
                                                    c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                                                    c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  TORCH_CHECK(feature_sizes.size() == 2 + 2 * spatial_scales.size(), op,
              "expected feature_sizes = [N, C, H_0, W_0, ...] with 2 + 2 * ", spatial_scales.size(),
              " values, but got ", feature_sizes.size());
  for (size_t i = 2; i + 1 < feature_sizes.size(); i += 2) {
    check_roi_map_shape(op, "feature_sizes (map " + std::to_string(i / 2 - 1) + ")", feature_sizes[0], feature_sizes[1],
                        feature_sizes[i], feature_sizes[i + 1]);
  }
  return check_backward(op, grad_output, rois, argmax, feature_sizes[1], spatial_scales, sampling_ratio, pool_mode,
                        aligned, finest_scale);
}

} // namespace detail
} // namespace mmops
