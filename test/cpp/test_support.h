#pragma once
// Helpers shared by the GoogleTest files: error-message checks, a TorchScript
// resolver for source compiled from C++, and the table of public C++ functions
// that test_torchscript.cpp calls on the recorded conformance cases.

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mmops_test {

// The message of the c10::Error that fn() throws, or "<no error>".
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "<no error>";
}

// torch::jit::compile's default resolver knows `torch` as the aten namespace
// only; this one also resolves `torch.ops.<namespace>` as Python does, so the
// same source a user writes in Python compiles here.
struct TorchOpsNamespaces : torch::jit::SugaredValue {
  std::string kind() const override { return "torch.ops"; }
  std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange&, torch::jit::GraphFunction&,
                                                 const std::string& ns) override {
    return std::make_shared<torch::jit::BuiltinModule>(ns);
  }
};

struct TorchModule : torch::jit::SugaredValue {
  std::string kind() const override { return "torch"; }
  std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange& loc, torch::jit::GraphFunction& m,
                                                 const std::string& field) override {
    if (field == "ops") {
      return std::make_shared<TorchOpsNamespaces>();
    }
    return torch::jit::BuiltinModule("aten").attr(loc, m, field);
  }
};

struct TorchResolver : torch::jit::Resolver {
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name, torch::jit::GraphFunction&,
                                                         const torch::jit::SourceRange&) override {
    return name == "torch" ? std::make_shared<TorchModule>() : nullptr;
  }
};

// ---- The public C++ API of every op, called with the op's arguments in schema order.
using ApiArgs = std::vector<c10::IValue>;
using ApiOutputs = std::vector<at::Tensor>;
using ApiCall = std::function<ApiOutputs(const ApiArgs&)>;

// "mmops::<op>" -> its call; filled at start-up by the CppApiEntry of each test/cpp/test_<family>.cpp.
inline std::map<std::string, ApiCall>& cpp_api() {
  static std::map<std::string, ApiCall> api;
  return api;
}

struct CppApiEntry {
  CppApiEntry(const std::string& op, ApiCall call) { cpp_api().emplace(op, std::move(call)); }
};

inline std::optional<at::Tensor> optional_tensor(const c10::IValue& v) {
  return v.isNone() ? std::nullopt : std::optional<at::Tensor>(v.toTensor());
}

// The gradient autograd gives for the scalar loss(x) at input (double) against central
// finite differences (step eps), at every stride-th element, to tol.
template <typename Loss>
void expect_finite_differences(Loss&& loss, const at::Tensor& input, int64_t stride = 1, double tol = 1e-6,
                               double eps = 1e-6) {
  const at::Tensor x = input.clone().requires_grad_(true);
  loss(x).backward();
  const at::Tensor analytic = x.grad();
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < input.numel(); i += stride) {
    at::Tensor plus = input.clone(), minus = input.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const at::Tensor up = loss(plus), down = loss(minus); // named: no `.template item` needed
    const double numeric = (up.item<double>() - down.item<double>()) / (2 * eps);
    EXPECT_NEAR(analytic.view(-1)[i].item<double>(), numeric, tol) << "element " << i;
  }
}

// fn(input, rois) and its input gradient (of the sum) on CUDA against CPU float32 on the same
// rounded values, in every floating dtype. The caller skips without a CUDA device.
template <typename Fn>
void expect_cuda_matches_cpu(Fn&& fn, const at::Tensor& input, const at::Tensor& rois, double tol = 2e-2,
                             double grad_tol = 5e-2) {
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor x = input.to(dtype), r = rois.to(dtype);
    // detach: fresh leaves (x.to(kFloat) is `input` itself when dtype is float)
    const at::Tensor xc = x.cuda().detach().requires_grad_(true);
    const at::Tensor xh = x.to(at::kFloat).detach().requires_grad_(true);
    const at::Tensor oc = fn(xc, r.cuda()), oh = fn(xh, r.to(at::kFloat));
    EXPECT_TRUE(oc.cpu().to(at::kFloat).allclose(oh, tol, tol)) << dtype;
    oc.sum().backward();
    oh.sum().backward();
    EXPECT_TRUE(xc.grad().cpu().to(at::kFloat).allclose(xh.grad(), grad_tol, grad_tol)) << dtype;
  }
}

} // namespace mmops_test

#define EXPECT_ERROR_MENTIONS(statement, text)                                        \
  EXPECT_NE(::mmops_test::error_of([&] { statement; }).find(text), std::string::npos) \
      << ::mmops_test::error_of([&] { statement; })
