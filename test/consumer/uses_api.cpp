#include <mmops/mmops.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  const at::Tensor input = at::arange(1, 5, at::kFloat).reshape({1, 1, 2, 2});
  const at::Tensor rois = at::tensor({0.f, 0.f, 0.f, 1.f, 1.f}).reshape({1, 5});
  const at::Tensor out = mmops::roi_align(input, rois, {2, 2}, 1.0, 2);
  const at::Tensor expected = at::tensor({1.0f, 1.25f, 1.5f, 1.75f}).reshape({1, 1, 2, 2});
  if (!at::allclose(out, expected)) {
    std::cerr << "unexpected roi_align output:\n" << out << "\n";
    return 1;
  }
  std::cout << "mmops::roi_align through the installed package: OK\n";
  return 0;
}
