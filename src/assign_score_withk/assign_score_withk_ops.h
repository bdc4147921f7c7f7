#pragma once
// Internal to assign_score_withk: the validation (assign_score_withk_checks.cpp),
// shared by the device entries and the meta kernels, and the dispatcher
// signature of each schema (for detail::op_handle).

#include "assign_score_withk/assign_score_withk_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <tuple>

namespace mmops {

// The prefix of every assign_score_withk error message.
constexpr const char* kAssignScoreWithKOp = "mmops::assign_score_withk: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only).
AssignScoreWithKParams check_assign_score_withk_forward(const at::Tensor& scores, const at::Tensor& point_features,
                                                        const at::Tensor& center_features, const at::Tensor& knn_idx,
                                                        c10::string_view aggregate);

// The arguments of a backward call.
AssignScoreWithKParams check_assign_score_withk_backward(const at::Tensor& grad_output, const at::Tensor& scores,
                                                         const at::Tensor& point_features,
                                                         const at::Tensor& center_features, const at::Tensor& knn_idx);

// Reads knn_idx and raises unless every value lies in [0, N).
void check_assign_score_withk_indices(const at::Tensor& knn_idx, int64_t points);

} // namespace detail

// assign_score_withk(Tensor scores, Tensor point_features, Tensor center_features, Tensor knn_idx,
//                    str aggregate="sum") -> Tensor
using AssignScoreWithKFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                      c10::string_view);

// _assign_score_withk_backward(Tensor grad_output, Tensor scores, Tensor point_features,
//                              Tensor center_features, Tensor knn_idx) -> (Tensor, Tensor, Tensor)
using AssignScoreWithKBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                                  const at::Tensor&, const at::Tensor&,
                                                                                  const at::Tensor&);

} // namespace mmops
