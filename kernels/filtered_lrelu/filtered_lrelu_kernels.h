#pragma once
// Device kernels of filtered_lrelu. Callers (src/filtered_lrelu) validate the
// arguments first; these functions only compute.

#include "filtered_lrelu/filtered_lrelu_math.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace mmops {
namespace kernels {

// input [N, C, H, W], filter_up [fu_h, fu_w], filter_down [fd_h, fd_w] (any
// floating dtype; their values are used in the accumulation type), bias [C]
// (input's dtype) -> (output [N, C, out_h, out_w] in input's dtype, mask
// [N, C, mid_h, mid_w] uint8 when write_mask, else an undefined tensor).
std::tuple<at::Tensor, at::Tensor> filtered_lrelu_forward_cpu(const at::Tensor& input, const at::Tensor& filter_up,
                                                              const at::Tensor& filter_down,
                                                              const std::optional<at::Tensor>& bias,
                                                              const FilteredLreluParams& params, bool write_mask);

// transpose false: the gradient of input for grad [N, C, out_h, out_w]
// (-> [N, C, H, W]); true: its adjoint, for grad [N, C, H, W] (-> [N, C,
// out_h, out_w]). mask: the forward's.
at::Tensor filtered_lrelu_backward_cpu(const at::Tensor& grad, const at::Tensor& mask, const at::Tensor& filter_up,
                                       const at::Tensor& filter_down, const FilteredLreluParams& params,
                                       bool transpose);

// Shared by both devices' entry points (filtered_lrelu_cpu.cpp):
// the forward's output [N, C, out_h, out_w] and, when write_mask, its mask
// [N, C, mid_h, mid_w] (uint8), uninitialised;
std::tuple<at::Tensor, at::Tensor> filtered_lrelu_empty_outputs(const at::Tensor& input, const FilteredLreluParams& p,
                                                                bool write_mask);
// the pass's filters (stage 1, stage 2) as the kernels read them: in the
// accumulation type of dtype, contiguous; the gradient of input
// (input_gradient) runs them in reverse order, flipped.
std::tuple<at::Tensor, at::Tensor> filtered_lrelu_pass_filters(const at::Tensor& filter_up,
                                                               const at::Tensor& filter_down, at::ScalarType dtype,
                                                               bool input_gradient);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> filtered_lrelu_forward_cuda(const at::Tensor& input, const at::Tensor& filter_up,
                                                               const at::Tensor& filter_down,
                                                               const std::optional<at::Tensor>& bias,
                                                               const FilteredLreluParams& params, bool write_mask);

at::Tensor filtered_lrelu_backward_cuda(const at::Tensor& grad, const at::Tensor& mask, const at::Tensor& filter_up,
                                        const at::Tensor& filter_down, const FilteredLreluParams& params,
                                        bool transpose);
#endif

} // namespace kernels
} // namespace mmops
