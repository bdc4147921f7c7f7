// mmops::upfirdn2d: the schema, the device entries (CPU/CUDA registration) and
// the public C++ API. Validation is in upfirdn2d_checks.cpp, kernels in
// kernels/upfirdn2d, the meta function in upfirdn2d_meta.cpp and autograd (to
// any order: the backward is upfirdn2d again) in upfirdn2d_autograd.cpp.

#include "upfirdn2d/upfirdn2d_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/upfirdn2d.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  // up = [up_x, up_y], down = [down_x, down_y], pad = [pad_x0, pad_x1, pad_y0, pad_y1]
  // (mmcv's order); the pads shape the output and the backward computes them
  // from sizes: SymInt.
  define_op(m, "upfirdn2d(Tensor input, Tensor kernel, int[2] up=1, int[2] down=1, SymInt[4] pad=0) -> Tensor");
}

namespace mmops {
namespace {

// The device entry: validation (as the meta kernel), then the kernel (CPU or CUDA).
template <auto Kernel>
at::Tensor upfirdn2d_entry(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up,
                           c10::IntArrayRef down, c10::SymIntArrayRef pad) {
  const Upfirdn2dParams p = detail::check_upfirdn2d(input, kernel, up, down, pad);
  return Kernel(input, kernel, p);
}

} // namespace

at::Tensor upfirdn2d(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up, c10::IntArrayRef down,
                     c10::IntArrayRef pad) {
  static const auto op = detail::op_handle<Upfirdn2dFn>("mmops::upfirdn2d");
  return op.call(input, kernel, up, down, c10::fromIntArrayRefSlow(pad));
}

} // namespace mmops

#define MMOPS_UPFIRDN2D_ENTRIES(m, device) m.impl("upfirdn2d", &upfirdn2d_entry<kernels::upfirdn2d_forward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_UPFIRDN2D_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "upfirdn2d")
