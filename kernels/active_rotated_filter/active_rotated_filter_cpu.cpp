// CPU kernels of active_rotated_filter: the tables of active_rotated_filter_math.h
// (indices validated by the caller), then a gather parallel over output rows
// (forward) or input planes (backward); every value has one writer.

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

struct Tables {
  std::vector<int32_t> target, source;
};

Tables tables_of(const at::Tensor& indices, const ActiveRotatedFilterParams& p) {
  Tables t;
  const int64_t entries = p.entries, rotations = p.rotations;
  t.target.assign(entries * rotations, -1);
  t.source.assign(rotations * entries, -1);
  const at::Tensor idx = indices.contiguous();
  AT_DISPATCH_INTEGRAL_TYPES(idx.scalar_type(), "active_rotated_filter_tables", [&] {
    const scalar_t* v = idx.const_data_ptr<scalar_t>();
    for (int64_t l = 0; l < entries; ++l) {
      for (int64_t k = 0; k < rotations; ++k) {
        const int32_t m = target_of(v[l * rotations + k], entries);
        t.target[l * rotations + k] = m;
        if (m >= 0) {
          t.source[k * entries + m] = static_cast<int32_t>(l); // l ascending: the largest wins
        }
      }
    }
  });
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
  const int64_t columns = p.in_planes * p.entries;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "active_rotated_filter_forward_cpu", [&] {
    const scalar_t* src = in.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, out.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        for (int64_t col = 0; col < columns; ++col) {
          dst[row * columns + col] = gathered(src, t.source.data(), row, col, p.rotations, p.in_planes, p.entries);
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
  const int64_t columns = p.in_planes * p.entries;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, go.scalar_type(), "active_rotated_filter_backward_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = go.const_data_ptr<scalar_t>();
        scalar_t* dst = grad.mutable_data_ptr<scalar_t>();
        at::parallel_for(0, p.out_planes, 1, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            for (int64_t col = 0; col < columns; ++col) {
              dst[i * columns + col] = static_cast<scalar_t>(gathered_grad<acc_t>(
                  g, t.target.data(), t.source.data(), i, col, p.rotations, p.in_planes, p.entries));
            }
          }
        });
      });
  return grad;
}

} // namespace kernels
} // namespace mmops
