// A module holding one submodule per detection op (roi_pool, sigmoid/softmax
// focal loss, nms/batched_nms/soft_nms, bbox_overlaps), scripted and saved in
// Python by make_scripted_ops_model.py, is loaded with torch::jit::load and
// must reproduce the Python results (outputs and input gradients, stored in the
// file as buffers) with no Python involved. The results are also checked
// against the public C++ API, and the scripted graphs are run on empty inputs.

#include <mmops/mmops.h>

#include <torch/script.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::vector<std::string> string_list(const torch::jit::Module& module, const std::string& name) {
  std::vector<std::string> out;
  const c10::IValue list = module.attr(name);
  for (const c10::IValue& v : list.toListRef()) {
    out.push_back(v.toStringRef());
  }
  return out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& n : names) {
    if (n == name) {
      return true;
    }
  }
  return false;
}

// Exact for integers and float32 (the same CPU kernels ran in Python);
// 1e-12 for float64, where a reduction may sum in another order.
void expect_matches(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  ASSERT_EQ(actual.sizes(), expected.sizes());
  if (expected.scalar_type() == at::kDouble) {
    EXPECT_TRUE(at::allclose(actual, expected, /*rtol=*/1e-12, /*atol=*/1e-12))
        << "max abs difference " << (actual - expected).abs().max().item<double>();
  } else {
    EXPECT_TRUE(at::equal(actual, expected)) << "actual\n" << actual << "\nexpected\n" << expected;
  }
}

std::vector<at::Tensor> run(torch::jit::Module& module, const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  std::vector<at::Tensor> outs;
  const c10::IValue result = module.forward(args);  // keep it alive while iterating
  for (const c10::IValue& v : result.toTupleRef().elements()) {
    outs.push_back(v.toTensor());
  }
  return outs;
}

// Runs a submodule on its stored example inputs; compares every output and,
// for the differentiable ones, the gradients of sum(output_0 * example_weight).
std::vector<at::Tensor> check_recorded(torch::jit::Module& module) {
  const std::vector<std::string> input_names = string_list(module, "input_names");
  const std::vector<std::string> grad_names = string_list(module, "grad_names");
  std::vector<at::Tensor> inputs;
  for (const std::string& name : input_names) {
    at::Tensor x = module.attr("example_" + name).toTensor().clone();
    inputs.push_back(contains(grad_names, name) ? x.requires_grad_(true) : x);
  }
  const std::vector<at::Tensor> outs = run(module, inputs);
  EXPECT_FALSE(outs.empty());
  for (size_t i = 0; i < outs.size(); ++i) {
    expect_matches(outs[i].detach(), module.attr("expected_" + std::to_string(i)).toTensor(),
                   "output " + std::to_string(i));
  }
  if (!grad_names.empty()) {
    (outs[0] * module.attr("example_weight").toTensor()).sum().backward();
    for (size_t i = 0; i < input_names.size(); ++i) {
      if (contains(grad_names, input_names[i])) {
        EXPECT_TRUE(inputs[i].grad().defined()) << input_names[i];
        expect_matches(inputs[i].grad(), module.attr("expected_grad_" + input_names[i]).toTensor(),
                       "gradient of " + input_names[i]);
      }
    }
  }
  return outs;
}

class TorchScriptOps : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("MMOPS_SCRIPTED_OPS_MODEL");
    if (path == nullptr) {
      GTEST_SKIP() << "MMOPS_SCRIPTED_OPS_MODEL is not set (ctest sets it after running make_scripted_ops_model.py)";
    }
    model_ = torch::jit::load(path);
  }

  torch::jit::Module submodule(const std::string& name) { return model_.attr(name).toModule(); }

  at::Tensor example(torch::jit::Module& module, const std::string& name) {
    return module.attr("example_" + name).toTensor();
  }

  torch::jit::Module model_;
};

TEST_F(TorchScriptOps, RoIPool) {
  torch::jit::Module m = submodule("roi_pool");
  const std::vector<at::Tensor> outs = check_recorded(m);
  // Columns 66..83 are torch.ops.mmops.roi_pool(features, rois, [2, 3], 1.0).flatten(1).
  const at::Tensor features = example(m, "features");
  const at::Tensor rois = example(m, "rois");
  expect_matches(mmops::roi_pool(features, rois, {2, 3}, 1.0).flatten(1), outs[0].detach().slice(1, 66, 84),
                 "C++ API roi_pool");
  // The scripted graph with no rois.
  const std::vector<at::Tensor> empty = run(m, {features, rois.slice(0, 0, 0)});
  EXPECT_EQ(empty[0].sizes(), (at::IntArrayRef{0, 84}));
}

TEST_F(TorchScriptOps, FocalLoss) {
  torch::jit::Module m = submodule("focal_loss");
  const std::vector<at::Tensor> outs = check_recorded(m);
  // Layout: sigmoid "none" with weight [7 * 5], sigmoid sum, sigmoid mean,
  // softmax "none" with weight [7], softmax mean, softmax sum.
  const at::Tensor out = outs[0].detach();
  ASSERT_EQ(out.numel(), 46);
  const at::Tensor logits = example(m, "logits");
  const at::Tensor sig_t = example(m, "sigmoid_target");
  const at::Tensor soft_t = example(m, "softmax_target");
  const at::Tensor weight = m.attr("sig_none").toModule().attr("weight").toTensor();
  ASSERT_EQ(weight.numel(), 5);
  expect_matches(mmops::sigmoid_focal_loss(logits, sig_t, 2.0, 0.25, weight, "none").flatten(), out.slice(0, 0, 35),
                 "C++ API sigmoid_focal_loss none");
  expect_matches(mmops::sigmoid_focal_loss(logits, sig_t, 2.0, 0.25, std::nullopt, "mean").reshape({1}),
                 out.slice(0, 36, 37), "C++ API sigmoid_focal_loss mean");
  expect_matches(mmops::softmax_focal_loss(logits, soft_t, 2.0, 0.25, weight, "none"), out.slice(0, 37, 44),
                 "C++ API softmax_focal_loss none");
  expect_matches(mmops::softmax_focal_loss(logits, soft_t, 1.0, 0.5, std::nullopt, "sum").reshape({1}),
                 out.slice(0, 45, 46), "C++ API softmax_focal_loss sum");
}

TEST_F(TorchScriptOps, Nms) {
  torch::jit::Module m = submodule("nms");
  const std::vector<at::Tensor> outs = check_recorded(m);
  ASSERT_EQ(outs.size(), 9u);
  const at::Tensor boxes = example(m, "boxes");
  const at::Tensor scores = example(m, "scores");
  const at::Tensor idxs = example(m, "idxs");
  // Something was suppressed, and less inside categories than across them.
  EXPECT_LT(outs[0].size(0), boxes.size(0));
  EXPECT_GE(outs[1].size(0), outs[0].size(0));
  expect_matches(mmops::nms(boxes, scores, 0.5), outs[0], "C++ API nms");
  expect_matches(mmops::batched_nms(boxes, scores, idxs, 0.4), outs[1], "C++ API batched_nms");
  const auto soft = mmops::soft_nms(boxes, scores, 0.3, 0.5, 1e-3, "linear");
  expect_matches(std::get<0>(soft), outs[2], "C++ API soft_nms dets");
  expect_matches(std::get<1>(soft), outs[3], "C++ API soft_nms keep");
  // The scripted graph with no boxes.
  const std::vector<at::Tensor> empty =
      run(m, {boxes.slice(0, 0, 0), scores.slice(0, 0, 0), idxs.slice(0, 0, 0)});
  for (size_t i = 0; i < empty.size(); ++i) {
    EXPECT_EQ(empty[i].size(0), 0) << "output " << i;
  }
}

TEST_F(TorchScriptOps, BBoxOverlaps) {
  torch::jit::Module m = submodule("bbox_overlaps");
  const std::vector<at::Tensor> outs = check_recorded(m);
  // Layout: iou [6 * 8], iof offset 1 [6 * 8], aligned iou offset 1 [6], aligned iof [6].
  const at::Tensor out = outs[0].detach();
  ASSERT_EQ(out.numel(), 108);
  const at::Tensor b1 = example(m, "bboxes1");
  const at::Tensor b2 = example(m, "bboxes2");
  expect_matches(mmops::bbox_overlaps(b1, b2).flatten(), out.slice(0, 0, 48), "C++ API iou");
  expect_matches(mmops::bbox_overlaps(b1, b2, "iof", false, 1).flatten(), out.slice(0, 48, 96),
                 "C++ API iof offset 1");
  expect_matches(mmops::bbox_overlaps(b1, b2.slice(0, 0, 6), "iou", true, 1), out.slice(0, 96, 102),
                 "C++ API aligned iou offset 1");
  expect_matches(mmops::bbox_overlaps(b1, b2.slice(0, 0, 6), "iof", true, 0), out.slice(0, 102, 108),
                 "C++ API aligned iof");
}

TEST_F(TorchScriptOps, MsDeformAttn) {
  torch::jit::Module m = submodule("ms_deform_attn");
  const std::vector<at::Tensor> outs = check_recorded(m);
  // Layout: the op [2 * 5 * 6], the functional wrapper on 2 * value [2 * 5 * 6],
  // MultiScaleDeformableAttention [2 * 16 * 8].
  const at::Tensor out = outs[0].detach();
  ASSERT_EQ(out.numel(), 376);
  const at::Tensor value = example(m, "value");
  const at::Tensor shapes = example(m, "spatial_shapes");
  const at::Tensor starts = example(m, "level_start_index");
  const at::Tensor loc = example(m, "sampling_locations");
  const at::Tensor attn = example(m, "attention_weights");
  expect_matches(mmops::ms_deform_attn(value, shapes, starts, loc, attn).flatten(), out.slice(0, 0, 60),
                 "C++ API ms_deform_attn");
  expect_matches(mmops::ms_deform_attn(value * 2.0, shapes, starts, loc, attn).flatten(), out.slice(0, 60, 120),
                 "C++ API ms_deform_attn on 2 * value");
}

TEST_F(TorchScriptOps, DeformConv) {
  torch::jit::Module m = submodule("deform_conv");
  const std::vector<at::Tensor> outs = check_recorded(m);
  // Layout: modulated_deform_conv2d [2 * 6 * 5 * 6], deform_conv2d [360] (both with
  // dcn.weight, deform_groups 2), DeformConv2dPack [360], ModulatedDeformConv2dPack [2 * 4 * 3 * 3].
  const at::Tensor out = outs[0].detach();
  ASSERT_EQ(out.numel(), 1152);
  const at::Tensor input = example(m, "input");
  const at::Tensor offset = example(m, "offset");
  const at::Tensor mask = example(m, "mask");
  const at::Tensor weight = m.attr("dcn").toModule().attr("weight").toTensor();
  expect_matches(mmops::modulated_deform_conv2d(input, offset, mask, weight, std::nullopt, {1, 1}, {1, 1}, {1, 1}, 1, 2)
                     .flatten(),
                 out.slice(0, 0, 360), "C++ API modulated_deform_conv2d");
  expect_matches(mmops::deform_conv2d(input, offset, weight, std::nullopt, {1, 1}, {1, 1}, {1, 1}, 1, 2).flatten(),
                 out.slice(0, 360, 720), "C++ API deform_conv2d");
  // The scripted graph with an empty batch.
  const std::vector<at::Tensor> empty = run(m, {input.slice(0, 0, 0), offset.slice(0, 0, 0), mask.slice(0, 0, 0)});
  EXPECT_EQ(empty[0].numel(), 0);
}

} // namespace
