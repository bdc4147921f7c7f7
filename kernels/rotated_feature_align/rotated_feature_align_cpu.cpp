// CPU kernels of rotated_feature_align.
//
// Every pixel's sample points depend on its rbox only, not on the channel, so
// they are computed once per call (PlaneTaps: offsets into a dense H x W plane
// and bilinear weights, the valid points first) and shared by all channels.
// Forward: NCHW walks a block of kChannelBlock planes pixel by pixel (the
// planes stay in L1 however the points scatter); channels_last walks pixels,
// each pixel's channels contiguous. Backward: parallel over (image, channel)
// planes, so that no two threads add into the same gradient value
// (deterministic); a plane accumulates in the compute type, then is written
// once. Sums run in the order of sample_sum (rotated_feature_align_math.h).
// NCHW and channels_last inputs (contiguous_cpu makes one of them): a dense
// plane offset o is at o * stride(3) in either.

#include "common/layout.h"
#include "rotated_feature_align/rotated_feature_align_kernels.h"
#include "rotated_feature_align/rotated_feature_align_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace rotated_feature_align_math;

constexpr int64_t kChannelBlock = 8;

// One valid sample point: four neighbours in a dense plane and their weights.
template <typename T>
struct DenseTap {
  int32_t offset[4];
  T weight[4];
};

// The valid sample points of every pixel of the batch: pixel i's are
// tap[i * points, i * points + count[i]), in sample_sum's order.
template <typename T>
struct PlaneTaps {
  std::vector<DenseTap<T>> tap;
  std::vector<uint8_t> count;
  int64_t points;

  // sum of the points' samples of one plane; col: the plane's column stride
  template <typename scalar_t>
  T sample_sum(int64_t pixel, const scalar_t* plane, int64_t col) const {
    T sum = T(0);
    const DenseTap<T>* t = tap.data() + pixel * points;
    for (int k = 0; k < count[pixel]; ++k) {
      for (int j = 0; j < 4; ++j) {
        sum += t[k].weight[j] * static_cast<T>(plane[t[k].offset[j] * col]);
      }
    }
    return sum;
  }
};

template <typename scalar_t, typename acc_t>
PlaneTaps<acc_t> plane_taps(const at::Tensor& boxes, const RotatedFeatureAlignParams& p, int64_t height,
                            int64_t width) {
  TORCH_CHECK(height * width <= std::numeric_limits<int32_t>::max(),
              "mmops::rotated_feature_align: a feature plane of ", height, " x ", width,
              " values is larger than the CPU kernel's 32-bit offsets");
  const int64_t pixels = boxes.size(0) * height * width;
  PlaneTaps<acc_t> taps{std::vector<DenseTap<acc_t>>(pixels * p.points), std::vector<uint8_t>(pixels), p.points};
  const scalar_t* box = boxes.const_data_ptr<scalar_t>();
  const acc_t scale = static_cast<acc_t>(p.spatial_scale);
  at::parallel_for(0, pixels, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      acc_t b[5];
      for (int k = 0; k < 5; ++k) {
        b[k] = static_cast<acc_t>(box[i * 5 + k]);
      }
      const PixelTaps<acc_t> all = pixel_taps<acc_t>(b, scale, static_cast<int>(p.points), height, width, {width, 1});
      int valid = 0;
      for (int k = 0; k < all.count; ++k) {
        if (all.tap[k].valid) {
          DenseTap<acc_t>& t = taps.tap[i * p.points + valid++];
          for (int j = 0; j < 4; ++j) {
            t.offset[j] = static_cast<int32_t>(all.tap[k].offset[j]);
            t.weight[j] = all.tap[k].weight[j];
          }
        }
      }
      taps.count[i] = static_cast<uint8_t>(valid);
    }
  });
  return taps;
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& in, const at::Tensor& boxes, at::Tensor& out,
                    const RotatedFeatureAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = in.size(0), channels = in.size(1), height = in.size(2), width = in.size(3);
  const int64_t plane_size = height * width;
  const int64_t sn = in.stride(0), sc = in.stride(1), sw = in.stride(3);
  const PlaneTaps<acc_t> taps = plane_taps<scalar_t, acc_t>(boxes, p, height, width);
  const scalar_t* src = in.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  const auto pixel = [&](int64_t n, int64_t i, int64_t c) {
    const scalar_t* plane = src + n * sn + c * sc;
    const acc_t sum = taps.sample_sum(n * plane_size + i, plane, sw);
    dst[n * sn + c * sc + i * sw] = static_cast<scalar_t>(static_cast<acc_t>(plane[i * sw]) + sum);
  };
  if (sc == 1) { // channels_last: a pixel's channels are contiguous
    at::parallel_for(0, batch * plane_size, std::max<int64_t>(1, 4096 / channels), [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        for (int64_t c = 0; c < channels; ++c) {
          pixel(q / plane_size, q % plane_size, c);
        }
      }
    });
    return;
  }
  const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  at::parallel_for(0, batch * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const int64_t n = q / blocks, c0 = q % blocks * kChannelBlock, c1 = std::min(channels, c0 + kChannelBlock);
      for (int64_t i = 0; i < plane_size; ++i) {
        for (int64_t c = c0; c < c1; ++c) {
          pixel(n, i, c);
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
  const int64_t plane_size = height * width;
  const int64_t sn = go.stride(0), sc = go.stride(1), sw = go.stride(3);
  const PlaneTaps<acc_t> taps = plane_taps<scalar_t, acc_t>(boxes, p, height, width);
  const scalar_t* g = go.const_data_ptr<scalar_t>();
  scalar_t* dst = grad.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, go.size(0) * channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(plane_size);
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t n = plane / channels, c = plane % channels;
      const scalar_t* gp = g + n * sn + c * sc;
      for (int64_t i = 0; i < plane_size; ++i) {
        acc[i] = static_cast<acc_t>(gp[i * sw]);
      }
      for (int64_t i = 0; i < plane_size; ++i) {
        const acc_t v = static_cast<acc_t>(gp[i * sw]);
        const DenseTap<acc_t>* t = taps.tap.data() + (n * plane_size + i) * taps.points;
        for (int k = 0; k < taps.count[n * plane_size + i]; ++k) {
          for (int j = 0; j < 4; ++j) {
            acc[t[k].offset[j]] += v * t[k].weight[j];
          }
        }
      }
      scalar_t* gd = dst + n * sn + c * sc;
      for (int64_t i = 0; i < plane_size; ++i) {
        gd[i * sw] = static_cast<scalar_t>(acc[i]);
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
