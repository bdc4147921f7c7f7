// CPU kernel of upfirdn2d (upfirdn2d_math.h): parallel over output rows of
// all planes; each output sums only the taps that read input (the run of
// AxisTaps per axis), in the order ky, then kx, accumulating in float (float64
// for float64). Without downsampling along x (upsampling, blur) a row is
// computed phase by phase of up_x as dense axpys (phase_row), else by a gather
// per output (gather_row); both add in the same order. Outputs are
// independent: the result does not depend on the thread count.

#include "upfirdn2d/upfirdn2d_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace upfirdn2d_math;

// One output row by the gather: each output sums its taps (ky, then kx).
template <typename scalar_t>
void gather_row(const scalar_t* in_plane, const at::opmath_type<scalar_t>* k, const AxisTaps<int64_t>& ty,
                const std::vector<AxisTaps<int64_t>>& x_taps, const Upfirdn2dParams& p, scalar_t* out_row) {
  using acc_t = at::opmath_type<scalar_t>;
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

// One output row when down_x == 1, phase by phase of up_x: the outputs ox = r + q * up_x of
// phase r read input q + base_r + j through tap k0_r + j * up_x, so each tap is a dense axpy
// over q (acc: the row split by phase). Every output still sums its taps in the order ky, then
// kx, as the gather does.
template <typename scalar_t>
void phase_row(const scalar_t* in_plane, const at::opmath_type<scalar_t>* k, const AxisTaps<int64_t>& ty,
               const Upfirdn2dParams& p, std::vector<at::opmath_type<scalar_t>>& acc, scalar_t* out_row) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t up = p.up_x;
  const fir::PhaseSplit by_up{p.out_w, up};
  std::fill(acc.begin(), acc.end(), acc_t(0));
  for (int64_t jy = 0; jy < ty.count; ++jy) {
    const scalar_t* in_row = in_plane + (ty.i0 + jy) * p.in_w;
    const acc_t* k_row = k + (p.kernel_h - 1 - (ty.k0 + jy * p.up_y)) * p.kernel_w + (p.kernel_w - 1);
    for (int64_t r = 0; r < std::min(up, p.out_w); ++r) {
      const fir::FirPhase<int64_t> phase = fir::fir_phase<int64_t>(r - p.pad_x0, up);
      const int64_t base = phase.i0;
      const int64_t n = by_up.count(r);
      acc_t* a_r = acc.data() + by_up.begin(r);
      for (int64_t kx = phase.k0, j = 0; kx < p.kernel_w; kx += up, ++j) {
        const acc_t w = k_row[-kx];
        const int64_t q0 = std::max<int64_t>(0, -(base + j));
        const int64_t q1 = std::min<int64_t>(n, p.in_w - (base + j));
        const scalar_t* in_j = in_row + base + j;
        for (int64_t q = q0; q < q1; ++q) {
          a_r[q] += static_cast<acc_t>(in_j[q]) * w;
        }
      }
    }
  }
  for (int64_t ox = 0; ox < p.out_w; ++ox) {
    out_row[ox] = static_cast<scalar_t>(acc[by_up.index(ox)]);
  }
}

template <typename scalar_t>
void forward_impl(const at::Tensor& input, const at::Tensor& kernel, at::Tensor& output, const Upfirdn2dParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const acc_t* k = kernel.const_data_ptr<acc_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t rows = p.planes * p.out_h;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, p.out_w));
  const bool by_phase = p.down_x == 1;
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<AxisTaps<int64_t>> x_taps(by_phase ? 0 : p.out_w);
    for (int64_t ox = 0; ox < static_cast<int64_t>(x_taps.size()); ++ox) {
      x_taps[ox] = axis_taps<int64_t>(ox, p.up_x, p.down_x, p.pad_x0, p.kernel_w, p.in_w);
    }
    std::vector<acc_t> acc(by_phase ? p.out_w : 0);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t plane = r / p.out_h;
      const int64_t oy = r % p.out_h;
      const AxisTaps<int64_t> ty = axis_taps<int64_t>(oy, p.up_y, p.down_y, p.pad_y0, p.kernel_h, p.in_h);
      const scalar_t* in_plane = in + plane * p.in_h * p.in_w;
      if (by_phase) {
        phase_row(in_plane, k, ty, p, acc, out + r * p.out_w);
      } else {
        gather_row(in_plane, k, ty, x_taps, p, out + r * p.out_w);
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
