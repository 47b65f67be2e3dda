// SPDX-License-Identifier: Apache-2.0
#include "engine/backend.hpp"

#include <algorithm>

namespace moebench {

bool BackendTraits::accepts_switch(const std::string& key) const {
    return std::find(switches.begin(), switches.end(), key) != switches.end();
}

bool BackendTraits::accepts_expert_gemm(const std::string& value) const {
    return std::find(expert_gemm.begin(), expert_gemm.end(), value) != expert_gemm.end();
}

RooflineCeilings Backend::measure_ceilings(const RunOptions&) const {
    RooflineCeilings c;
    c.note = "--measure-ceilings: nothing to measure for backend " + name();
    return c;
}

}  // namespace moebench
