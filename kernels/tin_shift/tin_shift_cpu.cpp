// CPU kernels of tin_shift (tin_shift_math.h). Both passes move whole rows:
// row (n, t, c) of the result (its H * W positions, contiguous) is a copy of
// row (n, source_frame(t), c) of the source, or zeros. The copy is of bytes,
// so every dtype shares one kernel and values (NaN, -0.0) pass unchanged.
// Parallel over rows; each row is written by one task: the result does not
// depend on the thread count.

#include "tin_shift/tin_shift_kernels.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>

namespace mmops {
namespace kernels {
namespace {

using tin_shift_math::source_frame;

at::Tensor shift_frames(const at::Tensor& source_, const at::Tensor& shift_, const TinShiftParams& p, bool reverse) {
  const at::Tensor source = source_.contiguous();
  at::Tensor result = at::empty(source.sizes(), source.options());
  if (result.numel() == 0) {
    return result;
  }
  const at::Tensor shift = shift_.to(at::kLong).contiguous();
  const int64_t* s = shift.const_data_ptr<int64_t>();
  const auto* src = static_cast<const char*>(source.const_data_ptr());
  auto* dst = static_cast<char*>(result.mutable_data_ptr());
  const int64_t row_bytes = p.positions * static_cast<int64_t>(source.element_size());
  const int64_t rows = p.batch * p.frames * p.channels;
  // about 64 KiB per task
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(row_bytes, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row % p.channels;
      const int64_t nt = row / p.channels;
      const int64_t t = nt % p.frames;
      const int64_t n = nt / p.frames;
      const int64_t from = source_frame(t, s[n * p.groups + c / p.group_channels], p.frames, reverse);
      char* out = dst + row * row_bytes;
      if (from < 0) {
        std::memset(out, 0, static_cast<size_t>(row_bytes));
      } else {
        const int64_t src_row = (n * p.frames + from) * p.channels + c;
        std::memcpy(out, src + src_row * row_bytes, static_cast<size_t>(row_bytes));
      }
    }
  });
  return result;
}

} // namespace

at::Tensor tin_shift_forward_cpu(const at::Tensor& input, const at::Tensor& shift, const TinShiftParams& p) {
  return shift_frames(input, shift, p, /*reverse=*/false);
}

at::Tensor tin_shift_backward_cpu(const at::Tensor& grad_output, const at::Tensor& shift, const TinShiftParams& p) {
  return shift_frames(grad_output, shift, p, /*reverse=*/true);
}

} // namespace kernels
} // namespace mmops
