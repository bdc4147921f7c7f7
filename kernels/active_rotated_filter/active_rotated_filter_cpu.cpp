// CPU kernels of active_rotated_filter: the tables of active_rotated_filter_math.h
// (indices validated by the caller), then a gather parallel over output rows
// (forward) or input planes (backward); every value has one writer. The loops
// walk (plane, entry) directly, so no element pays index divisions; the
// backward's table of won targets (per entry and rotation) is built once.

#include "active_rotated_filter/active_rotated_filter_kernels.h"
#include "active_rotated_filter/active_rotated_filter_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace active_rotated_filter_math;

// source[k * E + m]: the entry output entry m of rotation k copies (or -1);
// won[l * R + k]: the output entry whose gradient entry l reads for rotation k (or -1).
struct Tables {
  std::vector<int32_t> source, won;
};

Tables tables_of(const at::Tensor& indices, const ActiveRotatedFilterParams& p) {
  const int64_t entries = p.entries, rotations = p.rotations;
  std::vector<int32_t> target(entries * rotations, -1);
  Tables t{std::vector<int32_t>(rotations * entries, -1), std::vector<int32_t>(entries * rotations, -1)};
  const at::Tensor idx = indices.contiguous();
  AT_DISPATCH_INTEGRAL_TYPES(idx.scalar_type(), "active_rotated_filter_tables", [&] {
    const scalar_t* v = idx.const_data_ptr<scalar_t>();
    for (int64_t l = 0; l < entries; ++l) {
      for (int64_t k = 0; k < rotations; ++k) {
        const int32_t m = target_of(v[l * rotations + k], entries);
        target[l * rotations + k] = m;
        if (m >= 0) {
          t.source[k * entries + m] = static_cast<int32_t>(l); // l ascending: the largest wins
        }
      }
    }
  });
  for (int64_t l = 0; l < entries; ++l) {
    for (int64_t k = 0; k < rotations; ++k) {
      t.won[l * rotations + k] =
          won_target(target[l * rotations + k], t.source.data() + k * entries, static_cast<int32_t>(l));
    }
  }
  return t;
}

} // namespace

at::Tensor active_rotated_filter_forward_cpu(const at::Tensor& input, const at::Tensor& indices,
                                             const ActiveRotatedFilterParams& p) {
  const at::Tensor in = input.contiguous();
  at::Tensor out =
      at::empty({p.out_planes * p.rotations, p.in_planes * p.orientations, p.kernel_h, p.kernel_w}, in.options());
  if (out.numel() == 0) {
    return out;
  }
  const Tables t = tables_of(indices, p);
  const int64_t entries = p.entries, columns = p.in_planes * entries;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "active_rotated_filter_forward_cpu", [&] {
    const scalar_t* src = in.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, out.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) { // row = i * R + k, column = j * E + m
        const int64_t i = row / p.rotations, k = row % p.rotations;
        const int32_t* source = t.source.data() + k * entries;
        for (int64_t j = 0; j < p.in_planes; ++j) {
          const scalar_t* in_block = src + (i * p.in_planes + j) * entries;
          scalar_t* out_block = dst + row * columns + j * entries;
          for (int64_t m = 0; m < entries; ++m) {
            out_block[m] = source[m] >= 0 ? in_block[source[m]] : scalar_t(0);
          }
        }
      }
    });
  });
  return out;
}

at::Tensor active_rotated_filter_backward_cpu(const at::Tensor& grad_output, const at::Tensor& indices,
                                              const ActiveRotatedFilterParams& p) {
  const at::Tensor go = grad_output.contiguous();
  at::Tensor grad = at::empty({p.out_planes, p.in_planes, p.orientations, p.kernel_h, p.kernel_w}, go.options());
  if (grad.numel() == 0) {
    return grad;
  }
  const Tables t = tables_of(indices, p);
  const int64_t entries = p.entries, rotations = p.rotations, columns = p.in_planes * entries;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, go.scalar_type(), "active_rotated_filter_backward_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = go.const_data_ptr<scalar_t>();
        scalar_t* dst = grad.mutable_data_ptr<scalar_t>();
        // gradient of entry (i, j, l): its won output entries' gradients, k ascending
        at::parallel_for(0, p.out_planes, 1, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            for (int64_t j = 0; j < p.in_planes; ++j) {
              const scalar_t* g_block = g + (i * rotations * p.in_planes + j) * entries; // k = 0
              const int64_t k_stride = p.in_planes * entries;
              for (int64_t l = 0; l < entries; ++l) {
                const int32_t* won = t.won.data() + l * rotations;
                acc_t sum = acc_t(0);
                for (int64_t k = 0; k < rotations; ++k) {
                  if (won[k] >= 0) {
                    sum += static_cast<acc_t>(g_block[k * k_stride + won[k]]);
                  }
                }
                dst[i * columns + j * entries + l] = static_cast<scalar_t>(sum);
              }
            }
          }
        });
      });
  return grad;
}

} // namespace kernels
} // namespace mmops
