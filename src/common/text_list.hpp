// SPDX-License-Identifier: Apache-2.0
// Lists in messages and help texts: "a | b | c", "a, b or c".
#pragma once
#include <string>
#include <vector>

namespace moebench {

inline std::string join_list(const std::vector<std::string>& items, const std::string& separator) {
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : separator) + items[i];
    return s;
}

/// "a", "a or b", "a, b or c".
inline std::string or_list(const std::vector<std::string>& items) {
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
    return s;
}

}  // namespace moebench
