// mmops::nms, batched_nms, soft_nms and nms_match: schemas, CPU/CUDA
// registration and the public C++ API. Validation is in nms_checks.cpp, kernels
// in kernels/nms, and the Autograd registration (not differentiable) in
// nms_autograd.cpp.
//
// The output size of nms, batched_nms and soft_nms depends on the data, so they
// have no C++ meta kernel: the fake kernels are in Python (python/mmops/_fake.py,
// an unbacked size). They validate through the validation-only schemas below,
// which run the checks of the CPU/CUDA entries, so fake tensors raise the errors
// of eager mode. nms_match returns one row per box (its groups, flattened: see
// docs/ops/nms_match.md), a size known from the input: a C++ meta kernel
// (nms_meta.cpp).

#include "common/autocast.h"
#include "common/dispatch.h"
#include "nms/nms_ops.h"

#include <mmops/nms.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "nms(Tensor boxes, Tensor scores, float iou_threshold) -> Tensor");
  define_op(m, "batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor");
  define_op(m,
            "soft_nms(Tensor boxes, Tensor scores, float iou_threshold=0.3, float sigma=0.5, "
            "float min_score=1e-3, str method=\"linear\") -> (Tensor dets, Tensor keep)");
  // [N, 2] int64 rows (group leader, member), leaders by decreasing score, each
  // group's leader row first, then its members by decreasing score.
  define_op(m, "nms_match(Tensor dets, float iou_threshold) -> Tensor");
  // Validation only (the arguments of the op above, nothing returned): for the fake kernels.
  m.def("_nms_check(Tensor boxes, Tensor scores, float iou_threshold) -> ()");
  m.def("_batched_nms_check(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> ()");
  m.def(
      "_soft_nms_check(Tensor boxes, Tensor scores, float iou_threshold, float sigma, float min_score, "
      "str method) -> ()");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor nms_entry(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  detail::check_nms(boxes, scores, iou_threshold);
  return Kernel(boxes, scores, at::Tensor(), iou_threshold);
}

// No index policy for idxs: categories are labels (see nms_ops.h).
template <auto Kernel>
at::Tensor batched_nms_entry(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                             double iou_threshold) {
  detail::check_batched_nms(boxes, scores, idxs, iou_threshold);
  return Kernel(boxes, scores, idxs, iou_threshold);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> soft_nms_entry(const at::Tensor& boxes, const at::Tensor& scores,
                                                  double iou_threshold, double sigma, double min_score,
                                                  c10::string_view method) {
  const SoftNmsParams p = detail::check_soft_nms(boxes, scores, iou_threshold, sigma, min_score, method);
  return Kernel(boxes, scores, p);
}

template <auto Kernel>
at::Tensor nms_match_entry(const at::Tensor& dets, double iou_threshold) {
  detail::check_nms_match(dets, iou_threshold);
  return Kernel(dets, iou_threshold);
}

void soft_nms_check(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold, double sigma,
                    double min_score, c10::string_view method) {
  detail::check_soft_nms(boxes, scores, iou_threshold, sigma, min_score, method);
}

} // namespace

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  static const auto op = detail::op_handle<NmsFn>("mmops::nms");
  return op.call(boxes, scores, iou_threshold);
}

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                       double iou_threshold) {
  static const auto op = detail::op_handle<BatchedNmsFn>("mmops::batched_nms");
  return op.call(boxes, scores, idxs, iou_threshold);
}

std::tuple<at::Tensor, at::Tensor> soft_nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                                            double sigma, double min_score, c10::string_view method) {
  static const auto op = detail::op_handle<SoftNmsFn>("mmops::soft_nms");
  return op.call(boxes, scores, iou_threshold, sigma, min_score, method);
}

at::Tensor nms_match(const at::Tensor& dets, double iou_threshold) {
  static const auto op = detail::op_handle<NmsMatchFn>("mmops::nms_match");
  return op.call(dets, iou_threshold);
}

} // namespace mmops

#define MMOPS_NMS_ENTRIES(m, device)                                \
  m.impl("nms", &nms_entry<kernels::nms_##device>);                 \
  m.impl("batched_nms", &batched_nms_entry<kernels::nms_##device>); \
  m.impl("soft_nms", &soft_nms_entry<kernels::soft_nms_##device>);  \
  m.impl("nms_match", &nms_match_entry<kernels::nms_match_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_NMS_ENTRIES)

// Every backend, fake and meta tensors included.
TORCH_LIBRARY_IMPL(mmops, CompositeExplicitAutograd, m) {
  m.impl("_nms_check", &mmops::detail::check_nms);
  m.impl("_batched_nms_check", &mmops::detail::check_batched_nms);
  m.impl("_soft_nms_check", &mmops::soft_nms_check);
}
MMOPS_REGISTER_AUTOCAST(kDataDtype, "nms", "batched_nms", "soft_nms", "nms_match")
