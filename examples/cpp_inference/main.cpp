// Runs the TorchScript RoI head written by examples/roi_head/export_model.py
// and checks it against the eager Python output.
//
//   cpp_inference <roi_head.pt> <roi_head_data.pt> [--device auto|cpu|cuda]
//                 [--iters N] [--warmup N]
//
// The model calls torch.ops.mmops.roi_align; linking mmops::mmops registers
// that op, so torch::jit::load needs nothing else. The program also calls the
// public C++ API mmops::roi_align once. Exit code: 0 when both agree with
// Python, 1 when they do not, 2 on usage or runtime errors.

#include <mmops/mmops.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string model_path;
  std::string data_path;
  std::string device = "auto";
  int iters = 50;
  int warmup = 5;
};

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s <roi_head.pt> <roi_head_data.pt> [--device auto|cpu|cuda] "
               "[--iters N] [--warmup N]\n",
               argv0);
}

bool parse_args(int argc, char** argv, Options& opt) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--device") {
      opt.device = value();
    } else if (arg == "--iters") {
      opt.iters = std::stoi(value());
    } else if (arg == "--warmup") {
      opt.warmup = std::stoi(value());
    } else if (arg == "-h" || arg == "--help") {
      return false;
    } else if (!arg.empty() && arg[0] == '-') {
      throw std::invalid_argument("unknown option " + arg);
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2)
    return false;
  if (opt.device != "auto" && opt.device != "cpu" && opt.device != "cuda")
    throw std::invalid_argument("--device must be auto, cpu or cuda");
  if (opt.iters < 1 || opt.warmup < 0)
    throw std::invalid_argument("bad --iters/--warmup");
  opt.model_path = positional[0];
  opt.data_path = positional[1];
  return true;
}

std::string shape_str(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

struct Agreement {
  double max_abs_diff;
  double max_abs_ref;
  double tolerance;
  bool ok;
};

// fp32 agreement: max |out - ref| <= rel_tol * max |ref| (scale floored at 1e-3).
Agreement compare(const at::Tensor& out, const at::Tensor& ref, double rel_tol = 1e-4) {
  at::Tensor o = out.detach().to(at::kCPU, at::kDouble);
  at::Tensor r = ref.detach().to(at::kCPU, at::kDouble);
  Agreement a{};
  a.max_abs_ref = r.numel() ? r.abs().max().item<double>() : 0.0;
  a.tolerance = rel_tol * std::max(a.max_abs_ref, 1e-3);
  if (o.sizes() != r.sizes()) {
    a.max_abs_diff = std::numeric_limits<double>::infinity();
    a.ok = false;
    return a;
  }
  a.max_abs_diff = o.numel() ? (o - r).abs().max().item<double>() : 0.0;
  a.ok = std::isfinite(a.max_abs_diff) && a.max_abs_diff <= a.tolerance;
  return a;
}

void sync(const torch::Device& device) {
  if (device.is_cuda())
    torch::cuda::synchronize();
}

int run(const Options& opt) {
  const bool cuda_available = torch::cuda::is_available();
  if (opt.device == "cuda" && !cuda_available) {
    std::fprintf(stderr, "error: --device cuda requested but CUDA is not available\n");
    return 2;
  }
  const bool use_cuda = opt.device == "cuda" || (opt.device == "auto" && cuda_available);
  const torch::Device device(use_cuda ? torch::kCUDA : torch::kCPU);
  if (use_cuda) {
    // Plain fp32 convolutions/matmuls, as export_model.py uses for the reference.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }

  // Model and data are saved on the CPU; move them to the chosen device.
  torch::jit::Module model = torch::jit::load(opt.model_path);
  model.to(device);
  model.eval();
  torch::jit::Module data = torch::jit::load(opt.data_path);
  const at::Tensor features = data.attr("features").toTensor().to(device);
  const at::Tensor rois = data.attr("rois").toTensor().to(device);
  const at::Tensor expected = data.attr("expected").toTensor();
  const at::Tensor expected_pooled = data.attr("pooled").toTensor();
  const int64_t pool_size = data.attr("pool_size").toInt();
  const double spatial_scale = data.attr("spatial_scale").toDouble();
  const int64_t sampling_ratio = data.attr("sampling_ratio").toInt();
  const std::string reference_device = data.attr("reference_device").toStringRef();

  std::printf("mmops C++ inference demo\n");
  std::printf("device:          %s (Python reference computed on %s)\n", device.str().c_str(),
              reference_device.c_str());
  std::printf("input:           features %s, rois %s\n", shape_str(features).c_str(), shape_str(rois).c_str());

  c10::InferenceMode inference_guard;

  // 1. The scripted model.
  std::vector<torch::jit::IValue> inputs{features, rois};
  const at::Tensor output = model.forward(inputs).toTensor();
  sync(device);
  const at::Tensor out_cpu = output.to(at::kCPU, at::kDouble);
  std::printf("output shape:    %s\n", shape_str(output).c_str());
  std::printf("checksum:        sum %.6f  abs-sum %.6f\n", out_cpu.sum().item<double>(),
              out_cpu.abs().sum().item<double>());
  const Agreement model_agree = compare(output, expected);
  std::printf("max |C++ - Python|: %.3e (tolerance %.3e = 1e-4 x max|out| %.4f)\n", model_agree.max_abs_diff,
              model_agree.tolerance, model_agree.max_abs_ref);

  // 2. The public C++ API, with the model's RoIAlign settings.
  const at::Tensor pooled =
      mmops::roi_align(features, rois, {pool_size, pool_size}, spatial_scale, sampling_ratio, "avg", /*aligned=*/true);
  sync(device);
  const Agreement api_agree = compare(pooled, expected_pooled);
  std::printf("mmops::roi_align: output %s, max |C++ - Python| %.3e\n", shape_str(pooled).c_str(),
              api_agree.max_abs_diff);

  const bool ok = model_agree.ok && api_agree.ok;
  std::printf("agreement: %s\n", ok ? "OK" : "FAILED");

  // 3. Latency of the scripted model (warm-ups also let the JIT specialise).
  for (int i = 0; i < opt.warmup; ++i)
    model.forward(inputs);
  sync(device);
  std::vector<double> times_ms;
  times_ms.reserve(opt.iters);
  for (int i = 0; i < opt.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    model.forward(inputs);
    sync(device);
    const auto t1 = std::chrono::steady_clock::now();
    times_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(times_ms.begin(), times_ms.end());
  const size_t n = times_ms.size();
  const double median = n % 2 ? times_ms[n / 2] : 0.5 * (times_ms[n / 2 - 1] + times_ms[n / 2]);
  const std::string where =
      use_cuda ? std::string("cuda") : "cpu, " + std::to_string(at::get_num_threads()) + " threads";
  std::printf("latency:         median %.3f ms, min %.3f ms (%d runs after %d warm-ups, %s)\n", median,
              times_ms.front(), opt.iters, opt.warmup, where.c_str());
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    if (!parse_args(argc, argv, opt)) {
      usage(argv[0]);
      return 2;
    }
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
