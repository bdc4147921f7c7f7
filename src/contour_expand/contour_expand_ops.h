#pragma once
// Internal pieces of contour_expand shared by its registration
// (contour_expand.cpp), validation (contour_expand_checks.cpp) and meta kernel.

#include "contour_expand/contour_expand_kernels.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

constexpr const char* kContourExpandOp = "mmops::contour_expand: ";

// Signature of the public schema, for detail::op_handle (the C++ API).
using ContourExpandFn = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, bool);

namespace detail {

// Every argument, on real and fake tensors (no data access); sizes may be symbolic.
ContourExpandParams check_contour_expand(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                                         int64_t min_kernel_area, int64_t kernel_num, bool progressive);

// The values of internal_kernel_label in [0, kernel_num] (reads the data).
void check_contour_expand_labels(const at::Tensor& internal_kernel_label, int64_t kernel_num);

} // namespace detail
} // namespace mmops
