// SPDX-License-Identifier: Apache-2.0
#include "core/step.hpp"

namespace moebench {

const char* to_string(Mode m) { return m == Mode::decode ? "decode" : "prefill"; }

}  // namespace moebench
