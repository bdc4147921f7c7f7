#pragma once
// Library-wide switches.

namespace mmops {

// Strict index checking. Off by default: on CUDA, a roi whose batch index lies
// outside [0, N) pools zeros and receives no gradient, because validating the
// indices would cost a host synchronisation on every call. When on, CUDA ops
// validate such indices synchronously and raise (the check is skipped while a
// CUDA graph is being captured). CPU ops always raise. The initial value comes
// from the environment variable MMOPS_STRICT_INDEX_CHECK (1/true/on).
void set_strict_index_check(bool enabled);
bool strict_index_check();

} // namespace mmops
