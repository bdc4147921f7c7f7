#pragma once
// Helpers of the argument validation (src/<family>/<family>_checks.cpp):
// TORCH_CHECK messages name the argument, what was expected and what was
// received. Everything here works on fake/meta tensors (no data access).

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>
#include <c10/util/string_view.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mmops {
namespace detail {

// The (symbolic) shape of a tensor as text, e.g. "[2, 5]".
inline std::string shape_of(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sym_sizes();
  return s.str();
}

// Concrete values of sizes that a real (non-fake) kernel needs.
inline std::vector<int64_t> concrete(c10::SymIntArrayRef sizes) {
  std::vector<int64_t> out;
  out.reserve(sizes.size());
  for (const c10::SymInt& s : sizes) {
    out.push_back(s.guard_int(__FILE__, __LINE__));
  }
  return out;
}

// A size for the params of a check: its value, or -1 while it is symbolic
// (meta kernels only; device entries always see concrete sizes).
inline int64_t int_or_unknown(const c10::SymInt& s) {
  return s.maybe_as_int().value_or(-1);
}

// Size arithmetic in 64 bits, overflow-checked: a * b and a + b, or an error
// "<op><what> does not fit in int64 (a * b)" where `what` names the size and
// the arguments it comes from.
inline int64_t checked_mul(const char* op, const char* what, int64_t a, int64_t b) {
  int64_t r = 0;
  TORCH_CHECK(!__builtin_mul_overflow(a, b, &r), op, what, " does not fit in int64 (", a, " * ", b, ")");
  return r;
}

inline int64_t checked_add(const char* op, const char* what, int64_t a, int64_t b) {
  int64_t r = 0;
  TORCH_CHECK(!__builtin_add_overflow(a, b, &r), op, what, " does not fit in int64 (", a, " + ", b, ")");
  return r;
}

// The product of sizes (int64), overflow-checked as checked_mul.
inline int64_t checked_product(const char* op, const char* what, c10::ArrayRef<int64_t> sizes) {
  int64_t out = 1;
  for (const int64_t s : sizes) {
    out = checked_mul(op, what, out, s);
  }
  return out;
}

// One choice of a string argument parsed into its enum, e.g.
//   parse_choice(op, "pool_mode", pool_mode, {{"avg", PoolMode::Avg}, {"max", PoolMode::Max}})
// The error reads: pool_mode must be "avg" or "max", but got "x".
template <typename Enum, size_t N>
Enum parse_choice(const char* op, const char* arg, c10::string_view value,
                  const std::pair<const char*, Enum> (&choices)[N]) {
  static_assert(N > 0, "parse_choice needs at least one choice");
  for (const auto& [name, e] : choices) {
    if (value == name) {
      return e;
    }
  }
  std::string expected;
  for (size_t i = 0; i < N; ++i) {
    expected += i == 0 ? "" : (i + 1 == N ? " or " : ", ");
    expected += std::string("\"") + choices[i].first + "\"";
  }
  TORCH_CHECK(false, op, arg, " must be ", expected, ", but got \"", std::string(value), "\"");
}

// The name of an enum value parsed by parse_choice (for saved autograd state
// that is passed on to a backward schema taking the string).
template <typename Enum, size_t N>
const char* choice_name(Enum e, const std::pair<const char*, Enum> (&choices)[N]) {
  for (const auto& [name, value] : choices) {
    if (value == e) {
      return name;
    }
  }
  TORCH_INTERNAL_ASSERT(false, "choice_name: unknown enum value");
}

} // namespace detail
} // namespace mmops
