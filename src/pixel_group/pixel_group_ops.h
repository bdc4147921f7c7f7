#pragma once
// Internal pieces of pixel_group shared by its registration (pixel_group.cpp),
// validation (pixel_group_checks.cpp) and meta kernel.

#include "pixel_group/pixel_group_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <tuple>

namespace mmops {

constexpr const char* kPixelGroupOp = "mmops::pixel_group: ";

// Signature of the public schema, for detail::op_handle (the C++ API).
using PixelGroupFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                    const at::Tensor&, const at::Tensor&,
                                                                    const at::Tensor&, c10::SymInt, double);

namespace detail {

// Every argument, on real and fake tensors (no data access); sizes may be
// symbolic (kernel_region_num in the params: -1 while symbolic).
PixelGroupParams check_pixel_group(const at::Tensor& score, const at::Tensor& mask, const at::Tensor& embedding,
                                   const at::Tensor& kernel_label, const at::Tensor& kernel_contour,
                                   const c10::SymInt& kernel_region_num, double distance_threshold);

// The values of kernel_label: 0, or in [1, kernel_region_num) (reads the data).
void check_pixel_group_labels(const at::Tensor& kernel_label, int64_t kernel_region_num);

} // namespace detail
} // namespace mmops
