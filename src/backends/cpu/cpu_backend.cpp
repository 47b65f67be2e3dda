// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER: replaced by the real CPU backend.
#include "backends/cpu/cpu_backend.hpp"

#include "common/error.hpp"

namespace moebench {

std::unique_ptr<Backend> make_cpu_backend() { throw Error("cpu backend: not implemented yet"); }

}  // namespace moebench
