// Every conformance case, saved by test/cpp/make_scripted_cases.py (scripted in
// Python), is loaded with torch::jit::load and must reproduce the Python results
// with no Python involved: the scripted models' outputs and gradients on the CPU
// and on CUDA, and the public C++ API on the ops' recorded arguments.

#include "test_support.h"

#include <mmops/mmops.h>

#include <torch/script.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// The recordings in $MMOPS_SCRIPTED_CASES whose file name holds `kind` (".model" or ".op"), sorted.
std::vector<std::string> recordings(const std::string& kind) {
  std::vector<std::string> files;
  const char* folder = std::getenv("MMOPS_SCRIPTED_CASES");
  if (folder == nullptr || !fs::is_directory(folder)) {
    return files;
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.find(kind) != std::string::npos && name.size() > 3 && name.compare(name.size() - 3, 3, ".pt") == 0) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Skips the test when ctest's fixture (make_scripted_cases.py) has not run.
#define REQUIRE_RECORDINGS(files)                                                                                 \
  if ((files).empty()) {                                                                                          \
    GTEST_SKIP() << "no recordings in MMOPS_SCRIPTED_CASES (ctest sets it after running make_scripted_cases.py)"; \
  }

std::vector<at::Tensor> tensor_list(const torch::jit::Module& holder, const std::string& name) {
  return holder.attr(name).toTensorVector();
}

std::vector<int64_t> int_list(const torch::jit::Module& holder, const std::string& name) {
  return holder.attr(name).toIntVector();
}

// Every tensor in a (nested) tuple or list of results, in order.
void flatten(const c10::IValue& value, std::vector<at::Tensor>& out) {
  if (value.isTensor()) {
    out.push_back(value.toTensor());
  } else if (value.isTuple()) {
    for (const c10::IValue& v : value.toTupleRef().elements()) {
      flatten(v, out);
    }
  } else if (value.isList()) {
    for (const c10::IValue& v : value.toListRef()) {
      flatten(v, out);
    }
  }
}

struct Tolerance {
  double rtol;
  double atol;
};

// Integer tensors equal; floating ones close (compared in float64, NaN where NaN is expected).
void expect_close(const at::Tensor& actual, const at::Tensor& expected, Tolerance tol, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(actual.defined());
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const at::Tensor a = actual.detach().cpu();
  if (!at::isFloatingType(expected.scalar_type())) {
    EXPECT_TRUE(at::equal(a, expected)) << "actual\n" << a << "\nexpected\n" << expected;
  } else if (expected.numel() > 0) {
    const at::Tensor a64 = a.to(at::kDouble);
    const at::Tensor e64 = expected.to(at::kDouble);
    EXPECT_TRUE(at::allclose(a64, e64, tol.rtol, tol.atol, /*equal_nan=*/true)) // the mean of no rows is NaN
        << "max abs difference " << (a64 - e64).abs().max().item<double>();
  }
}

// Runs a model recording on `device`: the outputs and, for each differentiable output,
// its gradients w.r.t. the grad inputs, against the recorded (CPU, eager) results.
// Prints what it compared.
void check_model(const std::string& path, const c10::Device& device) {
  SCOPED_TRACE(path);
  torch::jit::Module holder = torch::jit::load(path);
  torch::jit::Module model = holder.attr("model").toModule();
  model.to(device);
  const std::vector<double> tol = holder.attr("tolerances").toDoubleVector();
  const Tolerance out_tol = device.is_cpu() ? Tolerance{tol[0], tol[1]} : Tolerance{tol[4], tol[5]};
  const Tolerance grad_tol = device.is_cpu() ? Tolerance{tol[2], tol[3]} : Tolerance{tol[4], tol[5]};

  std::vector<at::Tensor> inputs = tensor_list(holder, "inputs");
  const std::vector<int64_t> grad_inputs = int_list(holder, "grad_inputs");
  std::vector<at::Tensor> leaves;
  for (size_t k = 0; k < inputs.size(); ++k) {
    inputs[k] = inputs[k].to(device);
    if (std::find(grad_inputs.begin(), grad_inputs.end(), static_cast<int64_t>(k)) != grad_inputs.end()) {
      inputs[k].requires_grad_(true);
      leaves.push_back(inputs[k]);
    }
  }
  std::vector<c10::IValue> args;
  size_t next = 0;
  for (int64_t n : int_list(holder, "input_layout")) {
    if (n < 0) {
      args.emplace_back(inputs[next++]);
    } else {
      c10::List<at::Tensor> list;
      for (int64_t i = 0; i < n; ++i) {
        list.push_back(inputs[next++]);
      }
      args.emplace_back(list);
    }
  }

  std::vector<at::Tensor> outputs;
  flatten(model.forward(args), outputs);
  const std::vector<at::Tensor> expected = tensor_list(holder, "outputs");
  ASSERT_EQ(outputs.size(), expected.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    expect_close(outputs[i], expected[i], out_tol, "output " + std::to_string(i));
  }

  const std::vector<at::Tensor> cotangents = tensor_list(holder, "cotangents");
  const c10::List<bool> differentiable = holder.attr("differentiable").toBoolList();
  const std::vector<at::Tensor> grads = tensor_list(holder, "grads");
  size_t g = 0;
  for (size_t i = 0; i < outputs.size() && !leaves.empty(); ++i) {
    if (!differentiable[i]) {
      continue;
    }
    const std::vector<at::Tensor> got = torch::autograd::grad({outputs[i]}, leaves, {cotangents[i].to(device)},
                                                              /*retain_graph=*/true, /*create_graph=*/false,
                                                              /*allow_unused=*/true);
    for (size_t j = 0; j < leaves.size(); ++j, ++g) {
      ASSERT_LT(g, grads.size());
      const at::Tensor grad = got[j].defined() ? got[j] : at::zeros_like(leaves[j]);
      expect_close(grad, grads[g], grad_tol,
                   "gradient of output " + std::to_string(i) + " w.r.t. input " + std::to_string(j));
    }
  }
  EXPECT_EQ(g, grads.size()) << "recorded gradients left unchecked";
  std::cout << "  " << fs::path(path).filename().string() << " on " << device << ": " << outputs.size() << " outputs, "
            << g << " gradients\n";
}

TEST(TorchScriptCases, ModelsSavedInPythonRunOnTheCpu) {
  const std::vector<std::string> models = recordings(".model");
  REQUIRE_RECORDINGS(models);
  for (const std::string& path : models) {
    check_model(path, c10::Device(c10::kCPU));
  }
}

TEST(TorchScriptCases, ModelsSavedInPythonRunOnCuda) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const std::vector<std::string> models = recordings(".model");
  REQUIRE_RECORDINGS(models);
  // full float32 products in cuDNN / cuBLAS, as on the CPU
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  for (const std::string& path : models) {
    check_model(path, c10::Device(c10::kCUDA));
  }
}

// ---------------------------------------------------------------------------- the C++ API

using mmops_test::ApiArgs;
using mmops_test::ApiOutputs;
using mmops_test::cpp_api;

// The C++ API on every recorded op call (each case's sample and empty samples) gives the
// outputs Python's op gave: exactly (1e-12 in float64, where a reduction may sum in another order).
TEST(TorchScriptCases, CppApiGivesThePythonResults) {
  const std::vector<std::string> calls = recordings(".op");
  REQUIRE_RECORDINGS(calls);
  std::map<std::string, int> checked;
  for (const std::string& path : calls) {
    SCOPED_TRACE(path);
    torch::jit::Module holder = torch::jit::load(path);
    const std::string op = holder.attr("op_name").toStringRef();
    const auto entry = cpp_api().find(op);
    if (entry == cpp_api().end()) {
      ADD_FAILURE() << op << " has no mmops_test::CppApiEntry (in its test/cpp/test_<family>.cpp)";
      continue;
    }
    const ApiArgs args = holder.attr("args").toTupleRef().elements().vec();
    const ApiOutputs outputs = entry->second(args);
    const std::vector<at::Tensor> expected = tensor_list(holder, "outputs");
    ASSERT_EQ(outputs.size(), expected.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const bool is_double = expected[i].scalar_type() == at::kDouble;
      expect_close(outputs[i], expected[i], is_double ? Tolerance{1e-12, 1e-12} : Tolerance{0.0, 0.0},
                   "output " + std::to_string(i));
    }
    ++checked[op];
  }
  for (const auto& [op, n] : checked) {
    std::cout << "  " << op << ": " << n << " calls\n";
  }
}

} // namespace
