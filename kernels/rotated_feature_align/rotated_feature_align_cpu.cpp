// CPU kernels of rotated_feature_align.
//
// Forward: parallel over image rows; a pixel's taps are computed once and
// applied to every channel. Backward: parallel over (image, channel) planes,
// so that no two threads add into the same gradient value (deterministic);
// a plane accumulates in the compute type, then is written once.
// Any memory format: the kernels index through the tensors' strides.

#include "common/layout.h"
#include "rotated_feature_align/rotated_feature_align_kernels.h"
#include "rotated_feature_align/rotated_feature_align_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace rotated_feature_align_math;

template <typename scalar_t, typename acc_t>
PixelTaps<acc_t> taps_of(const scalar_t* boxes, int64_t pixel, const RotatedFeatureAlignParams& p, int64_t height,
                         int64_t width, PlaneStrides s) {
  acc_t box[5];
  for (int i = 0; i < 5; ++i) {
    box[i] = static_cast<acc_t>(boxes[pixel * 5 + i]);
  }
  return pixel_taps<acc_t>(box, static_cast<acc_t>(p.spatial_scale), static_cast<int>(p.points), height, width, s);
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& in, const at::Tensor& boxes, at::Tensor& out,
                    const RotatedFeatureAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t channels = in.size(1), height = in.size(2), width = in.size(3);
  const int64_t sn = in.stride(0), sc = in.stride(1), sh = in.stride(2), sw = in.stride(3);
  const PlaneStrides strides{sh, sw};
  const scalar_t* src = in.const_data_ptr<scalar_t>();
  const scalar_t* box = boxes.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, in.size(0) * height, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / height, h = row % height;
      for (int64_t w = 0; w < width; ++w) {
        const PixelTaps<acc_t> taps = taps_of<scalar_t, acc_t>(box, row * width + w, p, height, width, strides);
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + n * sn + c * sc;
          const int64_t at = h * sh + w * sw;
          dst[n * sn + c * sc + at] = static_cast<scalar_t>(static_cast<acc_t>(plane[at]) + sample_sum(taps, plane));
        }
      }
    }
  });
}

template <typename scalar_t>
void backward_kernel(const at::Tensor& go, const at::Tensor& boxes, at::Tensor& grad,
                     const RotatedFeatureAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t channels = go.size(1), height = go.size(2), width = go.size(3);
  const int64_t sn = go.stride(0), sc = go.stride(1), sh = go.stride(2), sw = go.stride(3);
  const scalar_t* g = go.const_data_ptr<scalar_t>();
  const scalar_t* box = boxes.const_data_ptr<scalar_t>();
  scalar_t* dst = grad.mutable_data_ptr<scalar_t>();
  // taps indexed in a dense H x W plane (row-major), mapped to strides at the end
  const PlaneStrides dense{width, 1};
  at::parallel_for(0, go.size(0) * channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(height * width);
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t n = plane / channels, c = plane % channels;
      const scalar_t* gp = g + n * sn + c * sc;
      for (int64_t i = 0; i < height * width; ++i) {
        acc[i] = static_cast<acc_t>(gp[(i / width) * sh + (i % width) * sw]);
      }
      for (int64_t i = 0; i < height * width; ++i) {
        const PixelTaps<acc_t> taps = taps_of<scalar_t, acc_t>(box, n * height * width + i, p, height, width, dense);
        const acc_t v = static_cast<acc_t>(gp[(i / width) * sh + (i % width) * sw]);
        for (int k = 0; k < taps.count; ++k) {
          if (taps.tap[k].valid) {
            for (int j = 0; j < 4; ++j) {
              acc[taps.tap[k].offset[j]] += v * taps.tap[k].weight[j];
            }
          }
        }
      }
      scalar_t* gd = dst + n * sn + c * sc;
      for (int64_t i = 0; i < height * width; ++i) {
        gd[(i / width) * sh + (i % width) * sw] = static_cast<scalar_t>(acc[i]);
      }
    }
  });
}

} // namespace

at::Tensor rotated_feature_align_forward_cpu(const at::Tensor& features, const at::Tensor& best_rbboxes,
                                             const RotatedFeatureAlignParams& params) {
  const at::MemoryFormat format = features.suggest_memory_format();
  const at::Tensor in = contiguous_cpu(features, format);
  const at::Tensor boxes = best_rbboxes.contiguous();
  at::Tensor out = at::empty(in.sizes(), in.options().memory_format(format));
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "rotated_feature_align_forward_cpu",
                                  [&] { forward_kernel<scalar_t>(in, boxes, out, params); });
  return out;
}

at::Tensor rotated_feature_align_backward_cpu(const at::Tensor& grad_output, const at::Tensor& best_rbboxes,
                                              const RotatedFeatureAlignParams& params) {
  const at::MemoryFormat format = grad_output.suggest_memory_format();
  const at::Tensor go = contiguous_cpu(grad_output, format);
  const at::Tensor boxes = best_rbboxes.contiguous();
  at::Tensor grad = at::empty(go.sizes(), go.options().memory_format(format));
  if (grad.numel() == 0) {
    return grad;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, go.scalar_type(), "rotated_feature_align_backward_cpu",
                                  [&] { backward_kernel<scalar_t>(go, boxes, grad, params); });
  return grad;
}

} // namespace kernels
} // namespace mmops
