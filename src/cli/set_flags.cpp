// SPDX-License-Identifier: Apache-2.0
#include "cli/set_flags.hpp"

#include "common/did_you_mean.hpp"
#include "common/error.hpp"
#include "config/run_fields.hpp"
#include "sweep/axes.hpp"

namespace moebench::cli {

std::vector<SetFlag> parse_set_flags(const std::vector<std::string>& sets) {
    std::vector<std::string> keys;
    std::string all;
    for (const RunField& f : run_fields()) {
        keys.push_back(f.key);
        all += (all.empty() ? "" : ", ") + f.key;
    }
    std::vector<SetFlag> out;
    for (const std::string& s : sets) {
        const size_t eq = s.find('=');
        if (eq == std::string::npos || eq == 0)
            config_error("--set", "must be FIELD=VALUE", s, "write e.g. --set warmup=1 (FIELD: a run config field)");
        SetFlag flag;
        flag.field = s.substr(0, eq);
        flag.text = s.substr(eq + 1);
        flag.as_written = "--set " + s;
        if (!find_run_field(flag.field))
            config_error("--set " + flag.field, "unknown run config field", flag.field,
                         did_you_mean(flag.field, keys, "use one of: " + all));
        flag.values = parse_axis_values(flag.text, "--set " + flag.field);
        out.push_back(std::move(flag));
    }
    return out;
}

json set_value(const std::string& text) {
    if (json_nesting_depth(text) > kMaxJsonDepth) return json(text);  // nlohmann recurses on deep values
    try {
        return json::parse(text);
    } catch (const json::exception&) {  // parse_error, and out_of_range 406 for a number like 1e400
        return json(text);
    }
}

void FieldClaims::claim(const std::string& field, const std::string& flag, const std::string& as_written,
                        const std::string& fix) {
    const auto [it, fresh] = by_field_.emplace(field, as_written);
    if (!fresh)
        config_error(flag, "conflicts with " + it->second + ": both set run config field " + field, as_written, fix);
}

}  // namespace moebench::cli
