#pragma once
// Public C++ API of mmops::sigmoid_focal_loss and mmops::softmax_focal_loss
// (through the dispatcher, autograd included: differentiable w.r.t. input).

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <optional>

namespace mmops {

// mmcv's sigmoid focal loss.
//   input:  [N, C] logits (floating point)
//   target: [N] int64 class ids in [0, C]; C means background (no positive class)
//   weight: optional [C] class weights (input's dtype); row n is scaled by
//           weight[target[n]] (background rows by 1)
//   result: [N, C] for reduction "none", else a 0-d tensor ("mean": sum / N, "sum")
at::Tensor sigmoid_focal_loss(const at::Tensor& input, const at::Tensor& target, double gamma = 2.0,
                              double alpha = 0.25, const std::optional<at::Tensor>& weight = std::nullopt,
                              c10::string_view reduction = "mean");

// mmcv's softmax focal loss: -alpha * (1 - p)^gamma * log(p), p = softmax(input[n])[target[n]].
//   target: [N] int64 class ids in [0, C); weight: optional [C], row n scaled by weight[target[n]]
//   result: [N] for reduction "none", else a 0-d tensor ("mean": sum / N, "sum")
at::Tensor softmax_focal_loss(const at::Tensor& input, const at::Tensor& target, double gamma = 2.0,
                              double alpha = 0.25, const std::optional<at::Tensor>& weight = std::nullopt,
                              c10::string_view reduction = "mean");

} // namespace mmops
