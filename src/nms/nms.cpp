// mmops::nms, batched_nms and soft_nms: schemas, validation, CPU/CUDA and
// Autograd registration, and the public C++ API.
//
// Their output size depends on the data, so their fake (meta) kernels are
// registered from Python (python/mmops/nms_ops.py, torch.library.register_fake
// with an unbacked size). They are not differentiable: the Autograd kernel is
// PyTorch's "not implemented" fallback (dets of soft_nms raise on backward).

#include "nms/nms_kernels.h"

#include <mmops/nms.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include <cmath>
#include <sstream>
#include <string>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  m.def("nms(Tensor boxes, Tensor scores, float iou_threshold) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def(
      "soft_nms(Tensor boxes, Tensor scores, float iou_threshold=0.3, float sigma=0.5, "
      "float min_score=1e-3, str method=\"linear\") -> (Tensor dets, Tensor keep)",
      {at::Tag::pt2_compliant_tag});
}

namespace mmops {
namespace {

std::string shape_of(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

void check_boxes_scores(const char* op, const at::Tensor& boxes, const at::Tensor& scores) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, op,
              "expected boxes to be a 2-D tensor of shape [N, 4] (x1, y1, x2, y2), but got shape ",
              shape_of(boxes));
  TORCH_CHECK(at::isFloatingType(boxes.scalar_type()), op,
              "expected boxes to have a floating point dtype, but got ", boxes.scalar_type());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0), op,
              "expected scores to be a 1-D tensor of shape [N] with N = boxes.size(0) = ", boxes.size(0),
              ", but got shape ", shape_of(scores));
  TORCH_CHECK(at::isFloatingType(scores.scalar_type()), op,
              "expected scores to have a floating point dtype, but got ", scores.scalar_type());
  TORCH_CHECK(scores.device() == boxes.device(), op, "expected scores on the device of boxes (",
              boxes.device(), "), but got ", scores.device());
}

void check_threshold(const char* op, const char* name, double value) {
  TORCH_CHECK(!std::isnan(value), op, name, " must be a number, but got nan");
}

template <auto Kernel>
at::Tensor nms_kernel(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  constexpr const char* kOp = "mmops::nms: ";
  check_boxes_scores(kOp, boxes, scores);
  check_threshold(kOp, "iou_threshold", iou_threshold);
  return Kernel(boxes, scores, at::Tensor(), iou_threshold);
}

template <auto Kernel>
at::Tensor batched_nms_kernel(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                              double iou_threshold) {
  constexpr const char* kOp = "mmops::batched_nms: ";
  check_boxes_scores(kOp, boxes, scores);
  check_threshold(kOp, "iou_threshold", iou_threshold);
  TORCH_CHECK(idxs.dim() == 1 && idxs.size(0) == boxes.size(0), kOp,
              "expected idxs to be a 1-D tensor of shape [N] with N = boxes.size(0) = ", boxes.size(0),
              ", but got shape ", shape_of(idxs));
  TORCH_CHECK(at::isIntegralType(idxs.scalar_type(), /*includeBool=*/false), kOp,
              "expected idxs (the category of every box) to have an integer dtype, but got ",
              idxs.scalar_type());
  TORCH_CHECK(idxs.device() == boxes.device(), kOp, "expected idxs on the device of boxes (", boxes.device(),
              "), but got ", idxs.device());
  return Kernel(boxes, scores, idxs, iou_threshold);
}

SoftNmsMethod parse_method(const char* op, c10::string_view method) {
  if (method == "naive") {
    return SoftNmsMethod::Naive;
  }
  if (method == "linear") {
    return SoftNmsMethod::Linear;
  }
  if (method == "gaussian") {
    return SoftNmsMethod::Gaussian;
  }
  TORCH_CHECK(false, op, "method must be \"naive\", \"linear\" or \"gaussian\", but got \"", std::string(method),
              "\"");
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> soft_nms_kernel(const at::Tensor& boxes, const at::Tensor& scores,
                                                   double iou_threshold, double sigma, double min_score,
                                                   c10::string_view method) {
  constexpr const char* kOp = "mmops::soft_nms: ";
  check_boxes_scores(kOp, boxes, scores);
  check_threshold(kOp, "iou_threshold", iou_threshold);
  check_threshold(kOp, "min_score", min_score);
  SoftNmsParams p{};
  p.method = parse_method(kOp, method);
  TORCH_CHECK(std::isfinite(sigma) && sigma > 0, kOp, "sigma must be a positive finite number, but got ", sigma);
  p.iou_threshold = iou_threshold;
  p.sigma = sigma;
  p.min_score = min_score;
  return Kernel(boxes, scores, p);
}

} // namespace

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::nms", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  return op.call(boxes, scores, iou_threshold);
}

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                       double iou_threshold) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::batched_nms", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>();
  return op.call(boxes, scores, idxs, iou_threshold);
}

std::tuple<at::Tensor, at::Tensor> soft_nms(const at::Tensor& boxes, const at::Tensor& scores,
                                            double iou_threshold, double sigma, double min_score,
                                            c10::string_view method) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::soft_nms", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, double,
                                                                 double, double, c10::string_view)>();
  return op.call(boxes, scores, iou_threshold, sigma, min_score, method);
}

} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, CPU, m) {
  using namespace mmops;
  m.impl("nms", &nms_kernel<kernels::nms_cpu>);
  m.impl("batched_nms", &batched_nms_kernel<kernels::nms_cpu>);
  m.impl("soft_nms", &soft_nms_kernel<kernels::soft_nms_cpu>);
}

#ifdef MMOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(mmops, CUDA, m) {
  using namespace mmops;
  m.impl("nms", &nms_kernel<kernels::nms_cuda>);
  m.impl("batched_nms", &batched_nms_kernel<kernels::nms_cuda>);
  m.impl("soft_nms", &soft_nms_kernel<kernels::soft_nms_cuda>);
}
#endif

// Not differentiable: keep, an index tensor, has no gradient; soft_nms' dets
// raise "not implemented" if backward reaches them.
TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("nms", torch::autograd::autogradNotImplementedFallback());
  m.impl("batched_nms", torch::autograd::autogradNotImplementedFallback());
  m.impl("soft_nms", torch::autograd::autogradNotImplementedFallback());
}
