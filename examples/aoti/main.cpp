// Runs the AOTInductor package written by examples/aoti/export_aoti.py and
// checks every output against the eager Python one, for each saved input set.
//
//   aoti_inference <detector.pt2> <detector_data.pt> [--iters N]
//
// The package calls torch.ops.mmops.* through AOTInductor's proxy executor,
// which looks the ops up in the dispatcher: linking mmops::mmops registers
// them before the package loads. The device is the one the package was
// compiled for. Exit code: 0 all outputs agree, 1 one does not, 2 usage or
// runtime error.

#include <ATen/Context.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string shape_str(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

std::vector<std::string> string_list(const torch::jit::Module& m, const char* attr) {
  std::vector<std::string> out;
  for (const c10::IValue& v : m.attr(attr).toListRef())
    out.push_back(v.toStringRef());
  return out;
}

// Index outputs (nms' keep) exactly; float outputs within 1e-4 of their scale.
bool check(const std::string& what, const at::Tensor& got, const at::Tensor& expected) {
  const at::Tensor g = got.cpu();
  if (g.sizes() != expected.sizes() || g.scalar_type() != expected.scalar_type()) {
    std::printf("  %-10s %s %s, expected %s %s: FAILED\n", what.c_str(), shape_str(g).c_str(),
                c10::toString(g.scalar_type()), shape_str(expected).c_str(), c10::toString(expected.scalar_type()));
    return false;
  }
  if (!expected.is_floating_point()) {
    const bool ok = g.equal(expected);
    std::printf("  %-10s %s exact: %s\n", what.c_str(), shape_str(g).c_str(), ok ? "OK" : "FAILED");
    return ok;
  }
  const at::Tensor r = expected.to(at::kDouble);
  const double scale = r.numel() ? r.abs().max().item<double>() : 0.0;
  const double diff = r.numel() ? (g.to(at::kDouble) - r).abs().max().item<double>() : 0.0;
  const double tol = 1e-4 * std::max(scale, 1e-3);
  const bool ok = diff <= tol; // false for NaN
  std::printf("  %-10s %s max|C++ - Python| %.2e (tol %.2e): %s\n", what.c_str(), shape_str(g).c_str(), diff, tol,
              ok ? "OK" : "FAILED");
  return ok;
}

double median_ms(torch::inductor::AOTIModelPackageLoader& loader, const std::vector<at::Tensor>& inputs, bool cuda,
                 int iters) {
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    loader.run(inputs);
    if (cuda)
      torch::cuda::synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int run(const std::string& package_path, const std::string& data_path, int iters) {
  torch::jit::Module data = torch::jit::load(data_path);
  const int64_t num_sets = data.attr("num_sets").toInt();
  const std::vector<std::string> input_names = string_list(data, "input_names");
  const std::vector<std::string> output_names = string_list(data, "output_names");

  torch::inductor::AOTIModelPackageLoader loader(package_path);
  const auto metadata = loader.get_metadata();
  const auto device_key = metadata.find("AOTI_DEVICE_KEY");
  const std::string device_name = device_key == metadata.end() ? "cpu" : device_key->second;
  const torch::Device device(device_name);
  if (device.is_cuda()) {
    if (!torch::cuda::is_available())
      throw std::runtime_error("the package is compiled for CUDA but CUDA is not available");
    // The package's matmuls and convolutions are extern calls: plain fp32, as the reference.
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  }
  std::printf("AOTInductor package %s (device %s; Python reference on %s)\n", package_path.c_str(),
              device.str().c_str(), data.attr("device").toStringRef().c_str());

  c10::InferenceMode inference_guard;
  bool ok = true;
  for (int64_t s = 0; s < num_sets; ++s) {
    const std::string prefix = "set" + std::to_string(s) + "_";
    std::vector<at::Tensor> inputs;
    for (const std::string& name : input_names)
      inputs.push_back(data.attr(prefix + name).toTensor().to(device));
    std::printf("set %lld: num_rois %lld, num_boxes %lld\n", static_cast<long long>(s),
                static_cast<long long>(inputs[1].size(0)), static_cast<long long>(inputs[2].size(0)));
    const std::vector<at::Tensor> outputs = loader.run(inputs);
    if (outputs.size() != output_names.size()) {
      std::printf("  %zu outputs, expected %zu: FAILED\n", outputs.size(), output_names.size());
      ok = false;
      continue;
    }
    for (size_t i = 0; i < outputs.size(); ++i)
      ok &= check(output_names[i], outputs[i], data.attr(prefix + output_names[i]).toTensor());
    if (iters > 0)
      std::printf("  latency: median %.3f ms of %d runs\n", median_ms(loader, inputs, device.is_cuda(), iters), iters);
  }
  std::printf("agreement: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  int iters = 10;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--iters" && i + 1 < argc)
        iters = std::stoi(argv[++i]);
      else
        positional.push_back(arg);
    }
    if (positional.size() != 2 || iters < 0 || positional[0].rfind("-", 0) == 0) {
      std::fprintf(stderr, "usage: %s <detector.pt2> <detector_data.pt> [--iters N]\n", argv[0]);
      return 2;
    }
    return run(positional[0], positional[1], iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
