// SPDX-License-Identifier: Apache-2.0
#include "comm/rank_deadline.hpp"

#include <fmt/format.h>

namespace moebench {

CommContext& comm_context() {
    thread_local CommContext c;  // each thread's own (a sweep computes modeled points side by side)
    return c;
}

std::string describe(const CommContext& c) {
    return c.layer >= 0 ? fmt::format("{} (layer {})", c.what, c.layer) : std::string(c.what);
}

}  // namespace moebench
