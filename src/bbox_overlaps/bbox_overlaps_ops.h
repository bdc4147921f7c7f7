#pragma once
// Internal pieces of bbox_overlaps shared by its registration, meta and
// autograd files: the mode, the checks and the dispatcher signatures.

#include "bbox_overlaps/bbox_overlaps_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <tuple>
#include <utility>

namespace mmops {

// Signatures of the schemas, for detail::op_handle (autograd and the C++ API).
using BBoxOverlapsFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, bool, int64_t);
using BBoxOverlapsBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                  const at::Tensor&, c10::string_view, bool, int64_t);

enum class OverlapMode : int64_t { IoU, IoF };

namespace detail {

inline constexpr std::pair<const char*, OverlapMode> kOverlapModes[] = {{"iou", OverlapMode::IoU},
                                                                        {"iof", OverlapMode::IoF}};

// mode "iou" or "iof" (the error names the op).
OverlapMode parse_overlap_mode(c10::string_view mode);

// Every argument of a forward call; works on real and fake tensors (no data access).
BBoxOverlapsParams check_bbox_overlaps(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode,
                                       bool aligned, int64_t offset);

// The above plus grad_output: the forward's shape, dtype and device.
BBoxOverlapsParams check_bbox_overlaps_backward(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                                                int64_t offset);

} // namespace detail
} // namespace mmops
