// mmops::bbox_overlaps: schema, validation, CPU/CUDA/Meta kernels, autograd
// (C++) and the public C++ API. Kernels: kernels/bbox_overlaps; the overlap
// math (shared with nms): kernels/common/box_iou.h.

#include "bbox_overlaps/bbox_overlaps_kernels.h"
#include "common/check_utils.h"

#include <mmops/bbox_overlaps.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <sstream>
#include <string>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  m.def(
      "bbox_overlaps(Tensor bboxes1, Tensor bboxes2, str mode=\"iou\", bool aligned=False, int offset=0) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "_bbox_overlaps_backward(Tensor grad_output, Tensor bboxes1, Tensor bboxes2, str mode, bool aligned, "
      "int offset) -> (Tensor grad_bboxes1, Tensor grad_bboxes2)",
      {at::Tag::pt2_compliant_tag});
}

namespace mmops {
namespace {

constexpr const char* kOp = "mmops::bbox_overlaps: ";

using detail::shape_of;

// Checks shapes, dtypes, devices and options; works on fake tensors too.
BBoxOverlapsParams check_args(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode,
                              bool aligned, int64_t offset) {
  TORCH_CHECK(bboxes1.dim() == 2 && bboxes1.sym_size(1) == 4, kOp,
              "expected bboxes1 to be a 2-D tensor of shape [M, 4] (x1, y1, x2, y2), but got shape ",
              shape_of(bboxes1));
  TORCH_CHECK(bboxes2.dim() == 2 && bboxes2.sym_size(1) == 4, kOp,
              "expected bboxes2 to be a 2-D tensor of shape [N, 4] (x1, y1, x2, y2), but got shape ",
              shape_of(bboxes2));
  TORCH_CHECK(at::isFloatingType(bboxes1.scalar_type()), kOp,
              "expected bboxes1 to have a floating point dtype, but got ", bboxes1.scalar_type());
  TORCH_CHECK(bboxes2.scalar_type() == bboxes1.scalar_type(), kOp, "expected bboxes2 to have the dtype of bboxes1 (",
              bboxes1.scalar_type(), "), but got ", bboxes2.scalar_type());
  TORCH_CHECK(bboxes2.device() == bboxes1.device(), kOp, "expected bboxes2 on the device of bboxes1 (",
              bboxes1.device(), "), but got ", bboxes2.device());
  TORCH_CHECK(mode == "iou" || mode == "iof", kOp, "mode must be \"iou\" or \"iof\", but got \"",
              std::string(mode), "\"");
  TORCH_CHECK(offset == 0 || offset == 1, kOp, "offset must be 0 or 1, but got ", offset);
  if (aligned) {
    TORCH_SYM_CHECK(bboxes1.sym_size(0).sym_eq(bboxes2.sym_size(0)), kOp,
                    "aligned=True needs as many bboxes1 as bboxes2, but got ", bboxes1.sym_size(0), " and ",
                    bboxes2.sym_size(0));
  }
  return BBoxOverlapsParams{mode == "iof", aligned, offset};
}

void check_grad(const at::Tensor& grad_output, const at::Tensor& bboxes1, const at::Tensor& bboxes2,
                bool aligned) {
  TORCH_CHECK(grad_output.scalar_type() == bboxes1.scalar_type() && grad_output.device() == bboxes1.device(), kOp,
              "expected grad_output to have the dtype and device of bboxes1 (", bboxes1.scalar_type(), ", ",
              bboxes1.device(), "), but got ", grad_output.scalar_type(), ", ", grad_output.device());
  if (aligned) {
    TORCH_CHECK(grad_output.dim() == 1, kOp, "expected grad_output of shape [M], but got ", shape_of(grad_output));
    TORCH_SYM_CHECK(grad_output.sym_size(0).sym_eq(bboxes1.sym_size(0)), kOp, "expected grad_output of shape [",
                    bboxes1.sym_size(0), "], but got ", shape_of(grad_output));
  } else {
    TORCH_CHECK(grad_output.dim() == 2, kOp, "expected grad_output of shape [M, N], but got ",
                shape_of(grad_output));
    TORCH_SYM_CHECK(grad_output.sym_size(0).sym_eq(bboxes1.sym_size(0)).sym_and(
                        grad_output.sym_size(1).sym_eq(bboxes2.sym_size(0))),
                    kOp, "expected grad_output of shape [", bboxes1.sym_size(0), ", ", bboxes2.sym_size(0),
                    "], but got ", shape_of(grad_output));
  }
}

template <auto Forward>
at::Tensor forward_kernel(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode,
                          bool aligned, int64_t offset) {
  return Forward(bboxes1, bboxes2, check_args(bboxes1, bboxes2, mode, aligned, offset));
}

template <auto Backward>
std::tuple<at::Tensor, at::Tensor> backward_kernel(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                   const at::Tensor& bboxes2, c10::string_view mode,
                                                   bool aligned, int64_t offset) {
  const BBoxOverlapsParams p = check_args(bboxes1, bboxes2, mode, aligned, offset);
  check_grad(grad_output, bboxes1, bboxes2, aligned);
  return Backward(grad_output, bboxes1, bboxes2, p);
}

at::Tensor forward_meta(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                        int64_t offset) {
  check_args(bboxes1, bboxes2, mode, aligned, offset);
  if (aligned) {
    return at::empty_symint({bboxes1.sym_size(0)}, bboxes1.options());
  }
  return at::empty_symint({bboxes1.sym_size(0), bboxes2.sym_size(0)}, bboxes1.options());
}

std::tuple<at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                 const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                                                 int64_t offset) {
  check_args(bboxes1, bboxes2, mode, aligned, offset);
  check_grad(grad_output, bboxes1, bboxes2, aligned);
  return {at::empty_symint({bboxes1.sym_size(0), 4}, bboxes1.options()),
          at::empty_symint({bboxes2.sym_size(0), 4}, bboxes2.options())};
}

std::tuple<at::Tensor, at::Tensor> call_backward(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                 const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                                                 int64_t offset) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_bbox_overlaps_backward", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                 const at::Tensor&, c10::string_view, bool,
                                                                 int64_t)>();
  return op.call(grad_output, bboxes1, bboxes2, mode, aligned, offset);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class BBoxOverlapsFunction : public torch::autograd::Function<BBoxOverlapsFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& bboxes1, const at::Tensor& bboxes2,
                            c10::string_view mode, bool aligned, int64_t offset) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mmops::bbox_overlaps", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, bool, int64_t)>();
    at::Tensor out = op.call(bboxes1, bboxes2, mode, aligned, offset);
    ctx->save_for_backward({bboxes1, bboxes2});
    ctx->saved_data["mode"] = std::string(mode);
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["offset"] = offset;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    TORCH_CHECK(!(grad_output.requires_grad() && at::GradMode::is_enabled()),
                "mmops::bbox_overlaps: double backward is not implemented");
    const variable_list saved = ctx->get_saved_variables();
    auto [grad1, grad2] = call_backward(grad_output, saved[0], saved[1], ctx->saved_data["mode"].toStringRef(),
                                        ctx->saved_data["aligned"].toBool(), ctx->saved_data["offset"].toInt());
    // Gradients for (bboxes1, bboxes2, mode, aligned, offset).
    return {grad1, grad2, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor forward_autograd(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode,
                            bool aligned, int64_t offset) {
  return BBoxOverlapsFunction::apply(bboxes1, bboxes2, mode, aligned, offset);
}

} // namespace

at::Tensor bbox_overlaps(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                         int64_t offset) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::bbox_overlaps", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, bool, int64_t)>();
  return op.call(bboxes1, bboxes2, mode, aligned, offset);
}

} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, CPU, m) {
  using namespace mmops;
  m.impl("bbox_overlaps", &forward_kernel<kernels::bbox_overlaps_cpu>);
  m.impl("_bbox_overlaps_backward", &backward_kernel<kernels::bbox_overlaps_backward_cpu>);
}

#ifdef MMOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(mmops, CUDA, m) {
  using namespace mmops;
  m.impl("bbox_overlaps", &forward_kernel<kernels::bbox_overlaps_cuda>);
  m.impl("_bbox_overlaps_backward", &backward_kernel<kernels::bbox_overlaps_backward_cuda>);
}
#endif

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("bbox_overlaps", &mmops::forward_meta);
  m.impl("_bbox_overlaps_backward", &mmops::backward_meta);
}

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("bbox_overlaps", &mmops::forward_autograd);
}
