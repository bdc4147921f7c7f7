// CPU kernels of filtered_lrelu (filtered_lrelu_math.h): every pass is one
// fused pass per plane, parallel over the planes (N * C): the plane's whole
// intermediate grid in a task-local buffer (stage 1 and the pointwise step),
// then the outputs from it (stage 2). Sums run over the taps that read the
// signal only, in the order ky, then kx, accumulating in float (float64 for
// float64); the loops are tap-major (one axpy along a row per filter tap) and
// rows are kept split by phase (PhaseSplit), so every axpy is dense and
// vectorises. Planes are independent: the result does not depend on
// the thread count.

#include "filtered_lrelu/filtered_lrelu_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/flip.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace filtered_lrelu_math;

enum class Pointwise {
  kActivate,          // the forward
  kActivateAndRecord, // the forward, writing the mask
  kMasked,            // the backward passes: times the recorded derivative
};

template <typename scalar_t>
struct Pass {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* z = nullptr;
  const scalar_t* bias = nullptr; // [C] or null
  const acc_t* k1 = nullptr;      // [ay.k1, ax.k1]
  const acc_t* k2 = nullptr;      // [ay.k2, ax.k2]
  uint8_t* mask = nullptr;        // [planes, ay.mid, ax.mid]: written or read
  scalar_t* out = nullptr;
  PassAxis ax, ay;
  int64_t planes = 0, channels = 1;
  Pointwise mode = Pointwise::kActivate;
  acc_t gain = 1, slope = 0, clamp = -1;
};

// The samples j in [lo, hi] with j * step + offset in [0, size) (j in [0, count)).
struct Range {
  int64_t lo, hi;
};

inline Range axis_range(int64_t step, int64_t offset, int64_t size, int64_t count) {
  // j * step + offset >= 0 and <= size - 1
  return {std::max<int64_t>(0, -floor_div<int64_t>(offset, step)),
          std::min<int64_t>(count - 1, floor_div<int64_t>(size - 1 - offset, step))};
}

using fir::PhaseSplit;

// Stage 1 and the pointwise step of one plane into mid [ay.mid, ax.mid], each row split by
// ax.down (stage 2 reads it so). A row accumulates, phase by phase of ax.up, one dense axpy per
// filter tap (ky, then kx ascending: every sample sums its taps in that order), then the
// pointwise step moves it into mid.
template <typename scalar_t>
void upsample_filter_plane(const Pass<scalar_t>& p, int64_t plane, std::vector<at::opmath_type<scalar_t>>& z_row,
                           std::vector<at::opmath_type<scalar_t>>& acc, std::vector<at::opmath_type<scalar_t>>& mid) {
  using acc_t = at::opmath_type<scalar_t>;
  const PassAxis& ax = p.ax;
  const PassAxis& ay = p.ay;
  const scalar_t* z = p.z + plane * ay.in * ax.in;
  const acc_t b = p.bias != nullptr ? static_cast<acc_t>(p.bias[plane % p.channels]) : acc_t(0);
  uint8_t* mask = p.mask != nullptr ? p.mask + plane * ay.mid * ax.mid : nullptr;
  const PhaseSplit by_up{ax.mid, ax.up}, by_down{ax.mid, ax.down};
  for (int64_t my = 0; my < ay.mid; ++my) {
    const Taps<int64_t> ty = axis_taps<int64_t>(my + ay.off1, ay.up, ay.k1, ay.in);
    std::fill(acc.begin(), acc.end(), acc_t(0));
    for (int64_t jy = 0; jy < ty.count; ++jy) {
      const scalar_t* in_row = z + (ty.i0 + jy) * ax.in;
      for (int64_t c = 0; c < ax.in; ++c) {
        z_row[c] = static_cast<acc_t>(in_row[c]) + b;
      }
      // the flipped filter's tap (ky, kx) is k1[k1_h - 1 - ky][k1_w - 1 - kx]
      const acc_t* k_row = p.k1 + (ay.k1 - 1 - (ty.k0 + jy * ay.up)) * ax.k1;
      for (int64_t r = 0; r < std::min(ax.up, ax.mid); ++r) {
        // sample r + q * up reads input c = q + base + j through tap kx = kx0 + j * up
        const fir::FirPhase<int64_t> phase = fir::fir_phase<int64_t>(r + ax.off1, ax.up);
        const int64_t base = phase.i0;
        const int64_t n = by_up.count(r);
        acc_t* a_r = acc.data() + by_up.begin(r);
        for (int64_t kx = phase.k0, j = 0; kx < ax.k1; kx += ax.up, ++j) {
          const acc_t w = k_row[ax.k1 - 1 - kx];
          const int64_t q0 = std::max<int64_t>(0, -(base + j));
          const int64_t q1 = std::min<int64_t>(n, ax.in - (base + j));
          const acc_t* z_j = z_row.data() + base + j;
          for (int64_t q = q0; q < q1; ++q) {
            a_r[q] += z_j[q] * w;
          }
        }
      }
    }
    acc_t* t_row = mid.data() + my * ax.mid;
    uint8_t* m_row = mask != nullptr ? mask + my * ax.mid : nullptr;
    for (int64_t mx = 0; mx < ax.mid; ++mx) {
      acc_t v = acc[by_up.index(mx)];
      if (p.mode == Pointwise::kMasked) {
        v *= mask_factor<acc_t>(m_row[mx], p.gain, p.slope);
      } else {
        uint8_t code = 0;
        v = lrelu_gain_clamp<acc_t>(v, p.gain, p.slope, p.clamp, code);
        if (p.mode == Pointwise::kActivateAndRecord) {
          m_row[mx] = code;
        }
      }
      t_row[by_down.index(mx)] = v;
    }
  }
}

// Stage 2 of one plane from mid (rows split by ax.down), one dense axpy per filter tap as
// stage 1 (acc_row: one output row in acc_t).
template <typename scalar_t>
void filter_downsample_plane(const Pass<scalar_t>& p, int64_t plane, const std::vector<at::opmath_type<scalar_t>>& mid,
                             std::vector<at::opmath_type<scalar_t>>& acc_row) {
  using acc_t = at::opmath_type<scalar_t>;
  const PassAxis& ax = p.ax;
  const PassAxis& ay = p.ay;
  const PhaseSplit by_down{ax.mid, ax.down};
  scalar_t* out = p.out + plane * ay.out * ax.out;
  for (int64_t oy = 0; oy < ay.out; ++oy) {
    const Taps<int64_t> ty = axis_taps<int64_t>(oy * ay.down + ay.off2, 1, ay.k2, ay.mid);
    std::fill(acc_row.begin(), acc_row.end(), acc_t(0));
    for (int64_t jy = 0; jy < ty.count; ++jy) {
      const acc_t* t_row = mid.data() + (ty.i0 + jy) * ax.mid;
      const acc_t* k_row = p.k2 + (ay.k2 - 1 - (ty.k0 + jy)) * ax.k2;
      for (int64_t kx = 0; kx < ax.k2; ++kx) {
        const acc_t w = k_row[ax.k2 - 1 - kx];
        // output ox reads mid position ox * down + off2 + kx: phase s, index ox + base in it
        const int64_t offset = ax.off2 + kx;
        const int64_t s = floor_mod<int64_t>(offset, ax.down), base = floor_div<int64_t>(offset, ax.down);
        const Range r = axis_range(ax.down, offset, ax.mid, ax.out);
        const acc_t* t_s = t_row + by_down.begin(s) + base;
        for (int64_t ox = r.lo; ox <= r.hi; ++ox) {
          acc_row[ox] += t_s[ox] * w;
        }
      }
    }
    for (int64_t ox = 0; ox < ax.out; ++ox) {
      out[oy * ax.out + ox] = static_cast<scalar_t>(acc_row[ox]);
    }
  }
}

template <typename scalar_t>
void run_pass(const Pass<scalar_t>& p) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, p.planes, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> mid(p.ay.mid * p.ax.mid), z_row(p.ax.in), acc(p.ax.mid), acc_row(p.ax.out);
    for (int64_t plane = begin; plane < end; ++plane) {
      upsample_filter_plane(p, plane, z_row, acc, mid);
      filter_downsample_plane(p, plane, mid, acc_row);
    }
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_empty_outputs(const at::Tensor& input, const FilteredLreluParams& p,
                                                                bool write_mask) {
  at::Tensor output = at::empty({p.batch, p.channels, p.out_h, p.out_w}, input.options());
  at::Tensor mask;
  if (write_mask) {
    mask = at::empty({p.batch, p.channels, p.mid_h, p.mid_w}, input.options().dtype(at::kByte));
  }
  return {output, mask};
}

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_pass_filters(const at::Tensor& filter_up,
                                                               const at::Tensor& filter_down, at::ScalarType dtype,
                                                               bool input_gradient) {
  const auto prepare = [&](const at::Tensor& filter) {
    const at::Tensor f = filter.to(at::toOpMathType(dtype));
    return (input_gradient ? at::flip(f, {0, 1}) : f).contiguous();
  };
  return input_gradient ? std::make_tuple(prepare(filter_down), prepare(filter_up))
                        : std::make_tuple(prepare(filter_up), prepare(filter_down));
}

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_forward_cpu(const at::Tensor& input_, const at::Tensor& filter_up,
                                                              const at::Tensor& filter_down,
                                                              const std::optional<at::Tensor>& bias_,
                                                              const FilteredLreluParams& p, bool write_mask) {
  const at::Tensor input = input_.contiguous();
  at::Tensor output, mask;
  std::tie(output, mask) = filtered_lrelu_empty_outputs(input, p, write_mask);
  if (p.planes == 0) {
    return {output, mask};
  }
  const at::Tensor bias = bias_.has_value() ? bias_->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::filtered_lrelu (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto [k1, k2] = filtered_lrelu_pass_filters(filter_up, filter_down, input.scalar_type(), false);
    Pass<scalar_t> pass;
    pass.z = input.const_data_ptr<scalar_t>();
    pass.bias = bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr;
    pass.k1 = k1.const_data_ptr<acc_t>();
    pass.k2 = k2.const_data_ptr<acc_t>();
    pass.mask = write_mask ? mask.mutable_data_ptr<uint8_t>() : nullptr;
    pass.out = output.mutable_data_ptr<scalar_t>();
    pass.ax = forward_axis(p, false);
    pass.ay = forward_axis(p, true);
    pass.planes = p.planes;
    pass.channels = p.channels;
    pass.mode = write_mask ? Pointwise::kActivateAndRecord : Pointwise::kActivate;
    pass.gain = static_cast<acc_t>(p.gain);
    pass.slope = static_cast<acc_t>(p.slope);
    pass.clamp = static_cast<acc_t>(p.clamp);
    run_pass(pass);
  });
  return {output, mask};
}

at::Tensor filtered_lrelu_backward_cpu(const at::Tensor& grad_, const at::Tensor& mask_, const at::Tensor& filter_up,
                                       const at::Tensor& filter_down, const FilteredLreluParams& p, bool transpose) {
  const at::Tensor grad = grad_.contiguous();
  const at::Tensor mask = mask_.contiguous();
  const PassAxis ax = transpose ? forward_axis(p, false) : backward_axis(p, false);
  const PassAxis ay = transpose ? forward_axis(p, true) : backward_axis(p, true);
  at::Tensor result = at::empty({p.batch, p.channels, ay.out, ax.out}, grad.options());
  if (p.planes == 0) {
    return result;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::_filtered_lrelu_backward (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const auto [k1, k2] = filtered_lrelu_pass_filters(filter_up, filter_down, grad.scalar_type(), !transpose);
        Pass<scalar_t> pass;
        pass.z = grad.const_data_ptr<scalar_t>();
        pass.k1 = k1.const_data_ptr<acc_t>();
        pass.k2 = k2.const_data_ptr<acc_t>();
        pass.mask = const_cast<uint8_t*>(mask.const_data_ptr<uint8_t>()); // read only (kMasked)
        pass.out = result.mutable_data_ptr<scalar_t>();
        pass.ax = ax;
        pass.ay = ay;
        pass.planes = p.planes;
        pass.channels = p.channels;
        pass.mode = Pointwise::kMasked;
        pass.gain = static_cast<acc_t>(p.gain);
        pass.slope = static_cast<acc_t>(p.slope);
        run_pass(pass);
      });
  return result;
}

} // namespace kernels
} // namespace mmops
