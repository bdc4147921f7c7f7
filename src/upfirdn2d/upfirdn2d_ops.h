#pragma once
// Internal to upfirdn2d: the validation (upfirdn2d_checks.cpp), shared by the
// device entries (upfirdn2d.cpp) and the meta kernel (upfirdn2d_meta.cpp), and
// the dispatcher signature of the schema (for detail::op_handle).

#include "upfirdn2d/upfirdn2d_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

namespace mmops {

// The prefix of every upfirdn2d error message.
constexpr const char* kUpfirdn2dOp = "mmops::upfirdn2d: ";

namespace detail {

// Every argument (up = [up_x, up_y], down = [down_x, down_y], pad = [x0, x1,
// y0, y1]); works on real and fake tensors. Sizes still symbolic are -1 in the
// params (meta only).
Upfirdn2dParams check_upfirdn2d(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up,
                                c10::IntArrayRef down, c10::SymIntArrayRef pad);

// The output shape [N, C, out_h, out_w] (symbolic where input is); call after
// check_upfirdn2d.
std::vector<c10::SymInt> upfirdn2d_output_shape(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up,
                                                c10::IntArrayRef down, c10::SymIntArrayRef pad);

} // namespace detail

// upfirdn2d(Tensor input, Tensor kernel, int[2] up=1, int[2] down=1, SymInt[4] pad=0) -> Tensor
using Upfirdn2dFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::IntArrayRef, c10::IntArrayRef,
                               c10::SymIntArrayRef);

} // namespace mmops
