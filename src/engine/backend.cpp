// SPDX-License-Identifier: Apache-2.0
#include "engine/backend.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace moebench {

bool BackendTraits::accepts_switch(const std::string& key) const {
    return std::find(switches.begin(), switches.end(), key) != switches.end();
}

bool BackendTraits::accepts(std::vector<std::string> BackendTraits::*values, const std::string& value) const {
    const std::vector<std::string>& list = this->*values;
    return std::find(list.begin(), list.end(), value) != list.end();
}

void Backend::set_routing_statistics(const RoutingStatistics&) {
    throw UnsupportedError("backend " + name() + " needs routing per token (it has no statistical routing path)");
}

RooflineCeilings Backend::measure_ceilings(const RunOptions&) const {
    RooflineCeilings c;
    c.note = "--measure-ceilings: nothing to measure for backend " + name();
    return c;
}

}  // namespace moebench
