// Library-level definitions: the mmops namespace and its global switches.

#include <mmops/config.h>

#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace mmops {
namespace {

bool strict_from_environment() {
  const char* value = std::getenv("MMOPS_STRICT_INDEX_CHECK");
  if (value == nullptr) {
    return false;
  }
  const std::string v(value);
  return v == "1" || v == "true" || v == "TRUE" || v == "on" || v == "ON" || v == "yes";
}

std::atomic<bool>& strict_flag() {
  static std::atomic<bool> flag{strict_from_environment()};
  return flag;
}

} // namespace

void set_strict_index_check(bool enabled) {
  strict_flag().store(enabled);
}

bool strict_index_check() {
  return strict_flag().load();
}

} // namespace mmops

TORCH_LIBRARY(mmops, m) {
  // Reached from Python as mmops.set_strict_index_check / mmops.strict_index_check.
  m.def("_set_strict_index_check(bool enabled) -> ()", [](bool enabled) { mmops::set_strict_index_check(enabled); });
  m.def("_strict_index_check() -> bool", []() { return mmops::strict_index_check(); });
}
