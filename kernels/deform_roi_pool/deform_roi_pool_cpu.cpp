// CPU kernels of deform_roi_pool.
//
// Forward: parallel over (roi, bin); each sample's taps are found once and
// applied to every channel. Backward: the input gradient in parallel over
// (image, channel) planes, each walking all rois, so no two threads add into
// the same value (no atomics, deterministic); the offset gradient is a gather
// in parallel over (roi, bin).

#include "deform_roi_pool/deform_roi_pool_kernels.h"
#include "deform_roi_pool/deform_roi_pool_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace deform_roi_pool_math;

// What every kernel needs about the tensors (contiguous, NCHW).
template <typename scalar_t>
struct Views {
  const scalar_t* rois;
  const scalar_t* offset; // nullptr: no offset
  int64_t batch, channels, height, width, pooled_h, pooled_w;
};

// Box and shifted origin of bin `bin` of roi k.
template <typename acc_t, typename scalar_t>
struct BinGeometry {
  DeformBox<acc_t> box;
  BinOrigin<acc_t> origin;
};

template <typename acc_t, typename scalar_t>
BinGeometry<acc_t, scalar_t> bin_geometry(const Views<scalar_t>& v, const DeformRoIPoolParams& p, int64_t k,
                                          int64_t bin) {
  acc_t roi[5];
  for (int i = 0; i < 5; ++i) {
    roi[i] = static_cast<acc_t>(v.rois[k * 5 + i]);
  }
  BinGeometry<acc_t, scalar_t> g;
  g.box = make_box<acc_t>(roi, v.batch, static_cast<acc_t>(p.spatial_scale), v.pooled_h, v.pooled_w, p.sampling_ratio);
  const int64_t bins = v.pooled_h * v.pooled_w;
  acc_t dx = acc_t(0), dy = acc_t(0);
  if (v.offset != nullptr) {
    dx = static_cast<acc_t>(v.offset[(k * 2) * bins + bin]);
    dy = static_cast<acc_t>(v.offset[(k * 2 + 1) * bins + bin]);
  }
  g.origin = bin_origin(g.box, bin / v.pooled_w, bin % v.pooled_w, dx, dy, static_cast<acc_t>(p.gamma));
  return g;
}

template <typename scalar_t>
Views<scalar_t> views_of(const at::Tensor& input, const at::Tensor& rois, const at::Tensor& offset, int64_t pooled_h,
                         int64_t pooled_w) {
  return {rois.const_data_ptr<scalar_t>(),
          offset.defined() ? offset.const_data_ptr<scalar_t>() : nullptr,
          input.size(0),
          input.size(1),
          input.size(2),
          input.size(3),
          pooled_h,
          pooled_w};
}

template <typename scalar_t>
void forward_impl(const at::Tensor& input, const at::Tensor& rois, const at::Tensor& offset, at::Tensor& output,
                  const DeformRoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const Views<scalar_t> v = views_of<scalar_t>(input, rois, offset, p.pooled_height, p.pooled_width);
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t bins = v.pooled_h * v.pooled_w, plane = v.height * v.width, C = v.channels;
  at::parallel_for(0, output.size(0) * bins, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> sum(static_cast<size_t>(C));
    for (int64_t kb = begin; kb < end; ++kb) {
      const int64_t k = kb / bins, bin = kb % bins;
      const auto g = bin_geometry<acc_t>(v, p, k, bin);
      std::fill(sum.begin(), sum.end(), acc_t(0));
      const int count = g.box.grid_h * g.box.grid_w;
      const scalar_t* image = in + g.box.batch * C * plane;
      for (int iy = 0; iy < g.box.grid_h; ++iy) {
        for (int ix = 0; ix < g.box.grid_w; ++ix) {
          const SampleTaps<acc_t> s = sample_taps(g.box, g.origin, iy, ix, v.height, v.width);
          if (!(s.ty.valid && s.tx.valid)) {
            continue;
          }
          for (int64_t c = 0; c < C; ++c) {
            const scalar_t* map = image + c * plane;
            sum[c] += blend(s, load_quad(s, v.width, [&](int64_t i) { return static_cast<acc_t>(map[i]); }));
          }
        }
      }
      for (int64_t c = 0; c < C; ++c) {
        out[(k * C + c) * bins + bin] = static_cast<scalar_t>(count > 0 ? sum[c] / static_cast<acc_t>(count) : 0);
      }
    }
  });
}

// grad_input: one (image, channel) plane per task, all rois of that image.
template <typename scalar_t>
void grad_input_impl(const at::Tensor& grad_output, const Views<scalar_t>& v, at::Tensor& grad_input,
                     const DeformRoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
  const int64_t bins = v.pooled_h * v.pooled_w, plane = v.height * v.width, C = v.channels;
  const int64_t K = grad_output.size(0);
  at::parallel_for(0, v.batch * C, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(static_cast<size_t>(plane));
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / C, c = nc % C;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t bin = 0; bin < bins; ++bin) {
          const auto g = bin_geometry<acc_t>(v, p, k, bin);
          const int count = g.box.grid_h * g.box.grid_w;
          if (g.box.batch != n || count == 0) {
            break; // the roi's other bins share its batch and grid
          }
          const acc_t share = static_cast<acc_t>(go[(k * C + c) * bins + bin]) / static_cast<acc_t>(count);
          for (int iy = 0; iy < g.box.grid_h; ++iy) {
            for (int ix = 0; ix < g.box.grid_w; ++ix) {
              const SampleTaps<acc_t> s = sample_taps(g.box, g.origin, iy, ix, v.height, v.width);
              if (!(s.ty.valid && s.tx.valid)) {
                continue;
              }
              const int64_t r0 = int64_t(s.ty.lo) * v.width, r1 = int64_t(s.ty.hi) * v.width;
              acc[r0 + s.tx.lo] += share * s.ty.w_lo * s.tx.w_lo;
              acc[r0 + s.tx.hi] += share * s.ty.w_lo * s.tx.w_hi;
              acc[r1 + s.tx.lo] += share * s.ty.w_hi * s.tx.w_lo;
              acc[r1 + s.tx.hi] += share * s.ty.w_hi * s.tx.w_hi;
            }
          }
        }
      }
      scalar_t* dst = gi + nc * plane;
      for (int64_t i = 0; i < plane; ++i) {
        dst[i] = static_cast<scalar_t>(acc[i]);
      }
    }
  });
}

// grad_offset: a gather per (roi, bin) over channels and samples.
template <typename scalar_t>
void grad_offset_impl(const at::Tensor& grad_output, const at::Tensor& input, const Views<scalar_t>& v,
                      at::Tensor& grad_offset, const DeformRoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  scalar_t* gof = grad_offset.mutable_data_ptr<scalar_t>();
  const int64_t bins = v.pooled_h * v.pooled_w, plane = v.height * v.width, C = v.channels;
  const acc_t gamma = static_cast<acc_t>(p.gamma);
  at::parallel_for(0, grad_output.size(0) * bins, 1, [&](int64_t begin, int64_t end) {
    for (int64_t kb = begin; kb < end; ++kb) {
      const int64_t k = kb / bins, bin = kb % bins;
      const auto g = bin_geometry<acc_t>(v, p, k, bin);
      const int count = g.box.grid_h * g.box.grid_w;
      acc_t sx = acc_t(0), sy = acc_t(0);
      for (int iy = 0; iy < g.box.grid_h; ++iy) {
        for (int ix = 0; ix < g.box.grid_w; ++ix) {
          const SampleTaps<acc_t> s = sample_taps(g.box, g.origin, iy, ix, v.height, v.width);
          if (!(s.ty.valid && s.tx.valid) || (s.sx == acc_t(0) && s.sy == acc_t(0))) {
            continue;
          }
          for (int64_t c = 0; c < C; ++c) {
            const scalar_t* map = in + (g.box.batch * C + c) * plane;
            const Quad<acc_t> q = load_quad(s, v.width, [&](int64_t i) { return static_cast<acc_t>(map[i]); });
            const acc_t gc = static_cast<acc_t>(go[(k * C + c) * bins + bin]);
            sx += gc * d_dx(s, q);
            sy += gc * d_dy(s, q);
          }
        }
      }
      // count == 0: also a box of non-finite size, whose product would be NaN
      const acc_t scale = count > 0 ? gamma / static_cast<acc_t>(count) : acc_t(0);
      gof[(k * 2) * bins + bin] = static_cast<scalar_t>(count > 0 ? sx * scale * g.box.roi_w : acc_t(0));
      gof[(k * 2 + 1) * bins + bin] = static_cast<scalar_t>(count > 0 ? sy * scale * g.box.roi_h : acc_t(0));
    }
  });
}

} // namespace

at::Tensor deform_roi_pool_forward_cpu(const at::Tensor& input_, const at::Tensor& rois_,
                                       const std::optional<at::Tensor>& offset_, const DeformRoIPoolParams& params) {
  const at::Tensor input = input_.contiguous(), rois = rois_.contiguous();
  const at::Tensor offset = offset_.has_value() ? offset_->contiguous() : at::Tensor();
  at::Tensor output =
      at::empty({rois.size(0), input.size(1), params.pooled_height, params.pooled_width}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::deform_roi_pool (CPU)",
                                  [&] { forward_impl<scalar_t>(input, rois, offset, output, params); });
  return output;
}

std::tuple<at::Tensor, at::Tensor> deform_roi_pool_backward_cpu(const at::Tensor& grad_output_,
                                                                const at::Tensor& input_, const at::Tensor& rois_,
                                                                const std::optional<at::Tensor>& offset_,
                                                                const DeformRoIPoolParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous(), input = input_.contiguous(), rois = rois_.contiguous();
  const at::Tensor offset = offset_.has_value() ? offset_->contiguous() : at::Tensor();
  at::Tensor grad_input = at::zeros(input.sizes(), input.options());
  at::Tensor grad_offset =
      offset.defined() ? at::zeros(offset.sizes(), offset.options()) : at::empty({0}, input.options());
  if (grad_output.numel() == 0 || input.numel() == 0) {
    return {grad_input, grad_offset};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::deform_roi_pool backward (CPU)", [&] {
        const Views<scalar_t> v = views_of<scalar_t>(input, rois, offset, params.pooled_height, params.pooled_width);
        grad_input_impl<scalar_t>(grad_output, v, grad_input, params);
        if (offset.defined()) {
          grad_offset_impl<scalar_t>(grad_output, input, v, grad_offset, params);
        }
      });
  return {grad_input, grad_offset};
}

} // namespace kernels
} // namespace mmops
