// SPDX-License-Identifier: Apache-2.0
// The terminal view of a moebench.hardware/1 profile (`devices --cpu-profile` measures one): its name, the machine it
// was measured on, its figures and its sim object, one per line, as the document holds them.
#include "report/formats.hpp"

#include <fmt/format.h>

#include <set>

namespace moebench::formats_detail {

namespace {

std::string value_text(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
    return v.dump();
}

}  // namespace

std::string render_hardware_profile_text(const json& p) {
    std::string s = fmt::format("Hardware profile {}: {}\n", str_at(p, {"name"}, "?"), str_at(p, {"display_name"}));
    if (!p.is_object()) return s;
    // Said above (names), too long for a line (comment, sources), or below (the sim object).
    static const std::set<std::string> kNotListed = {"schema", "name", "display_name", "comment", "sources", "sim"};
    for (const auto& [key, v] : p.items())
        if (!kNotListed.count(key)) s += fmt::format("  {:<20} {}\n", key, value_text(v));
    if (const json* sim = find_path(p, {"sim"}); sim && sim->is_object()) {
        std::string items;
        for (const auto& [key, v] : sim->items()) items += (items.empty() ? "" : ", ") + key + " " + value_text(v);
        s += fmt::format("  {:<20} {}\n", "sim", items);
    }
    return s;
}

}  // namespace moebench::formats_detail
