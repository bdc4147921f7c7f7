// A module scripted and saved in Python (make_scripted_model.py) is loaded with
// torch::jit::load and must reproduce the Python result, forward and backward,
// with no Python involved.

#include <mmops/mmops.h>

#include <torch/script.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

TEST(TorchScript, ModuleSavedInPythonRunsInCpp) {
  const char* path = std::getenv("MMOPS_SCRIPTED_MODEL");
  if (path == nullptr) {
    GTEST_SKIP() << "MMOPS_SCRIPTED_MODEL is not set (ctest sets it after running make_scripted_model.py)";
  }
  torch::jit::Module model = torch::jit::load(path);
  const at::Tensor features = model.attr("example_features").toTensor().clone().requires_grad_(true);
  const at::Tensor rois = model.attr("example_rois").toTensor();
  const at::Tensor out = model.forward({features, rois}).toTensor();
  EXPECT_TRUE(at::allclose(out, model.attr("expected_output").toTensor(), 1e-12, 1e-12));

  (out * model.attr("example_weight").toTensor()).sum().backward();
  EXPECT_TRUE(at::allclose(features.grad(), model.attr("expected_grad").toTensor(), 1e-12, 1e-12));
}

} // namespace
