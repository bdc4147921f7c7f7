// Every op, forward and backward, called from 8 threads at once gives what the
// same calls give one after the other, bitwise: on the CPU, and on CUDA with one
// stream of the pool per thread. The strict-index switch may be flipped while
// other threads run ops.

#include <mmops/config.h>
#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>
#ifdef MMOPS_TEST_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 8;
constexpr int kRounds = 3;

using Results = std::vector<at::Tensor>;

// One op's call: its inputs (made once, shared by every thread, read only) and
// run(inputs on a device) -> outputs and, for a differentiable op, the gradients of
// sum(output * a fixed cotangent) w.r.t. its differentiable inputs.
struct OpCall {
  std::string name;
  std::vector<at::Tensor> inputs;
  std::vector<bool> differentiable; // per input
  std::function<Results(const std::vector<at::Tensor>&)> forward;
  size_t outputs = 1; // forward outputs; the gradients follow them in the results
};

at::Tensor rois_for(int64_t k, int64_t batch, double size, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor xy = at::rand({k, 4}, gen, at::kDouble) * size;
  const at::Tensor lo = at::minimum(xy.slice(1, 0, 2), xy.slice(1, 2, 4));
  const at::Tensor hi = at::maximum(xy.slice(1, 0, 2), xy.slice(1, 2, 4)) + 1.0;
  const at::Tensor b = at::randint(0, batch, {k, 1}, gen, at::kDouble);
  return at::cat({b, lo, hi}, 1);
}

at::Tensor boxes_for(int64_t n, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor xy = at::rand({n, 2}, gen, at::kDouble) * 20.0;
  const at::Tensor wh = at::rand({n, 2}, gen, at::kDouble) * 10.0 + 0.5;
  return at::cat({xy, xy + wh}, 1);
}

at::Tensor randn(at::IntArrayRef sizes, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(sizes, gen, at::kDouble);
}

std::vector<OpCall> op_calls() {
  std::vector<OpCall> calls;
  auto one = [](const at::Tensor& t) { return Results{t}; };
  const at::Tensor feat = randn({2, 3, 12, 14}, 1);
  const at::Tensor rois = rois_for(9, 2, 12.0, 2);
  for (const char* mode : {"avg", "max"}) {
    calls.push_back({std::string("roi_align_") + mode, {feat, rois}, {true, false}, [mode, one](const Results& a) {
                       return one(mmops::roi_align(a[0], a[1], {3, 4}, 1.0, 2, mode, true));
                     }});
  }
  calls.push_back({"roi_pool", {feat, rois}, {true, false}, [one](const Results& a) {
                     return one(mmops::roi_pool(a[0], a[1], {3, 3}, 1.0));
                   }});
  const at::Tensor fine = randn({2, 3, 16, 16}, 3);
  const at::Tensor coarse = randn({2, 3, 8, 8}, 4);
  const at::Tensor image_rois = rois_for(10, 2, 30.0, 5);
  calls.push_back(
      {"multi_level_roi_align", {fine, coarse, image_rois}, {true, true, false}, [one](const Results& a) {
         return one(mmops::multi_level_roi_align({a[0], a[1]}, a[2], {2, 2}, {0.5, 0.25}, 2, "avg", true, 8));
       }});
  const at::Tensor boxes = boxes_for(40, 6);
  const at::Tensor scores = at::rand({40}, at::make_generator<at::CPUGeneratorImpl>(7), at::kDouble);
  const at::Tensor idxs = at::randint(0, 3, {40}, at::make_generator<at::CPUGeneratorImpl>(8), at::kLong);
  calls.push_back(
      {"nms", {boxes, scores}, {false, false}, [one](const Results& a) { return one(mmops::nms(a[0], a[1], 0.5)); }});
  calls.push_back({"batched_nms", {boxes, scores, idxs}, {false, false, false}, [one](const Results& a) {
                     return one(mmops::batched_nms(a[0], a[1], a[2], 0.5));
                   }});
  calls.push_back({"soft_nms",
                   {boxes, scores},
                   {false, false},
                   [](const Results& a) {
                     const auto [dets, keep] = mmops::soft_nms(a[0], a[1], 0.3, 0.5, 1e-3, "gaussian");
                     return Results{dets, keep};
                   },
                   2});
  calls.push_back({"nms_match", {at::cat({boxes, scores.unsqueeze(1)}, 1)}, {false}, [one](const Results& a) {
                     return one(mmops::nms_match(a[0], 0.3));
                   }});
  calls.push_back({"bbox_overlaps", {boxes, boxes_for(30, 9)}, {true, true}, [one](const Results& a) {
                     return one(mmops::bbox_overlaps(a[0], a[1], "iou", false, 0));
                   }});
  const at::Tensor logits = randn({20, 5}, 10);
  const at::Tensor target = at::randint(0, 5, {20}, at::make_generator<at::CPUGeneratorImpl>(11), at::kLong);
  const at::Tensor class_weight = at::rand({5}, at::make_generator<at::CPUGeneratorImpl>(12), at::kDouble);
  calls.push_back({"sigmoid_focal_loss", {logits, target, class_weight}, {true, false, false}, [one](const Results& a) {
                     return one(mmops::sigmoid_focal_loss(a[0], a[1], 2.0, 0.25, a[2], "none"));
                   }});
  calls.push_back({"softmax_focal_loss", {logits, target, class_weight}, {true, false, false}, [one](const Results& a) {
                     return one(mmops::softmax_focal_loss(a[0], a[1], 2.0, 0.25, a[2], "mean"));
                   }});
  const at::Tensor x = randn({2, 4, 7, 6}, 13);
  const at::Tensor offset = randn({2, 18, 7, 6}, 14) * 1.5;
  const at::Tensor mask = at::rand({2, 9, 7, 6}, at::make_generator<at::CPUGeneratorImpl>(15), at::kDouble);
  const at::Tensor weight = randn({6, 4, 3, 3}, 16);
  const at::Tensor bias = randn({6}, 17);
  calls.push_back({"deform_conv2d", {x, offset, weight, bias}, {true, true, true, true}, [one](const Results& a) {
                     return one(mmops::deform_conv2d(a[0], a[1], a[2], a[3], {1, 1}, {1, 1}, {1, 1}, 1, 1));
                   }});
  calls.push_back(
      {"modulated_deform_conv2d",
       {x, offset, mask, weight, bias},
       {true, true, true, true, true},
       [one](const Results& a) {
         return one(mmops::modulated_deform_conv2d(a[0], a[1], a[2], a[3], a[4], {1, 1}, {1, 1}, {1, 1}, 1, 1));
       }});
  const at::Tensor conv_mask = randn({2, 7, 6}, 21);
  calls.push_back({"masked_conv2d", {x, conv_mask, weight, bias}, {true, false, true, true}, [one](const Results& a) {
                     return one(mmops::masked_conv2d(a[0], a[1], a[2], a[3], {1, 1}));
                   }});
  const at::Tensor shapes = at::tensor({4, 5, 2, 3}, at::kLong).reshape({2, 2});
  const at::Tensor starts = at::tensor({0, 20}, at::kLong);
  const at::Tensor value = randn({2, 26, 2, 3}, 18);
  const at::Tensor loc = at::rand({2, 5, 2, 2, 2, 2}, at::make_generator<at::CPUGeneratorImpl>(19), at::kDouble);
  const at::Tensor attn = at::rand({2, 5, 2, 2, 2}, at::make_generator<at::CPUGeneratorImpl>(20), at::kDouble);
  calls.push_back(
      {"ms_deform_attn", {value, shapes, starts, loc, attn}, {true, false, false, true, true}, [one](const Results& a) {
         return one(mmops::ms_deform_attn(a[0], a[1], a[2], a[3], a[4]));
       }});
  return calls;
}

// The outputs and gradients of one call on `device` (its inputs moved there).
Results run(const OpCall& call, const c10::Device& device) {
  std::vector<at::Tensor> inputs, leaves;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    at::Tensor t = call.inputs[i].to(device);
    if (call.differentiable[i]) {
      t = t.detach().requires_grad_(true);
      leaves.push_back(t);
    }
    inputs.push_back(t);
  }
  Results outputs = call.forward(inputs);
  Results results;
  std::vector<at::Tensor> grad_outputs, diff_outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    results.push_back(outputs[i].detach());
    if (outputs[i].requires_grad()) {
      diff_outputs.push_back(outputs[i]);
      const at::Tensor cot = at::arange(outputs[i].numel(), at::kDouble).reshape(outputs[i].sizes());
      grad_outputs.push_back(at::cos(cot).to(outputs[i].options()));
    }
  }
  if (!leaves.empty() && !diff_outputs.empty()) {
    for (const at::Tensor& g : torch::autograd::grad(diff_outputs, leaves, grad_outputs, /*retain_graph=*/false,
                                                     /*create_graph=*/false, /*allow_unused=*/true)) {
      results.push_back(g);
    }
  }
  for (at::Tensor& r : results) {
    r = r.defined() ? r.cpu() : r;
  }
  return results;
}

// Forward results bitwise equal; gradients too, unless `grad_rtol` > 0 (CUDA
// gradients accumulated with atomics add in any order).
void expect_same(const OpCall& call, const Results& got, const Results& expected, double grad_rtol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].defined(), expected[i].defined()) << what << ", result " << i;
    if (!got[i].defined()) {
      continue;
    }
    ASSERT_EQ(got[i].sizes(), expected[i].sizes()) << what << ", result " << i;
    const bool exact = i < call.outputs || grad_rtol == 0.0 || !at::isFloatingType(expected[i].scalar_type());
    EXPECT_TRUE(exact ? at::equal(got[i], expected[i]) : at::allclose(got[i], expected[i], grad_rtol, grad_rtol))
        << what << ", result " << i << " differs from the sequential run";
  }
}

// The sequential results: each call in a thread of its own, one after the other
// (a fresh thread, as in the concurrent run, so that the intra-op thread count is the same).
std::vector<Results> sequential(const std::vector<OpCall>& calls, const std::function<Results(const OpCall&)>& fn) {
  std::vector<Results> expected;
  for (const OpCall& call : calls) {
    std::thread([&] { expected.push_back(fn(call)); }).join();
  }
  return expected;
}

// Every thread runs every call kRounds times, each thread starting at another op;
// failures are collected and reported from the main thread.
void run_concurrently(const std::vector<OpCall>& calls, const std::vector<Results>& expected,
                      const std::function<Results(const OpCall&)>& fn, double grad_rtol = 0.0) {
  std::vector<std::vector<std::pair<size_t, Results>>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        ready.fetch_add(1);
        while (ready.load() < kThreads) {
          std::this_thread::yield();
        }
        for (int round = 0; round < kRounds; ++round) {
          for (size_t k = 0; k < calls.size(); ++k) {
            const size_t op = (k + static_cast<size_t>(t) * 3) % calls.size();
            got[t].emplace_back(op, fn(calls[op]));
          }
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
    EXPECT_EQ(got[t].size(), errors[t].empty() ? calls.size() * kRounds : got[t].size());
    for (const auto& [op, results] : got[t]) {
      expect_same(calls[op], results, expected[op], grad_rtol, calls[op].name + " in thread " + std::to_string(t));
    }
  }
}

TEST(Concurrency, EveryOpFromEightCpuThreads) {
  const std::vector<OpCall> calls = op_calls();
  const auto fn = [](const OpCall& call) { return run(call, c10::Device(c10::kCPU)); };
  const std::vector<Results> expected = sequential(calls, fn);
  ASSERT_EQ(expected.size(), calls.size());
  run_concurrently(calls, expected, fn);
}

#ifdef MMOPS_TEST_WITH_CUDA
// On CUDA each thread runs on a stream of its own from the pool; results are
// compared once the stream is done. Forward results are bitwise equal; gradients
// that CUDA accumulates with atomics (in float64 here) may differ in the order of
// their additions, so they are compared to 1e-12.
constexpr double kCudaGradRtol = 1e-12;

Results run_on_stream(const OpCall& call) {
  const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  const c10::cuda::CUDAStreamGuard guard(stream);
  Results results = run(call, c10::Device(c10::kCUDA, 0));
  stream.synchronize();
  return results;
}
#endif

TEST(Concurrency, EveryOpFromEightCudaThreadsOneStreamEach) {
#ifndef MMOPS_TEST_WITH_CUDA
  GTEST_SKIP() << "mmops was built without CUDA";
#else
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  const std::vector<OpCall> calls = op_calls();
  const std::vector<Results> expected = sequential(calls, run_on_stream);
  run_concurrently(calls, expected, run_on_stream, kCudaGradRtol);
#endif
}

// A roi_align call whose roi 1 names batch image 5 of 2: the CPU always raises,
// naming rois; CUDA raises in strict mode and pools zeros for that roi otherwise.
bool bad_index_call_behaves(const c10::Device& device) {
  at::Tensor rois = rois_for(3, 2, 12.0, 21);
  rois[1][0] = 5.0;
  const at::Tensor feat = randn({2, 3, 12, 14}, 1).to(device);
  try {
    const at::Tensor out = mmops::roi_align(feat, rois.to(device), {2, 2}, 1.0, 2, "avg", true).cpu();
    return device.is_cuda() && at::equal(out[1], at::zeros_like(out[1]));
  } catch (const c10::Error& e) {
    return std::string(e.what_without_backtrace()).find("rois") != std::string::npos;
  }
}

void flip_while_running(const c10::Device& device, const std::function<Results(const OpCall&)>& fn, double grad_rtol) {
  const bool before = mmops::strict_index_check();
  const std::vector<OpCall> calls = op_calls();
  const std::vector<Results> expected = sequential(calls, fn);
  std::atomic<bool> stop{false};
  std::atomic<int> flips{0}, bad_calls{0}, misbehaved{0};
  std::thread flipper([&] {
    while (!stop.load()) {
      mmops::set_strict_index_check(flips.fetch_add(1) % 2 == 0);
      std::this_thread::yield();
    }
  });
  std::thread bad_caller([&] {
    while (!stop.load()) {
      misbehaved += bad_index_call_behaves(device) ? 0 : 1;
      bad_calls += 1;
    }
  });
  run_concurrently(calls, expected, fn, grad_rtol);
  stop.store(true);
  flipper.join();
  bad_caller.join();
  mmops::set_strict_index_check(before);
  EXPECT_GT(flips.load(), 1);
  EXPECT_GT(bad_calls.load(), 0);
  EXPECT_EQ(misbehaved.load(), 0) << "of " << bad_calls.load() << " calls with a bad batch index";
}

TEST(Concurrency, StrictIndexSwitchFlippedWhileCpuThreadsRun) {
  flip_while_running(
      c10::Device(c10::kCPU), [](const OpCall& call) { return run(call, c10::Device(c10::kCPU)); }, 0.0);
}

TEST(Concurrency, StrictIndexSwitchFlippedWhileCudaThreadsRun) {
#ifndef MMOPS_TEST_WITH_CUDA
  GTEST_SKIP() << "mmops was built without CUDA";
#else
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  flip_while_running(c10::Device(c10::kCUDA, 0), run_on_stream, kCudaGradRtol);
#endif
}

} // namespace
