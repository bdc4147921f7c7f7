#pragma once
// Device kernels of tin_shift. Callers (src/tin_shift) validate the arguments
// first; these functions only move data.

#include "tin_shift/tin_shift_math.h"

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// input [N, T, C, *spatial], shift [N, G] (int32 or int64) -> [N, T, C, *spatial]
// (contiguous): frame t of channel c of clip n holds input frame t - shift[n, c / (C / G)],
// 0 where that frame is outside [0, T).
at::Tensor tin_shift_forward_cpu(const at::Tensor& input, const at::Tensor& shift, const TinShiftParams& params);

// The gradient of input: grad_output moved by -shift (frame t holds grad_output frame
// t + shift[n, g], 0 outside [0, T)).
at::Tensor tin_shift_backward_cpu(const at::Tensor& grad_output, const at::Tensor& shift, const TinShiftParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor tin_shift_forward_cuda(const at::Tensor& input, const at::Tensor& shift, const TinShiftParams& params);

at::Tensor tin_shift_backward_cuda(const at::Tensor& grad_output, const at::Tensor& shift,
                                   const TinShiftParams& params);
#endif

} // namespace kernels
} // namespace mmops
