// Autograd of gather_points, group_points and stack_group_points, in C++ so
// that backward works from C++ programs and TorchScript loaded without
// Python. The forward is the public op itself (the backward needs only the
// indices and the number of features), so inference graphs record it as is.

#include "group_points/group_points_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

struct GatherNames {
  static constexpr const char* forward = "mmops::gather_points";
  static constexpr const char* backward = "mmops::_gather_points_backward";
};

struct GroupNames {
  static constexpr const char* forward = "mmops::group_points";
  static constexpr const char* backward = "mmops::_group_points_backward";
};

// gather_points and group_points: features [B, C, N], int32 indices.
template <typename Names>
class PointGatherFunction : public torch::autograd::Function<PointGatherFunction<Names>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& features, const at::Tensor& indices) {
    static const auto op = detail::op_handle<GatherPointsFn>(Names::forward);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor out = op.call(features, indices); // validates: features is [B, C, N] below
    ctx->save_for_backward({indices});
    ctx->saved_data["n"] = features.sym_size(2);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<GatherPointsBackwardFn>(Names::backward);
    detail::refuse_double_backward(Names::forward, grad_outputs[0]);
    const variable_list saved = ctx->get_saved_variables();
    return {backward_op.call(grad_outputs[0], saved[0], ctx->saved_data["n"].toSymInt()), at::Tensor()};
  }
};

class StackGroupPointsFunction : public torch::autograd::Function<StackGroupPointsFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& features, const at::Tensor& features_batch_cnt,
                            const at::Tensor& indices, const at::Tensor& indices_batch_cnt) {
    static const auto op = detail::op_handle<StackGroupPointsFn>("mmops::stack_group_points");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor out = op.call(features, features_batch_cnt, indices, indices_batch_cnt); // validates first
    ctx->save_for_backward({features_batch_cnt, indices, indices_batch_cnt});
    ctx->saved_data["n"] = features.sym_size(0);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op =
        detail::op_handle<StackGroupPointsBackwardFn>("mmops::_stack_group_points_backward");
    detail::refuse_double_backward("mmops::stack_group_points", grad_outputs[0]);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad = backward_op.call(grad_outputs[0], saved[0], saved[1], saved[2], ctx->saved_data["n"].toSymInt());
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <typename Names>
at::Tensor point_gather_autograd(const at::Tensor& features, const at::Tensor& indices) {
  return PointGatherFunction<Names>::apply(features, indices);
}

at::Tensor stack_group_points_autograd(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                                       const at::Tensor& indices, const at::Tensor& indices_batch_cnt) {
  return StackGroupPointsFunction::apply(features, features_batch_cnt, indices, indices_batch_cnt);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("gather_points", &mmops::point_gather_autograd<mmops::GatherNames>);
  m.impl("group_points", &mmops::point_gather_autograd<mmops::GroupNames>);
  m.impl("stack_group_points", &mmops::stack_group_points_autograd);
}
