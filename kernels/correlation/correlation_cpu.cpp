// CPU kernels of correlation (correlation_math.h), over channels-last copies
// of the inputs ([N, H, W, C]: a pixel's channels are contiguous, so every
// product sum over C is one contiguous loop).
// Forward: parallel over (image, output row); each output is the sum over the
// kernel taps (i, j) and then the channels, in that order, of products
// rounded once (mul_rn), in float for float16 / bfloat16: the CUDA kernel's
// order and arithmetic, bitwise the same result.
// Backward: a gather per input pixel (no atomics): parallel over (image, input
// row), each task owning its rows of both gradients. For every displacement
// d, G = the sum of grad_output over the outputs whose tap reads that pixel
// (taps in order); grad_input1[p] += G(d, p) * input2[p + d], grad_input2[p] +=
// G(d, p - d) * input1[p - d], displacements in order: deterministic,
// independent of the thread count, and the CUDA kernel's order.

#include "common/host_device_math.h"
#include "common/layout.h"
#include "correlation/correlation_kernels.h"

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

using namespace correlation_math;
using host_device_math::mul_rn;

// Rows per task: about 2^16 multiply-adds each (small calls stay on one thread).
int64_t grain_of(int64_t work_per_row) {
  return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(work_per_row, 1));
}

template <typename scalar_t>
void forward_impl(const at::Tensor& a1, const at::Tensor& a2, at::Tensor& output, const CorrelationParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* in1 = a1.const_data_ptr<scalar_t>(); // [N, H, W, C]
  const scalar_t* in2 = a2.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t C = p.channels;
  const int64_t plane = p.out_h * p.out_w;
  at::parallel_for(0, p.batch * p.out_h, grain_of(p.patch * p.patch * p.out_w * p.kernel_h * p.kernel_w * (C + 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t item = begin; item < end; ++item) {
                       const int64_t n = item / p.out_h, oh = item % p.out_h;
                       for (int64_t ph = 0; ph < p.patch; ++ph) {
                         const int64_t dy = displacement(ph, p.max_displacement, p.dilation_patch_h);
                         for (int64_t pw = 0; pw < p.patch; ++pw) {
                           const int64_t dx = displacement(pw, p.max_displacement, p.dilation_patch_w);
                           scalar_t* row = out + ((n * p.patch + ph) * p.patch + pw) * plane + oh * p.out_w;
                           for (int64_t ow = 0; ow < p.out_w; ++ow) {
                             acc_t sum = 0;
                             for (int64_t i = 0; i < p.kernel_h; ++i) {
                               const int64_t y1 = input_coord(oh, i, p.stride_h, p.pad_h, p.dilation_h);
                               if (!inside(y1, p.height) || !inside(y1 + dy, p.height)) {
                                 continue;
                               }
                               for (int64_t j = 0; j < p.kernel_w; ++j) {
                                 const int64_t x1 = input_coord(ow, j, p.stride_w, p.pad_w, p.dilation_w);
                                 if (!inside(x1, p.width) || !inside(x1 + dx, p.width)) {
                                   continue;
                                 }
                                 const scalar_t* v1 = in1 + ((n * p.height + y1) * p.width + x1) * C;
                                 const scalar_t* v2 = in2 + ((n * p.height + y1 + dy) * p.width + x1 + dx) * C;
                                 for (int64_t c = 0; c < C; ++c) {
                                   sum += mul_rn(static_cast<acc_t>(v1[c]), static_cast<acc_t>(v2[c]));
                                 }
                               }
                             }
                             row[ow] = static_cast<scalar_t>(sum);
                           }
                         }
                       }
                     }
                   });
}

// The sum of grad_output[n, ph, pw] over the outputs whose tap reads input1 pixel (qy, qx).
template <typename scalar_t, typename acc_t>
acc_t gathered_grad(const scalar_t* g, int64_t qy, int64_t qx, const CorrelationParams& p) {
  acc_t sum = 0;
  for (int64_t i = 0; i < p.kernel_h; ++i) {
    const int64_t oh = output_coord(qy, i, p.stride_h, p.pad_h, p.dilation_h, p.out_h);
    if (oh < 0) {
      continue;
    }
    for (int64_t j = 0; j < p.kernel_w; ++j) {
      const int64_t ow = output_coord(qx, j, p.stride_w, p.pad_w, p.dilation_w, p.out_w);
      if (ow >= 0) {
        sum += static_cast<acc_t>(g[oh * p.out_w + ow]);
      }
    }
  }
  return sum;
}

template <typename scalar_t>
void backward_impl(const at::Tensor& grad_output, const at::Tensor& a1, const at::Tensor& a2, at::Tensor& grad1,
                   at::Tensor& grad2, const CorrelationParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>(); // [N, P, P, oH, oW]
  const scalar_t* in1 = a1.const_data_ptr<scalar_t>();         // [N, H, W, C]
  const scalar_t* in2 = a2.const_data_ptr<scalar_t>();
  acc_t* g1 = grad1.mutable_data_ptr<acc_t>(); // [N, H, W, C]
  acc_t* g2 = grad2.mutable_data_ptr<acc_t>();
  const int64_t C = p.channels;
  const int64_t plane = p.out_h * p.out_w;
  at::parallel_for(
      0, p.batch * p.height, grain_of(p.patch * p.patch * p.width * (2 * C + p.kernel_h * p.kernel_w)),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t n = item / p.height, y = item % p.height;
          for (int64_t x = 0; x < p.width; ++x) {
            acc_t* t1 = g1 + ((n * p.height + y) * p.width + x) * C;
            acc_t* t2 = g2 + ((n * p.height + y) * p.width + x) * C;
            for (int64_t ph = 0; ph < p.patch; ++ph) {
              const int64_t dy = displacement(ph, p.max_displacement, p.dilation_patch_h);
              for (int64_t pw = 0; pw < p.patch; ++pw) {
                const int64_t dx = displacement(pw, p.max_displacement, p.dilation_patch_w);
                const scalar_t* g = go + ((n * p.patch + ph) * p.patch + pw) * plane;
                if (inside(y + dy, p.height) && inside(x + dx, p.width)) { // input1 pixel p, input2 pixel p + d
                  const acc_t G = gathered_grad<scalar_t, acc_t>(g, y, x, p);
                  const scalar_t* v2 = in2 + ((n * p.height + y + dy) * p.width + x + dx) * C;
                  for (int64_t c = 0; c < C; ++c) {
                    t1[c] += mul_rn(G, static_cast<acc_t>(v2[c]));
                  }
                }
                if (inside(y - dy, p.height) && inside(x - dx, p.width)) { // input1 pixel p - d, input2 pixel p
                  const acc_t G = gathered_grad<scalar_t, acc_t>(g, y - dy, x - dx, p);
                  const scalar_t* v1 = in1 + ((n * p.height + y - dy) * p.width + x - dx) * C;
                  for (int64_t c = 0; c < C; ++c) {
                    t2[c] += mul_rn(G, static_cast<acc_t>(v1[c]));
                  }
                }
              }
            }
          }
        }
      });
}

// [N, H, W, C] (acc dtype) -> [N, C, H, W] contiguous in `dtype`.
at::Tensor to_nchw(const at::Tensor& t, at::ScalarType dtype) {
  return t.permute({0, 3, 1, 2}).to(dtype).contiguous();
}

} // namespace

at::Tensor correlation_forward_cpu(const at::Tensor& input1, const at::Tensor& input2, const CorrelationParams& p) {
  at::Tensor output = at::zeros({p.batch, p.patch, p.patch, p.out_h, p.out_w}, input1.options());
  if (output.numel() == 0 || p.channels == 0) {
    return output;
  }
  const at::Tensor a1 = contiguous_cpu(input1, at::MemoryFormat::ChannelsLast).permute({0, 2, 3, 1});
  const at::Tensor a2 = contiguous_cpu(input2, at::MemoryFormat::ChannelsLast).permute({0, 2, 3, 1});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input1.scalar_type(), "mmops::correlation (CPU)",
                                  [&] { forward_impl<scalar_t>(a1, a2, output, p); });
  return output;
}

std::tuple<at::Tensor, at::Tensor> correlation_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input1,
                                                            const at::Tensor& input2, const CorrelationParams& p) {
  const at::ScalarType dtype = input1.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const auto acc_options = input1.options().dtype(reduced ? at::kFloat : dtype);
  at::Tensor grad1 = at::zeros({p.batch, p.height, p.width, p.channels}, acc_options);
  at::Tensor grad2 = at::zeros({p.batch, p.height, p.width, p.channels}, acc_options);
  if (grad1.numel() > 0 && grad_output.numel() > 0) {
    const at::Tensor go = grad_output.contiguous();
    const at::Tensor a1 = contiguous_cpu(input1, at::MemoryFormat::ChannelsLast).permute({0, 2, 3, 1});
    const at::Tensor a2 = contiguous_cpu(input2, at::MemoryFormat::ChannelsLast).permute({0, 2, 3, 1});
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::correlation backward (CPU)",
                                    [&] { backward_impl<scalar_t>(go, a1, a2, grad1, grad2, p); });
  }
  return {to_nchw(grad1, dtype), to_nchw(grad2, dtype)};
}

} // namespace kernels
} // namespace mmops
