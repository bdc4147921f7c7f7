// CUDA kernels of tin_shift (tin_shift_math.h). Memory-bound: every result
// value is one load (or none, outside [0, T)) and one store, so the kernel is
// a copy at full width. It moves words, not values: a word is 16 bytes (4
// float, 8 half / bfloat16, 2 double) when a whole number of words makes up
// every (clip, frame, group) run of C / G * H * W values and both pointers are
// 16-byte aligned; else it is one value (2, 4 or 8 bytes). The run, and so the
// shift, is the same for every value of a word, and the source of a word is
// whole frames (C * H * W values, a multiple of the word) away: aligned too.
// Thread i handles words i, i + stride, ... of the flat result: consecutive
// threads, consecutive words, loads and stores coalesced (the layout is
// [N, T, C, H * W], so H * W is the fastest dim). Bytes moved: the result
// written once, the source read once where it lands in range: at most
// 2 * numel * element_size, the floor of any implementation.
// The shift is read from the tensor as given (int32 or int64) and compared
// without overflow (any value: |shift| >= T gives zeros). 32-bit index
// arithmetic when every word index fits, 64-bit otherwise.

#include "tin_shift/tin_shift_kernels.h"

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

using tin_shift_math::source_frame;

constexpr int kThreads = 256;
constexpr int kWideBytes = 16;

// The layout in words: a run is the C / G * H * W values of one (clip, frame, group).
template <typename index_t>
struct WordLayout {
  index_t words;       // of the whole tensor
  index_t run_words;   // of one run
  index_t frame_words; // of one frame (C * H * W values)
  index_t groups, frames;
};

template <typename Word, typename index_t, typename shift_t>
__global__ void __launch_bounds__(kThreads)
    shift_frames_kernel(const Word* __restrict__ source, const shift_t* __restrict__ shift, Word* __restrict__ result,
                        const WordLayout<index_t> l, bool reverse) {
  const index_t stride = static_cast<index_t>(gridDim.x) * kThreads;
  for (index_t w = static_cast<index_t>(blockIdx.x) * kThreads + threadIdx.x; w < l.words; w += stride) {
    const index_t run = w / l.run_words;
    const index_t g = run % l.groups;
    const index_t nt = run / l.groups;
    const index_t t = nt % l.frames;
    const index_t n = nt / l.frames;
    const int64_t s = static_cast<int64_t>(__ldg(shift + n * l.groups + g));
    const int64_t from = source_frame(t, s, l.frames, reverse);
    Word value{};
    if (from >= 0) { // |from - t| < T: the offset stays inside the tensor
      value = __ldg(source + (w + (static_cast<index_t>(from) - t) * l.frame_words));
    }
    result[w] = value;
  }
}

template <typename index_t>
WordLayout<index_t> layout_of(const TinShiftParams& p, int64_t per_word) {
  WordLayout<index_t> l;
  l.run_words = static_cast<index_t>(p.group_channels * p.positions / per_word);
  l.frame_words = static_cast<index_t>(p.channels * p.positions / per_word);
  l.words = static_cast<index_t>(p.batch * p.frames * p.channels * p.positions / per_word);
  l.groups = static_cast<index_t>(p.groups);
  l.frames = static_cast<index_t>(p.frames);
  return l;
}

template <typename Word, typename shift_t>
void launch_words(const void* source, const shift_t* shift, void* result, const TinShiftParams& p, int64_t element_size,
                  bool reverse, cudaStream_t stream) {
  const int64_t per_word = static_cast<int64_t>(sizeof(Word)) / element_size;
  const int64_t words = p.batch * p.frames * p.channels * p.positions / per_word;
  const int64_t blocks = std::min<int64_t>((words + kThreads - 1) / kThreads, int64_t(1) << 20);
  // 32-bit indices when every word index, and the last grid-stride step past it, fit
  if (words + blocks * kThreads <= std::numeric_limits<int32_t>::max()) {
    shift_frames_kernel<Word, int32_t, shift_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const Word*>(source), shift, static_cast<Word*>(result), layout_of<int32_t>(p, per_word), reverse);
  } else {
    shift_frames_kernel<Word, int64_t, shift_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const Word*>(source), shift, static_cast<Word*>(result), layout_of<int64_t>(p, per_word), reverse);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename shift_t>
void dispatch_word(const at::Tensor& source, const shift_t* shift, at::Tensor& result, const TinShiftParams& p,
                   bool reverse, cudaStream_t stream) {
  const int64_t element_size = static_cast<int64_t>(source.element_size());
  const void* src = source.const_data_ptr();
  void* dst = result.mutable_data_ptr();
  const int64_t per_wide = kWideBytes / element_size;
  const bool wide = (p.group_channels * p.positions) % per_wide == 0 &&
                    reinterpret_cast<uintptr_t>(src) % kWideBytes == 0 &&
                    reinterpret_cast<uintptr_t>(dst) % kWideBytes == 0;
  if (wide) {
    launch_words<uint4>(src, shift, dst, p, element_size, reverse, stream);
  } else if (element_size == 2) {
    launch_words<unsigned short>(src, shift, dst, p, element_size, reverse, stream);
  } else if (element_size == 4) {
    launch_words<unsigned int>(src, shift, dst, p, element_size, reverse, stream);
  } else {
    launch_words<unsigned long long>(src, shift, dst, p, element_size, reverse, stream);
  }
}

at::Tensor shift_frames(const at::Tensor& source_, const at::Tensor& shift_, const TinShiftParams& p, bool reverse) {
  const c10::cuda::CUDAGuard guard(source_.device());
  const at::Tensor source = source_.contiguous();
  at::Tensor result = at::empty(source.sizes(), source.options());
  if (result.numel() == 0) {
    return result;
  }
  const at::Tensor shift = shift_.contiguous();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (shift.scalar_type() == at::kInt) {
    dispatch_word(source, shift.const_data_ptr<int32_t>(), result, p, reverse, stream);
  } else {
    dispatch_word(source, shift.const_data_ptr<int64_t>(), result, p, reverse, stream);
  }
  return result;
}

} // namespace

at::Tensor tin_shift_forward_cuda(const at::Tensor& input, const at::Tensor& shift, const TinShiftParams& p) {
  return shift_frames(input, shift, p, /*reverse=*/false);
}

at::Tensor tin_shift_backward_cuda(const at::Tensor& grad_output, const at::Tensor& shift, const TinShiftParams& p) {
  return shift_frames(grad_output, shift, p, /*reverse=*/true);
}

} // namespace kernels
} // namespace mmops
