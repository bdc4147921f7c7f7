#pragma once
// The vectorised CPU loops of bias_act (bias_act_cpu_simd.cpp, one build per
// instruction set: common/cpu_simd.h) and what they read: raw pointers into
// dense tensors of one layout, as bias_act_cpu.cpp prepares them.

#include "bias_act/bias_act_math.h"
#include "common/cpu_simd.h"

#include <cstdint>

namespace mmops {
namespace kernels {

// Runs of fewer bias values than this get the bias pattern (BiasActCpuCall);
// a block of the loops is at most this long.
constexpr int64_t kMaxBiasBlock = 64;

// The storage type of the tensors (the compute type: float, double for Double).
enum class BiasActCpuDtype { Float, Double, Half, BFloat16 };

// One forward or backward call over the storage of dense tensors of one layout
// (bias_act_kernels.h): the bias of value i is bias[(i / step) % channels].
struct BiasActCpuCall {
  BiasActCpuDtype dtype = BiasActCpuDtype::Float;
  BiasActParams params;
  double clamp_y = -1.0;        // backward: params.clamp rounded to the dtype, then to the compute type
  const void* input = nullptr;  // forward; backward: where the act reads x (swish)
  const void* output = nullptr; // backward: the forward's output, where the act reads y
  const void* grad = nullptr;   // backward: grad_output
  const void* bias = nullptr;   // [channels] in the compute type (float, double for Double), or none
  // step < kMaxBiasBlock: the bias of value i for i < step * channels + kMaxBiasBlock, else none
  const void* bias_pattern = nullptr;
  void* result = nullptr; // the output (forward) or grad_input (backward)
  int64_t step = 1;       // values per bias run (with one channel: every value)
  int64_t channels = 1;   // bias size (1 without a bias)
};

// result[i] for i in [begin, end): the forward (bias_act_math::forward_value)
// or the backward (backward_value, params.order) of each value, computed alone
// (the same for any split and layout).
MMOPS_CPU_SIMD_DECLARE(void bias_act_forward_range(const BiasActCpuCall& call, int64_t begin, int64_t end))
MMOPS_CPU_SIMD_DECLARE(void bias_act_backward_range(const BiasActCpuCall& call, int64_t begin, int64_t end))

} // namespace kernels
} // namespace mmops
