#pragma once
// Internal to filtered_lrelu: the validation (filtered_lrelu_checks.cpp),
// shared by the device entries (filtered_lrelu.cpp), the meta kernels
// (filtered_lrelu_meta.cpp) and the autograd (filtered_lrelu_autograd.cpp);
// the dispatcher signature of each schema (for detail::op_handle).

#include "filtered_lrelu/filtered_lrelu_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace mmops {

// The prefix of every filtered_lrelu error message.
constexpr const char* kFilteredLreluOp = "mmops::filtered_lrelu: ";

namespace detail {

// The sizes a call produces (symbolic where the input's are): the
// intermediate grid [mid_h, mid_w] (the mask's) and the output [out_h, out_w].
struct FilteredLreluShape {
  c10::SymInt batch, channels, in_h, in_w, mid_h, mid_w, out_h, out_w;
};

// Every argument of a forward call (padding = [x0, x1, y0, y1]); works on
// real and fake tensors. Sizes still symbolic are -1 in the params (meta only).
FilteredLreluParams check_filtered_lrelu_forward(const at::Tensor& input, const at::Tensor& filter_up,
                                                 const at::Tensor& filter_down, const std::optional<at::Tensor>& bias,
                                                 int64_t up, int64_t down, c10::SymIntArrayRef padding, double gain,
                                                 double slope, std::optional<double> clamp, FilteredLreluShape* shape);

// The arguments of a backward call: grad [N, C, out_h, out_w] (transpose
// false) or [N, C, H, W] (true), mask [N, C, mid_h, mid_w] uint8, input_size
// = the forward input's [H, W].
FilteredLreluParams check_filtered_lrelu_backward(const at::Tensor& grad, const at::Tensor& mask,
                                                  const at::Tensor& filter_up, const at::Tensor& filter_down,
                                                  int64_t up, int64_t down, c10::SymIntArrayRef padding, double gain,
                                                  double slope, c10::SymIntArrayRef input_size, bool transpose,
                                                  FilteredLreluShape* shape);

} // namespace detail

// filtered_lrelu(Tensor input, Tensor filter_up, Tensor filter_down, Tensor? bias=None, int up=1, int down=1,
//                SymInt[4] padding=0, float gain=sqrt(2), float slope=0.2, float? clamp=None) -> Tensor
using FilteredLreluFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                   const std::optional<at::Tensor>&, int64_t, int64_t, c10::SymIntArrayRef, double,
                                   double, std::optional<double>);

// _filtered_lrelu_forward(<the same>) -> (Tensor output, Tensor mask)
using FilteredLreluForwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                  const at::Tensor&, const std::optional<at::Tensor>&,
                                                                  int64_t, int64_t, c10::SymIntArrayRef, double, double,
                                                                  std::optional<double>);

// _filtered_lrelu_backward(Tensor grad, Tensor mask, Tensor filter_up, Tensor filter_down, int up, int down,
//                          SymInt[4] padding, float gain, float slope, SymInt[2] input_size,
//                          bool transpose=False) -> Tensor
using FilteredLreluBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           int64_t, int64_t, c10::SymIntArrayRef, double, double, c10::SymIntArrayRef,
                                           bool);

} // namespace mmops
