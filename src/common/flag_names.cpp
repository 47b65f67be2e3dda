// SPDX-License-Identifier: Apache-2.0
#include "common/flag_names.hpp"

#include <mutex>

namespace moebench {

namespace {

struct Registry {
    std::mutex mutex;
    std::map<std::string, std::string> flags;
};

Registry& registry() {
    static Registry r;
    return r;
}

}  // namespace

void register_flag(const std::string& key, const std::string& flag) {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    r.flags[key] = flag;
}

std::string flag_of(const std::string& key) {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.flags.find(key);
    return it == r.flags.end() ? key : it->second;
}

std::map<std::string, std::string> registered_flags() {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    return r.flags;
}

}  // namespace moebench
