// SPDX-License-Identifier: Apache-2.0
#include "engine/backend.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace moebench {

const char* to_string(Capability c) {
    switch (c) {
        case Capability::ceilings: return "ceilings";
        case Capability::tensors: return "tensors";
        case Capability::device_counters: return "device_counters";
        case Capability::ep_modeled_ranks: return "ep_modeled_ranks";
        case Capability::ep_processes: return "ep_processes";
    }
    return "?";
}

bool BackendTraits::offers(Capability c) const {
    return std::find(capabilities.begin(), capabilities.end(), c) != capabilities.end();
}

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

std::string PreparedStep::kernel(const std::string& family) const {
    for (const auto& [f, v] : kernels)
        if (f == family) return v;
    return "";
}

}  // namespace moebench
