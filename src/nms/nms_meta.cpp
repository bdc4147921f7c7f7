// Meta kernel of nms_match: one row per box, so its shape is known from dets
// (nms, batched_nms and soft_nms have data-dependent sizes: python/mmops/_fake.py).

#include "nms/nms_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor nms_match_meta(const at::Tensor& dets, double iou_threshold) {
  detail::check_nms_match(dets, iou_threshold);
  return at::empty_symint({dets.sym_size(0), c10::SymInt(2)}, dets.options().dtype(at::kLong));
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("nms_match", &mmops::nms_match_meta);
}
