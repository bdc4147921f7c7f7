#pragma once
// CPU kernels vectorised with ATen's at::vec::Vectorized<T>, one build per
// instruction set, picked at run time (ATen's own scheme for its CPU kernels).
//
// A file kernels/<family>/*_cpu_simd.cpp is compiled once per instruction set
// (cmake/MmopsCpuSimd.cmake): DEFAULT (the compiler's baseline; Vectorized<T> is
// then portable C++ or NEON), and on x86-64 AVX2 and AVX512, each with ATen's
// flags and CPU_CAPABILITY set to that name. Its functions live in
// namespace CPU_CAPABILITY (mmops::kernels::DEFAULT, ::AVX2, ::AVX512); a
// plain file declares them for each build (MMOPS_CPU_SIMD_DECLARE) and calls
// the one cpu_simd() names.
//
// The rule of such a file (the linker keeps one copy of an inline function
// that several files emit, possibly the AVX512 one): it calls no inline
// function outside namespace CPU_CAPABILITY but ATen's Vectorized (itself in
// at::vec::CPU_CAPABILITY) and templates instantiated on its own types. So it
// takes raw pointers (no at::Tensor, no TORCH_CHECK, no at::parallel_for: the
// caller splits the work) and values already in the compute type. Check: `nm -C
// --defined-only` on its AVX2 / AVX512 objects lists nothing outside
// namespace AVX2 / AVX512 but their iostream initialiser.

#include <ATen/Version.h>

#include <string>

namespace mmops {
namespace kernels {

// The instruction sets of the *_cpu_simd.cpp builds.
enum class CpuSimd { Default, Avx2, Avx512 };

// The build to run: the instruction set ATen's own CPU kernels use (its choice
// from the CPU, or ATEN_CPU_CAPABILITY), or the best one below it that mmops
// was built with.
inline CpuSimd cpu_simd() {
  static const CpuSimd level = [] {
    const std::string aten = at::get_cpu_capability();
    CpuSimd l = aten == "AVX512" ? CpuSimd::Avx512 : (aten == "AVX2" ? CpuSimd::Avx2 : CpuSimd::Default);
#ifndef MMOPS_CPU_SIMD_AVX512
    if (l == CpuSimd::Avx512) {
      l = CpuSimd::Avx2;
    }
#endif
#ifndef MMOPS_CPU_SIMD_AVX2
    if (l == CpuSimd::Avx2) {
      l = CpuSimd::Default;
    }
#endif
    return l;
  }();
  return level;
}

// The function `name` of the build cpu_simd() names (declared for each build
// with MMOPS_CPU_SIMD_DECLARE).
template <typename Fn>
Fn pick_cpu_simd(Fn default_fn, Fn avx2_fn, Fn avx512_fn) {
  switch (cpu_simd()) {
    case CpuSimd::Avx512:
      return avx512_fn;
    case CpuSimd::Avx2:
      return avx2_fn;
    default:
      return default_fn;
  }
}

#ifdef MMOPS_CPU_SIMD_AVX2
#define MMOPS_CPU_SIMD_AVX2_FN(name) &::mmops::kernels::AVX2::name
#else
#define MMOPS_CPU_SIMD_AVX2_FN(name) nullptr
#endif
#ifdef MMOPS_CPU_SIMD_AVX512
#define MMOPS_CPU_SIMD_AVX512_FN(name) &::mmops::kernels::AVX512::name
#else
#define MMOPS_CPU_SIMD_AVX512_FN(name) nullptr
#endif

// Declares `decl` (a function declaration naming no namespace) in the
// namespace of every build: DEFAULT, AVX2, AVX512.
#define MMOPS_CPU_SIMD_DECLARE(decl) \
  namespace DEFAULT {                \
  decl;                              \
  }                                  \
  namespace AVX2 {                   \
  decl;                              \
  }                                  \
  namespace AVX512 {                 \
  decl;                              \
  }

// A pointer to the function `name` (in mmops::kernels) of the build to run.
#define MMOPS_CPU_SIMD_PICK(name)                                              \
  ::mmops::kernels::pick_cpu_simd<decltype(&::mmops::kernels::DEFAULT::name)>( \
      &::mmops::kernels::DEFAULT::name, MMOPS_CPU_SIMD_AVX2_FN(name), MMOPS_CPU_SIMD_AVX512_FN(name))

} // namespace kernels
} // namespace mmops
