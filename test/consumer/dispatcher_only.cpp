// Uses mmops only through the dispatcher, as a TorchScript runtime would.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <iostream>

int main() {
  const auto handle = c10::Dispatcher::singleton().findSchema({"mmops::roi_align", ""});
  if (!handle.has_value()) {
    std::cerr << "mmops::roi_align is not registered: the linker dropped libmmops\n";
    return 1;
  }
  const auto op = handle->typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t,
                                           c10::string_view, bool)>();
  const at::Tensor input = at::arange(1, 5, at::kFloat).reshape({1, 1, 2, 2});
  const at::Tensor rois = at::tensor({0.f, 0.f, 0.f, 1.f, 1.f}).reshape({1, 5});
  const std::vector<c10::SymInt> size{2, 2};
  const at::Tensor out = op.call(input, rois, size, 1.0, 2, "avg", true);
  const at::Tensor expected = at::tensor({1.0f, 1.25f, 1.5f, 1.75f}).reshape({1, 1, 2, 2});
  if (!at::allclose(out, expected)) {
    std::cerr << "unexpected roi_align output:\n" << out << "\n";
    return 1;
  }
  std::cout << "mmops::roi_align registered without any mmops symbol referenced: OK\n";
  return 0;
}
