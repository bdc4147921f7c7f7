// CPU kernels of cc_attention: the three products of cc_attention_math.h
// (energy, aggregate, transpose), each a gather with one writer per value
// (deterministic). The inner loops run along x, contiguous in every operand;
// sums in opmath (float for float16 / bfloat16), over c (energy) or over the
// criss-cross entries k in order (aggregate).

#include "cc_attention/cc_attention_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using cc_attention_math::column_entry;
using cc_attention_math::column_row;

#define MMOPS_CC_DISPATCH(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)

// energy[n, k, y, x] = sum_c t[n, c, y, x] * f[n, c, pos(k; y, x)]; parallel over image rows (n, y).
at::Tensor energy(const at::Tensor& t_in, const at::Tensor& f_in, const CcAttentionParams& p) {
  const at::Tensor t = t_in.contiguous(), f = f_in.contiguous();
  const int64_t H = p.height, W = p.width, C = p.channels, L = p.length(), HW = H * W;
  at::Tensor out = at::empty({p.batch, L, H, W}, t.options());
  if (out.numel() == 0) {
    return out;
  }
  MMOPS_CC_DISPATCH(t.scalar_type(), "mmops::ca_weight (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* tp = t.const_data_ptr<scalar_t>();
    const scalar_t* fp = f.const_data_ptr<scalar_t>();
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, p.batch * H, 1, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(static_cast<size_t>(L * W));
      for (int64_t ny = begin; ny < end; ++ny) {
        const int64_t n = ny / H, y = ny % H;
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t c = 0; c < C; ++c) {
          const scalar_t* t_row = tp + (n * C + c) * HW + y * W;
          const scalar_t* f_plane = fp + (n * C + c) * HW;
          for (int64_t s = 0; s < W; ++s) { // the row: f at (y, s)
            const acc_t fv = static_cast<acc_t>(f_plane[y * W + s]);
            acc_t* a = acc.data() + s * W;
            for (int64_t x = 0; x < W; ++x) {
              a[x] += static_cast<acc_t>(t_row[x]) * fv;
            }
          }
          for (int64_t i = 0; i + 1 < H; ++i) { // the column: f at (j, x)
            const scalar_t* f_row = f_plane + column_row(i, y) * W;
            acc_t* a = acc.data() + (W + i) * W;
            for (int64_t x = 0; x < W; ++x) {
              a[x] += static_cast<acc_t>(t_row[x]) * static_cast<acc_t>(f_row[x]);
            }
          }
        }
        for (int64_t k = 0; k < L; ++k) {
          scalar_t* o = op + (n * L + k) * HW + y * W;
          const acc_t* a = acc.data() + k * W;
          for (int64_t x = 0; x < W; ++x) {
            o[x] = static_cast<scalar_t>(a[x]);
          }
        }
      }
    });
  });
  return out;
}

// out[n, c, y, x] = sum_k w[n, k, y, x] * g[n, c, pos(k; y, x)]; parallel over rows (n, c, y).
at::Tensor aggregate(const at::Tensor& w_in, const at::Tensor& g_in, const CcAttentionParams& p) {
  const at::Tensor w = w_in.contiguous(), g = g_in.contiguous();
  const int64_t H = p.height, W = p.width, C = p.channels, L = p.length(), HW = H * W;
  at::Tensor out = at::empty({p.batch, C, H, W}, g.options());
  if (out.numel() == 0) {
    return out;
  }
  MMOPS_CC_DISPATCH(g.scalar_type(), "mmops::ca_map (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    const scalar_t* gp = g.const_data_ptr<scalar_t>();
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, p.batch * C * H, 1, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(static_cast<size_t>(W));
      for (int64_t ncy = begin; ncy < end; ++ncy) {
        const int64_t y = ncy % H, nc = ncy / H, n = nc / C;
        const scalar_t* g_plane = gp + nc * HW;
        const scalar_t* w_at = wp + n * L * HW + y * W; // w[n, 0, y, 0]
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t s = 0; s < W; ++s) { // the row: g at (y, s)
          const acc_t gv = static_cast<acc_t>(g_plane[y * W + s]);
          const scalar_t* w_row = w_at + s * HW;
          for (int64_t x = 0; x < W; ++x) {
            acc[x] += static_cast<acc_t>(w_row[x]) * gv;
          }
        }
        for (int64_t i = 0; i + 1 < H; ++i) { // the column: g at (j, x)
          const scalar_t* g_row = g_plane + column_row(i, y) * W;
          const scalar_t* w_row = w_at + (W + i) * HW;
          for (int64_t x = 0; x < W; ++x) {
            acc[x] += static_cast<acc_t>(w_row[x]) * static_cast<acc_t>(g_row[x]);
          }
        }
        scalar_t* o = op + ncy * W;
        for (int64_t x = 0; x < W; ++x) {
          o[x] = static_cast<scalar_t>(acc[x]);
        }
      }
    });
  });
  return out;
}

// out[n, k, y, x] = w[n, k', pos(k; y, x)], the entry of (y, x) in the criss-cross of pos(k; y, x):
//   row:    out[n, s, y, x]     = w[n, x, y, s]
//   column: out[n, W + i, y, x] = w[n, W + column_entry(y, j), j, x], j = column_row(i, y)
at::Tensor transpose(const at::Tensor& w_in, const CcAttentionParams& p) {
  const at::Tensor w = w_in.contiguous();
  const int64_t H = p.height, W = p.width, L = p.length(), HW = H * W;
  at::Tensor out = at::empty_like(w, at::MemoryFormat::Contiguous);
  if (out.numel() == 0) {
    return out;
  }
  MMOPS_CC_DISPATCH(w.scalar_type(), "mmops::cc_attention transpose (CPU)", [&] {
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, p.batch * L, 1, [&](int64_t begin, int64_t end) {
      for (int64_t nk = begin; nk < end; ++nk) {
        const int64_t n = nk / L, k = nk % L;
        const scalar_t* w_n = wp + n * L * HW;
        scalar_t* o = op + nk * HW;
        for (int64_t y = 0; y < H; ++y) {
          if (k < W) {
            for (int64_t x = 0; x < W; ++x) {
              o[y * W + x] = w_n[x * HW + y * W + k];
            }
          } else {
            const int64_t j = column_row(k - W, y);
            const scalar_t* src = w_n + (W + column_entry(y, j)) * HW + j * W;
            std::copy(src, src + W, o + y * W);
          }
        }
      }
    });
  });
  return out;
}

} // namespace

at::Tensor ca_weight_forward_cpu(const at::Tensor& t, const at::Tensor& f, const CcAttentionParams& params) {
  return energy(t, f, params);
}

std::tuple<at::Tensor, at::Tensor> ca_weight_backward_cpu(const at::Tensor& grad_weight, const at::Tensor& t,
                                                          const at::Tensor& f, const CcAttentionParams& params) {
  return {aggregate(grad_weight, f, params), aggregate(transpose(grad_weight, params), t, params)};
}

at::Tensor ca_map_forward_cpu(const at::Tensor& weight, const at::Tensor& g, const CcAttentionParams& params) {
  return aggregate(weight, g, params);
}

std::tuple<at::Tensor, at::Tensor> ca_map_backward_cpu(const at::Tensor& grad_out, const at::Tensor& weight,
                                                       const at::Tensor& g, const CcAttentionParams& params) {
  return {energy(grad_out, g, params), aggregate(transpose(weight, params), grad_out, params)};
}

} // namespace kernels
} // namespace mmops
