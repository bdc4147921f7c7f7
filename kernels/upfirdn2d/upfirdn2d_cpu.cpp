// CPU kernel of upfirdn2d (upfirdn2d_math.h): parallel over output rows of
// all planes; each output sums only the taps that read input (the run of
// AxisTaps per axis; the x runs of a row are computed once per task), in the
// order ky, then kx, accumulating in float (float64 for float64). Outputs are
// independent: the result does not depend on the thread count.

#include "upfirdn2d/upfirdn2d_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace upfirdn2d_math;

template <typename scalar_t>
void forward_impl(const at::Tensor& input, const at::Tensor& kernel, at::Tensor& output, const Upfirdn2dParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const acc_t* k = kernel.const_data_ptr<acc_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t rows = p.planes * p.out_h;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, p.out_w));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<AxisTaps<int64_t>> x_taps(p.out_w);
    for (int64_t ox = 0; ox < p.out_w; ++ox) {
      x_taps[ox] = axis_taps<int64_t>(ox, p.up_x, p.down_x, p.pad_x0, p.kernel_w, p.in_w);
    }
    for (int64_t r = begin; r < end; ++r) {
      const int64_t plane = r / p.out_h;
      const int64_t oy = r % p.out_h;
      const AxisTaps<int64_t> ty = axis_taps<int64_t>(oy, p.up_y, p.down_y, p.pad_y0, p.kernel_h, p.in_h);
      const scalar_t* in_plane = in + plane * p.in_h * p.in_w;
      scalar_t* out_row = out + r * p.out_w;
      for (int64_t ox = 0; ox < p.out_w; ++ox) {
        const AxisTaps<int64_t>& tx = x_taps[ox];
        acc_t acc = 0;
        for (int64_t jy = 0; jy < ty.count; ++jy) {
          const scalar_t* in_row = in_plane + (ty.i0 + jy) * p.in_w + tx.i0;
          // the flipped kernel's tap (ky, kx) is kernel[kh - 1 - ky][kw - 1 - kx]
          const acc_t* k_row = k + (p.kernel_h - 1 - (ty.k0 + jy * p.up_y)) * p.kernel_w + (p.kernel_w - 1 - tx.k0);
          for (int64_t jx = 0; jx < tx.count; ++jx) {
            acc += static_cast<acc_t>(in_row[jx]) * k_row[-jx * p.up_x];
          }
        }
        out_row[ox] = static_cast<scalar_t>(acc);
      }
    }
  });
}

} // namespace

at::Tensor upfirdn2d_forward_cpu(const at::Tensor& input_, const at::Tensor& kernel_, const Upfirdn2dParams& p) {
  const at::Tensor input = input_.contiguous();
  at::Tensor output = at::empty({input.size(0), input.size(1), p.out_h, p.out_w}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::upfirdn2d (CPU)", [&] {
    const at::Tensor kernel = kernel_.to(at::toOpMathType(input.scalar_type())).contiguous();
    forward_impl<scalar_t>(input, kernel, output, p);
  });
  return output;
}

} // namespace kernels
} // namespace mmops
