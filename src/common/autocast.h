#pragma once
// Autocast (torch.autocast on CPU or CUDA): mmops' kernels compute in the
// dtype of their inputs, so under autocast an op runs with its float16 /
// bfloat16 tensor arguments cast to float32 (float64 ones stay as they are), as
// torchvision's autocast kernels of roi_align, roi_pool and deform_conv2d do.
// Mixed inputs (float16 features with float32 rois) then work as in eager
// float32. A family registers its public ops in its <family>.cpp:
//   MMOPS_REGISTER_AUTOCAST(kDataDtype, "roi_align", "multi_level_roi_align")

#include <torch/library.h>

#include <initializer_list>

namespace mmops {
namespace detail {

enum class AutocastOutput {
  // Floating outputs in the dtype of the op's first floating tensor argument
  // (its data: input, boxes, value), as torchvision returns input's dtype.
  kDataDtype,
  // Floating outputs stay float32: losses, as torch.autocast's float32 ops.
  kFloat32,
};

// The boxed autocast kernel of `output`, for one op.
torch::CppFunction autocast_kernel(AutocastOutput output);

// Registers autocast_kernel(output) for `ops` in m (an AutocastCPU or AutocastCUDA block).
void register_autocast(torch::Library& m, AutocastOutput output, std::initializer_list<const char*> ops);

} // namespace detail
} // namespace mmops

#define MMOPS_REGISTER_AUTOCAST(output, ...)                                                   \
  TORCH_LIBRARY_IMPL(mmops, AutocastCPU, m) {                                                  \
    mmops::detail::register_autocast(m, mmops::detail::AutocastOutput::output, {__VA_ARGS__}); \
  }                                                                                            \
  TORCH_LIBRARY_IMPL(mmops, AutocastCUDA, m) {                                                 \
    mmops::detail::register_autocast(m, mmops::detail::AutocastOutput::output, {__VA_ARGS__}); \
  }
