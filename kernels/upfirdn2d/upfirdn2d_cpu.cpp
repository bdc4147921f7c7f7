// CPU kernel of upfirdn2d (upfirdn2d_math.h), row by row with the building
// blocks of common/fir_rows_cpu.h: parallel over output rows of all planes;
// each task keeps the input rows its output rows read in a ring (RowRing),
// accumulating in float (float64 for float64).
//
// A separable kernel (separate_filter: kernel = col x row, as StyleGAN's 1-D
// filters give) is applied in two passes: every input row that an output row
// reads is filtered along x once (filter_row: the polyphase taps of `row`,
// dense multiply-adds), and an output row is the sum of those filtered rows
// times the taps of `col` (combine_rows). Output (oy, ox) is then
// sum_ky col[ky] * (sum_kx row[kx] * in[..]), ky and kx the flipped kernel's
// taps that read input, ascending. Any other kernel: an output row is the sum
// over ky ascending of the staged input rows filtered along x by kernel row ky
// (kx ascending), the per-output order of a direct 2-D sum. Outputs are
// independent: the result does not depend on the thread count.

#include "upfirdn2d/upfirdn2d_kernels.h"

#include "common/fir_rows_cpu.h"

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
using fir::cpu::RowKernels;
using fir::cpu::RowPlan;
using fir::cpu::RowRing;

template <typename scalar_t>
void forward_impl(const at::Tensor& input, const at::Tensor& kernel, at::Tensor& output, const Upfirdn2dParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const acc_t* k = kernel.const_data_ptr<acc_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const RowPlan px = fir::cpu::make_row_plan(p.in_w, p.out_w, p.up_x, p.down_x, -p.pad_x0, p.kernel_w);
  std::vector<acc_t> col, row;
  const bool separable = fir::cpu::separate_filter(k, p.kernel_h, p.kernel_w, col, row);
  const RowKernels<acc_t> kern = fir::cpu::row_kernels<acc_t>();
  const int64_t slots = (p.kernel_h + p.up_y - 1) / p.up_y; // the most input rows an output row reads
  std::vector<AxisTaps<int64_t>> y_taps(p.out_h);
  for (int64_t oy = 0; oy < p.out_h; ++oy) {
    y_taps[oy] = axis_taps<int64_t>(oy, p.up_y, p.down_y, p.pad_y0, p.kernel_h, p.in_h);
  }
  const int64_t rows = p.planes * p.out_h;
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, p.out_w)); // >= 4096 outputs a task
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    // separable: the rows filtered along x; else the staged input rows
    RowRing<acc_t> ring;
    ring.reset(slots, separable ? p.out_w : px.staged_size());
    std::vector<acc_t> staged(separable ? px.staged_size() : 0), acc(p.out_w), scratch(p.out_w), weights(slots);
    std::vector<const acc_t*> sources(slots), k_rows(slots);
    int64_t plane = begin / p.out_h, oy = begin % p.out_h;
    for (int64_t r = begin; r < end; ++r) {
      const scalar_t* in_plane = in + plane * p.in_h * p.in_w;
      const AxisTaps<int64_t>& ty = y_taps[oy];
      for (int64_t i = std::max(ring.next, ty.i0); i < ty.i0 + ty.count; ++i) {
        if (separable) {
          fir::cpu::stage_row(px, in_plane + i * p.in_w, acc_t(0), staged.data());
          kern.filter_row(px, staged.data(), row.data(), ring.row(i), false);
        } else {
          fir::cpu::stage_row(px, in_plane + i * p.in_w, acc_t(0), ring.row(i));
        }
      }
      ring.next = std::max(ring.next, ty.i0 + ty.count);
      // the flipped kernel's tap ky = k0 + j * up_y is kernel row kh - 1 - ky
      ring.window(ty.i0, ty.count, sources.data());
      if (separable) {
        for (int64_t j = 0; j < ty.count; ++j) {
          weights[j] = col[p.kernel_h - 1 - (ty.k0 + j * p.up_y)];
        }
        kern.combine_rows(sources.data(), weights.data(), ty.count, p.out_w, acc.data());
      } else {
        for (int64_t j = 0; j < ty.count; ++j) {
          k_rows[j] = k + (p.kernel_h - 1 - (ty.k0 + j * p.up_y)) * p.kernel_w;
        }
        kern.filter_rows(px, sources.data(), k_rows.data(), ty.count, acc.data());
      }
      fir::cpu::store_row(px, acc.data(), out + r * p.out_w, scratch.data());
      if (++oy == p.out_h) { // the next plane: no rows in the ring
        oy = 0;
        ++plane;
        ring.next = 0;
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
