// CUDA column kernels of deform_conv2d / modulated_deform_conv2d.
//
// The input is read channels-last ([N, H, W, C] in memory), so the VEC
// consecutive channels a thread handles (16 bytes: 4 float, 8 half/bfloat16,
// 2 double) share one set of bilinear weights and come in one load per
// neighbour. Compute is in float (double for double). An NCHW input (and
// grad_output) is made channels-last once by common/layout.h's transpose.
//
// im2col: one thread per VEC consecutive values of the column buffer
// [n, H_out, W_out, K], K in (group, tap, channel) order, so the threads of a
// warp write consecutive memory and mostly share one (pixel, tap) sample
// (offset / mask loads are broadcasts). Each thread computes its sample's
// bilinear weights itself (cheaper than sharing them).
//
// col2im (backward): one item per (image, deform group, tap, output pixel),
// handled by L = 1..32 lanes (a power of two covering the group's channel
// vectors). Each lane reads VEC gradient columns and the four neighbours' VEC
// input values, adds grad_col * mask * weight into the channels-last float
// (double) grad_input buffer with atomics (one float4 atomic per four floats
// on sm_90), and accumulates the coordinate and mask gradients
//   d/dy: sum_c grad_col_c * mask * sum_i d_dy[i] * v_i[c],  d/dx likewise,
//   d/dmask: sum_c grad_col_c * sum_i w[i] * v_i[c],
// which the item's lanes then reduce with warp shuffles; lane 0 writes them
// (each offset / mask gradient once: no atomics there).
//
// Index decomposition uses 32-bit magic-number division when the launch has
// fewer than 2^31 threads, else 64-bit.

#include "common/cuda_helpers.cuh"
#include "common/layout.h"
#include "deform_conv/deform_conv_kernels.h"
#include "deform_conv/deform_conv_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/detail/IntegerDivider.cuh>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using at::cuda::detail::IntDivider;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;
using deform_conv_math::column;
using deform_conv_math::tap_sample;
using deform_conv_math::touches;

constexpr int kThreads = 256;

// Channels per 16-byte vector.
template <typename scalar_t>
constexpr int wide_vector() {
  return static_cast<int>(16 / sizeof(scalar_t));
}

// ---------------------------------------------------------------------------
// im2col
// ---------------------------------------------------------------------------

template <typename index_t>
struct Im2colDividers {
  IntDivider<index_t> row_vectors;   // K / VEC: vectors per output pixel
  IntDivider<index_t> group_vectors; // (C / groups) / VEC
  IntDivider<index_t> taps;          // kh * kw
  IntDivider<index_t> plane;         // H_out * W_out
  IntDivider<index_t> out_w;
  IntDivider<index_t> per_deform_group;
};

template <typename scalar_t, typename index_t, int VEC>
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(const scalar_t* __restrict__ input,  // [N, H, W, C]
                  const scalar_t* __restrict__ offset, // [N, 2*dg*kh*kw, H_out, W_out]
                  const scalar_t* __restrict__ mask,   // [N, dg*kh*kw, H_out, W_out] or null
                  scalar_t* __restrict__ cols,         // [n, H_out, W_out, K]
                  index_t total, ColumnSizes g, Im2colDividers<index_t> d, DeformConvParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  const index_t idx = static_cast<index_t>(blockIdx.x) * static_cast<index_t>(blockDim.x) + threadIdx.x;
  if (idx >= total) {
    return;
  }
  const auto pixel = d.row_vectors.divmod(idx);            // (chunk pixel, vector in its row)
  const auto in_group = d.group_vectors.divmod(pixel.mod); // (group * taps + tap, vector in group)
  const auto group_tap = d.taps.divmod(in_group.div);      // (group, tap)
  const auto image = d.plane.divmod(pixel.div);            // (chunk image, hw)
  const auto hw = d.out_w.divmod(image.mod);               // (ho, wo)
  const index_t c = group_tap.div * static_cast<index_t>(g.per_group) + in_group.mod * VEC;
  const int64_t dg = d.per_deform_group.div(c);
  const int64_t n = g.n_begin + static_cast<int64_t>(image.div);
  const auto s = tap_sample<acc_t>(offset, mask, n, dg, static_cast<int64_t>(group_tap.mod),
                                   static_cast<int64_t>(hw.div), static_cast<int64_t>(hw.mod), p, g.height, g.width);
  acc_t acc[VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    acc[v] = acc_t(0);
  }
  if (s.taps.any) {
    const PackT* base = reinterpret_cast<const PackT*>(input + n * g.height * g.width * g.channels + c);
    const int64_t pixel_stride = g.channels / VEC;
    PackT values[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      values[t] = s.taps.weight[t] != acc_t(0) ? load_readonly(base + s.taps.offset[t] * pixel_stride) : PackT{};
    }
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        acc[v] += s.taps.weight[t] * static_cast<acc_t>(values[t].v[v]);
      }
    }
  }
  PackT out;
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    out.v[v] = static_cast<scalar_t>(acc[v] * s.mask);
  }
  reinterpret_cast<PackT*>(cols)[idx] = out;
}

// ---------------------------------------------------------------------------
// col2im
// ---------------------------------------------------------------------------

// address[0..VEC) += values, atomically: float4 vector atomics on sm_90 (the
// address is 16-byte aligned whenever VEC is a multiple of 4), else scalars.
template <typename acc_t, int VEC>
__device__ inline void atomic_add_vector(acc_t* address, const acc_t (&values)[VEC]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kVector4 = std::is_same_v<acc_t, float> && VEC % 4 == 0;
#else
  constexpr bool kVector4 = false;
#endif
  if constexpr (kVector4) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#pragma unroll
    for (int v = 0; v < VEC; v += 4) {
      atomicAdd(reinterpret_cast<float4*>(address + v),
                make_float4(values[v], values[v + 1], values[v + 2], values[v + 3]));
    }
#endif
  } else {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      atomicAdd(address + v, values[v]);
    }
  }
}

template <typename index_t>
struct Col2imDividers {
  IntDivider<index_t> plane; // H_out * W_out
  IntDivider<index_t> taps;
  IntDivider<index_t> deform_groups;
  IntDivider<index_t> out_w;
  IntDivider<index_t> per_group;
};

// The (chunk image, deform group, tap, output pixel) of a col2im item.
struct Col2imItem {
  int64_t local, dg, k, hw, ho, wo;
};

template <typename index_t>
__device__ __forceinline__ Col2imItem decode_item(index_t item, const Col2imDividers<index_t>& d) {
  const auto a = d.plane.divmod(item);          // (.., hw)
  const auto b = d.taps.divmod(a.div);          // (.., tap)
  const auto c = d.deform_groups.divmod(b.div); // (chunk image, deform group)
  const auto yx = d.out_w.divmod(a.mod);
  Col2imItem it;
  it.hw = static_cast<int64_t>(a.mod);
  it.k = static_cast<int64_t>(b.mod);
  it.dg = static_cast<int64_t>(c.mod);
  it.local = static_cast<int64_t>(c.div);
  it.ho = static_cast<int64_t>(yx.div);
  it.wo = static_cast<int64_t>(yx.mod);
  return it;
}

template <typename scalar_t, typename index_t, int VEC>
__global__ void __launch_bounds__(kThreads)
    col2im_kernel(const scalar_t* __restrict__ grad_cols, // [n, H_out, W_out, K]
                  const scalar_t* __restrict__ input,     // [N, H, W, C]
                  const scalar_t* __restrict__ offset, const scalar_t* __restrict__ mask,
                  at::opmath_type<scalar_t>* __restrict__ grad_input, // [N, H, W, C] or null
                  scalar_t* __restrict__ grad_offset,                 // or null
                  scalar_t* __restrict__ grad_mask,                   // or null
                  index_t items, int lane_bits, ColumnSizes g, Col2imDividers<index_t> d, DeformConvParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  const index_t tid = static_cast<index_t>(blockIdx.x) * static_cast<index_t>(blockDim.x) + threadIdx.x;
  const index_t item = tid >> lane_bits;
  const int lanes = 1 << lane_bits;
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  const bool active = item < items;
  const bool coordinates = grad_offset != nullptr || grad_mask != nullptr;

  acc_t sum_dy = 0, sum_dx = 0, sum_mask = 0, mask_value = 1;
  int64_t n = 0, dg = 0, k = 0, hw = 0;
  if (active) {
    const Col2imItem it = decode_item(item, d);
    hw = it.hw;
    k = it.k;
    dg = it.dg;
    const int64_t local = it.local;
    n = g.n_begin + local;
    const auto s = tap_sample<acc_t>(offset, mask, n, dg, k, it.ho, it.wo, p, g.height, g.width);
    mask_value = s.mask;
    if (s.taps.any) {
      const int64_t image = n * g.height * g.width * g.channels;
      const scalar_t* grad_row = grad_cols + (local * g.plane + hw) * g.columns;
      const int64_t first = dg * g.per_deform_group;
      for (int64_t cc = static_cast<int64_t>(lane) * VEC; cc < g.per_deform_group;
           cc += static_cast<int64_t>(lanes) * VEC) {
        const int64_t ch = first + cc;
        const int64_t group = static_cast<int64_t>(d.per_group.div(static_cast<index_t>(ch)));
        const PackT gcol =
            load_readonly(reinterpret_cast<const PackT*>(grad_row + column(ch, group, k, g.taps, g.per_group)));
        acc_t gv[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          gv[v] = static_cast<acc_t>(gcol.v[v]);
        }
        if (grad_input != nullptr) {
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            if (s.taps.weight[t] != acc_t(0)) {
              const acc_t scale = s.mask * s.taps.weight[t];
              acc_t add[VEC];
#pragma unroll
              for (int v = 0; v < VEC; ++v) {
                add[v] = scale * gv[v];
              }
              atomic_add_vector<acc_t, VEC>(grad_input + image + s.taps.offset[t] * g.channels + ch, add);
            }
          }
        }
        if (coordinates) {
          PackT values[4];
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            values[t] =
                touches(s.taps, t)
                    ? load_readonly(reinterpret_cast<const PackT*>(input + image + s.taps.offset[t] * g.channels + ch))
                    : PackT{};
          }
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            acc_t value = 0, dy = 0, dx = 0;
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              const acc_t x = static_cast<acc_t>(values[t].v[v]);
              value += s.taps.weight[t] * x;
              dy += s.taps.d_dy[t] * x;
              dx += s.taps.d_dx[t] * x;
            }
            sum_dy += gv[v] * dy;
            sum_dx += gv[v] * dx;
            sum_mask += gv[v] * value;
          }
        }
      }
    }
  }
  if (!coordinates) {
    return; // uniform over the launch: no shuffle below
  }
  // Reduce over the item's lanes (aligned groups of `lanes` lanes of a warp);
  // every lane of the warp takes part.
  for (int o = lanes >> 1; o > 0; o >>= 1) {
    sum_dy += __shfl_xor_sync(0xffffffffu, sum_dy, o);
    sum_dx += __shfl_xor_sync(0xffffffffu, sum_dx, o);
    sum_mask += __shfl_xor_sync(0xffffffffu, sum_mask, o);
  }
  if (active && lane == 0) {
    if (grad_offset != nullptr) {
      const int64_t o = deform_conv_math::offset_index(n, dg, k, hw, p.deform_groups, g.taps, g.plane);
      grad_offset[o] = static_cast<scalar_t>(sum_dy * mask_value);
      grad_offset[o + g.plane] = static_cast<scalar_t>(sum_dx * mask_value);
    }
    if (grad_mask != nullptr) {
      grad_mask[deform_conv_math::mask_index(n, dg, k, hw, p.deform_groups, g.taps, g.plane)] =
          static_cast<scalar_t>(sum_mask);
    }
  }
}

// ---------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

// The wide vector when the channel layout and the pointers allow it, else 1.
template <typename scalar_t>
bool use_wide_vectors(const ColumnSizes& g, std::initializer_list<const void*> pointers) {
  constexpr int64_t kVec = wide_vector<scalar_t>();
  if (g.channels % kVec != 0 || g.per_group % kVec != 0 || g.per_deform_group % kVec != 0) {
    return false;
  }
  for (const void* ptr : pointers) {
    if (ptr != nullptr && !aligned16(ptr)) {
      return false;
    }
  }
  return true;
}

template <typename scalar_t, typename Launch>
void with_vector(bool wide, Launch&& launch) {
  if (wide) {
    launch(std::integral_constant<int, wide_vector<scalar_t>()>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();

unsigned int blocks_for(int64_t threads) {
  return static_cast<unsigned int>((threads + kThreads - 1) / kThreads);
}

// Calls launch(index_t{}) with 32-bit indices when a launch of `threads`
// threads allows them, else 64-bit.
template <typename Launch>
void with_index_type(int64_t threads, Launch&& launch) {
  if (threads + kThreads <= kMax32) {
    launch(static_cast<unsigned int>(0));
  } else {
    launch(static_cast<int64_t>(0));
  }
}

// The data the column kernels read from ColumnArgs (mask: null without one).
template <typename scalar_t>
struct ColumnInputs {
  const scalar_t* input;
  const scalar_t* offset;
  const scalar_t* mask;
};

template <typename scalar_t>
ColumnInputs<scalar_t> column_inputs(const ColumnArgs& a) {
  return {a.input.const_data_ptr<scalar_t>(), a.offset.const_data_ptr<scalar_t>(),
          a.mask.defined() ? a.mask.const_data_ptr<scalar_t>() : nullptr};
}

void im2col(const ColumnArgs& a, at::Tensor& cols, const DeformConvParams& p) {
  if (cols.numel() == 0) {
    return;
  }
  c10::cuda::CUDAGuard device_guard(a.input.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const ColumnSizes g = column_sizes(a, p);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, a.input.scalar_type(), "mmops::deform_conv2d im2col (CUDA)", [&] {
        const ColumnInputs<scalar_t> in = column_inputs<scalar_t>(a);
        scalar_t* out = cols.mutable_data_ptr<scalar_t>();
        const bool wide = use_wide_vectors<scalar_t>(g, {in.input, out});
        with_vector<scalar_t>(wide, [&](auto vec_tag) {
          constexpr int VEC = decltype(vec_tag)::value;
          const int64_t total = a.n_count * g.plane * (g.columns / VEC);
          // Channel indices are index_t too.
          with_index_type(std::max(total, g.columns), [&](auto index_tag) {
            using index_t = decltype(index_tag);
            Im2colDividers<index_t> d{IntDivider<index_t>(static_cast<index_t>(g.columns / VEC)),
                                      IntDivider<index_t>(static_cast<index_t>(g.per_group / VEC)),
                                      IntDivider<index_t>(static_cast<index_t>(g.taps)),
                                      IntDivider<index_t>(static_cast<index_t>(g.plane)),
                                      IntDivider<index_t>(static_cast<index_t>(p.out_w)),
                                      IntDivider<index_t>(static_cast<index_t>(g.per_deform_group))};
            im2col_kernel<scalar_t, index_t, VEC><<<blocks_for(total), kThreads, 0, stream>>>(
                in.input, in.offset, in.mask, out, static_cast<index_t>(total), g, d, p);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
        });
      });
}

void col2im(const ColumnArgs& a, const at::Tensor& grad_cols, at::Tensor& grad_input, at::Tensor& grad_offset,
            at::Tensor& grad_mask, const DeformConvParams& p) {
  if (a.n_count == 0) {
    return;
  }
  c10::cuda::CUDAGuard device_guard(a.input.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const ColumnSizes g = column_sizes(a, p);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, a.input.scalar_type(), "mmops::deform_conv2d col2im (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const ColumnInputs<scalar_t> in = column_inputs<scalar_t>(a);
        const scalar_t* gcols = grad_cols.const_data_ptr<scalar_t>();
        acc_t* gin = grad_input.defined() ? grad_input.mutable_data_ptr<acc_t>() : nullptr;
        scalar_t* goff = grad_offset.defined() ? grad_offset.mutable_data_ptr<scalar_t>() : nullptr;
        scalar_t* gmask = grad_mask.defined() ? grad_mask.mutable_data_ptr<scalar_t>() : nullptr;
        if (gin == nullptr && goff == nullptr && gmask == nullptr) {
          return;
        }
        const bool wide = use_wide_vectors<scalar_t>(g, {in.input, gcols, gin});
        with_vector<scalar_t>(wide, [&](auto vec_tag) {
          constexpr int VEC = decltype(vec_tag)::value;
          // Lanes per item: the smallest power of two >= the deform group's
          // channel vectors, at most a warp.
          const int64_t vectors = (g.per_deform_group + VEC - 1) / VEC;
          int lane_bits = 0;
          while (lane_bits < 5 && (int64_t(1) << lane_bits) < vectors) {
            ++lane_bits;
          }
          const int64_t items = a.n_count * p.deform_groups * g.taps * g.plane;
          const int64_t threads = items << lane_bits;
          with_index_type(std::max(threads, g.channels), [&](auto index_tag) { // channel indices too
            using index_t = decltype(index_tag);
            Col2imDividers<index_t> d{IntDivider<index_t>(static_cast<index_t>(g.plane)),
                                      IntDivider<index_t>(static_cast<index_t>(g.taps)),
                                      IntDivider<index_t>(static_cast<index_t>(p.deform_groups)),
                                      IntDivider<index_t>(static_cast<index_t>(p.out_w)),
                                      IntDivider<index_t>(static_cast<index_t>(g.per_group))};
            col2im_kernel<scalar_t, index_t, VEC><<<blocks_for(threads), kThreads, 0, stream>>>(
                gcols, in.input, in.offset, in.mask, gin, goff, gmask, static_cast<index_t>(items), lane_bits, g, d, p);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
        });
      });
}

// col2im adds into grad_input with atomic adds: the order of the float additions varies.
constexpr ColumnKernels kCuda{&im2col,
                              &col2im,
                              &channels_last_cuda,
                              /*weight_grad=*/nullptr,
                              /*bias_grad=*/nullptr,
                              /*nondeterministic_grad_input=*/"mmops::deform_conv2d_backward (CUDA)"};

} // namespace

at::Tensor deform_conv2d_forward_cuda(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                      const at::Tensor& weight, const at::Tensor& bias, const DeformConvParams& p) {
  return deform_conv2d_forward_gemm(kCuda, input, offset, mask, weight, bias, p);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
    const at::Tensor& weight, const DeformConvParams& p, std::array<bool, 5> output_mask) {
  return deform_conv2d_backward_gemm(kCuda, grad_output, input, offset, mask, weight, p, output_mask);
}

} // namespace kernels
} // namespace mmops
