// CPU kernels of prroi_pool (prroi_pool_math.h).
//
// Every roi's bins are separable: a bin's weight on pixel (i, j) is wy(i) *
// wx(j). The weights of all rois are tabulated once per call (one short vector
// per bin row and per bin column), then:
// - forward: parallel over (roi, channel); out = sum_i wy(i) sum_j wx(j) D[i][j] / area;
// - input backward: parallel over the (image, channel) planes; a task owns its
//   plane and adds the rois of its image in order: deterministic, the same
//   result for any thread count;
// - rois backward: parallel over rois; a task sums its roi's channels and bins
//   in order (the edge integrals of prroi_pool_math.h's roi_coord_grad).

#include "prroi_pool/prroi_pool_kernels.h"
#include "prroi_pool/prroi_pool_math.h"

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

using namespace prroi_pool_math;

// The weights of one axis of one bin: pixels first .. first + count - 1,
// their weights at weights[offset ...].
struct AxisSpan {
  int64_t first;
  int64_t count;
  int64_t offset;
};

// Every roi's bins: rows[k * PH + ph], cols[k * PW + pw], area[k] (a bin's),
// the roi's image and whether it pools (prroi_pool_math.h's RoiKind; a roi that
// pools has area > 0).
template <typename acc_t>
struct RoiTables {
  std::vector<AxisSpan> rows, cols;
  std::vector<acc_t> weights;
  std::vector<acc_t> area;
  std::vector<int64_t> image;
  std::vector<RoiKind> kind;
};

template <typename acc_t>
AxisSpan tabulate(acc_t lo, acc_t hi, int64_t size, std::vector<acc_t>& weights) {
  const PixelRange r = pixel_range(lo, hi, size);
  AxisSpan s{r.first, r.last >= r.first ? r.last - r.first + 1 : 0, static_cast<int64_t>(weights.size())};
  for (int64_t i = r.first; i <= r.last; ++i) {
    weights.push_back(axis_weight(lo, hi, i));
  }
  return s;
}

template <typename scalar_t, typename acc_t>
RoiTables<acc_t> roi_tables(const at::Tensor& rois, int64_t batch, int64_t height, int64_t width,
                            const PrRoIPoolParams& p) {
  const scalar_t* r = rois.const_data_ptr<scalar_t>();
  const int64_t num_rois = rois.size(0), ph_n = p.pooled_height, pw_n = p.pooled_width;
  RoiTables<acc_t> t;
  t.rows.resize(num_rois * ph_n);
  t.cols.resize(num_rois * pw_n);
  t.area.resize(num_rois);
  t.image.resize(num_rois);
  t.kind.resize(num_rois);
  const acc_t scale = static_cast<acc_t>(p.spatial_scale);
  for (int64_t k = 0; k < num_rois; ++k) {
    const scalar_t* roi = r + k * 5;
    const acc_t x1 = roi[1], y1 = roi[2], x2 = roi[3], y2 = roi[4];
    t.image[k] = roi_image(static_cast<acc_t>(roi[0]), batch);
    t.kind[k] = roi_kind(t.image[k], batch, x1, y1, x2, y2, scale);
    if (t.kind[k] != RoiKind::kPools) {
      continue; // no bins
    }
    for (int64_t ph = 0; ph < ph_n; ++ph) {
      const PrBin<acc_t> bin = bin_of(x1, y1, x2, y2, ph, 0, ph_n, pw_n, scale);
      t.rows[k * ph_n + ph] = tabulate(bin.y1, bin.y2, height, t.weights);
      t.area[k] = bin.area;
    }
    if (!(t.area[k] > acc_t(0))) {
      t.kind[k] = RoiKind::kZeros;
      continue;
    }
    for (int64_t pw = 0; pw < pw_n; ++pw) {
      const PrBin<acc_t> bin = bin_of(x1, y1, x2, y2, 0, pw, ph_n, pw_n, scale);
      t.cols[k * pw_n + pw] = tabulate(bin.x1, bin.x2, width, t.weights);
    }
  }
  return t;
}

template <typename scalar_t>
void forward_impl(const at::Tensor& input, const at::Tensor& rois, at::Tensor& output, const PrRoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t channels = input.size(1), height = input.size(2), width = input.size(3);
  const RoiTables<acc_t> t = roi_tables<scalar_t, acc_t>(rois, input.size(0), height, width, p);
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t bins = p.pooled_height * p.pooled_width;
  at::parallel_for(0, rois.size(0) * channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t kc = begin; kc < end; ++kc) {
      const int64_t k = kc / channels, c = kc % channels;
      scalar_t* o = out + kc * bins;
      const acc_t area = t.area[k];
      if (t.kind[k] != RoiKind::kPools) {
        std::fill(o, o + bins, static_cast<scalar_t>(non_pooling_value<acc_t>(t.kind[k])));
        continue;
      }
      const scalar_t* plane = in + (t.image[k] * channels + c) * height * width;
      for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
        const AxisSpan rs = t.rows[k * p.pooled_height + ph];
        for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
          const AxisSpan cs = t.cols[k * p.pooled_width + pw];
          acc_t sum = 0;
          for (int64_t i = 0; i < rs.count; ++i) {
            const scalar_t* row = plane + (rs.first + i) * width + cs.first;
            acc_t row_sum = 0;
            for (int64_t j = 0; j < cs.count; ++j) {
              row_sum += t.weights[cs.offset + j] * static_cast<acc_t>(row[j]);
            }
            sum += t.weights[rs.offset + i] * row_sum;
          }
          o[ph * p.pooled_width + pw] = static_cast<scalar_t>(sum / area);
        }
      }
    }
  });
}

template <typename scalar_t>
void input_backward_impl(const at::Tensor& grad_output, const at::Tensor& rois, at::Tensor& grad,
                         const PrRoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = grad.size(0), channels = grad.size(1), height = grad.size(2), width = grad.size(3);
  const RoiTables<acc_t> t = roi_tables<scalar_t, acc_t>(rois, batch, height, width, p);
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  acc_t* g = grad.mutable_data_ptr<acc_t>();
  const int64_t bins = p.pooled_height * p.pooled_width, num_rois = rois.size(0);
  at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / channels, c = nc % channels;
      acc_t* plane = g + nc * height * width;
      for (int64_t k = 0; k < num_rois; ++k) {
        if (t.image[k] != n || t.kind[k] != RoiKind::kPools) {
          continue;
        }
        const scalar_t* gk = go + (k * channels + c) * bins;
        for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
          const AxisSpan rs = t.rows[k * p.pooled_height + ph];
          for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
            const AxisSpan cs = t.cols[k * p.pooled_width + pw];
            const acc_t share = static_cast<acc_t>(gk[ph * p.pooled_width + pw]) / t.area[k];
            for (int64_t i = 0; i < rs.count; ++i) {
              const acc_t row_share = share * t.weights[rs.offset + i];
              acc_t* row = plane + (rs.first + i) * width + cs.first;
              for (int64_t j = 0; j < cs.count; ++j) {
                row[j] += row_share * t.weights[cs.offset + j];
              }
            }
          }
        }
      }
    }
  });
}

template <typename scalar_t>
void rois_backward_impl(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& rois,
                        at::Tensor& grad, const PrRoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* r = rois.const_data_ptr<scalar_t>();
  scalar_t* g = grad.mutable_data_ptr<scalar_t>();
  const acc_t scale = static_cast<acc_t>(p.spatial_scale);
  const int64_t bins = p.pooled_height * p.pooled_width;
  at::parallel_for(0, rois.size(0), 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const scalar_t* roi = r + k * 5;
      const int64_t b = roi_image(static_cast<acc_t>(roi[0]), batch);
      const acc_t x1 = roi[1], y1 = roi[2], x2 = roi[3], y2 = roi[4];
      const RoiKind kind = roi_kind(b, batch, x1, y1, x2, y2, scale);
      const acc_t none = non_pooling_value<acc_t>(kind);
      acc_t sum[4] = {none, none, none, none};
      if (kind == RoiKind::kPools) {
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = in + (b * channels + c) * height * width;
          const scalar_t* gk = go + (k * channels + c) * bins;
          for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
            for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
              const acc_t up = static_cast<acc_t>(gk[ph * p.pooled_width + pw]);
              if (up == acc_t(0)) {
                continue;
              }
              const PrBin<acc_t> bin = bin_of(x1, y1, x2, y2, ph, pw, p.pooled_height, p.pooled_width, scale);
              const RoiCoordGrad<acc_t> d =
                  roi_coord_grad(plane, height, width, bin, ph, pw, p.pooled_height, p.pooled_width, scale);
              sum[0] += up * d.x1;
              sum[1] += up * d.y1;
              sum[2] += up * d.x2;
              sum[3] += up * d.y2;
            }
          }
        }
      }
      g[k * 5] = scalar_t(0);
      for (int i = 0; i < 4; ++i) {
        g[k * 5 + 1 + i] = static_cast<scalar_t>(sum[i]);
      }
    }
  });
}

} // namespace

at::Tensor prroi_pool_forward_cpu(const at::Tensor& input_, const at::Tensor& rois_, const PrRoIPoolParams& params) {
  const at::Tensor input = input_.contiguous(), rois = rois_.contiguous();
  at::Tensor output =
      at::empty({rois.size(0), input.size(1), params.pooled_height, params.pooled_width}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::prroi_pool (CPU)",
                                  [&] { forward_impl<scalar_t>(input, rois, output, params); });
  return output;
}

at::Tensor prroi_pool_input_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                         const std::vector<int64_t>& input_shape, const PrRoIPoolParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous(), rois = rois_.contiguous();
  const auto dtype = grad_output.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  // half / bfloat16 accumulate in a float plane, converted once
  at::Tensor grad = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
  if (grad.numel() == 0 || grad_output.numel() == 0) {
    return grad.to(dtype);
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::prroi_pool backward (CPU)",
                                  [&] { input_backward_impl<scalar_t>(grad_output, rois, grad, params); });
  return grad.to(dtype);
}

at::Tensor prroi_pool_rois_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& input_,
                                        const at::Tensor& rois_, const PrRoIPoolParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous(), input = input_.contiguous(), rois = rois_.contiguous();
  at::Tensor grad = at::zeros(rois.sizes(), rois.options());
  if (rois.size(0) == 0) {
    return grad;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(),
                                  "mmops::prroi_pool rois backward (CPU)",
                                  [&] { rois_backward_impl<scalar_t>(grad_output, input, rois, grad, params); });
  return grad;
}

} // namespace kernels
} // namespace mmops
