// SPDX-License-Identifier: Apache-2.0
// The run config's fields as one table: JSON key, flag, type, help, whether a sweep may vary it from the command
// line, and where it lives in RunConfig. run_config_from_json / run_config_to_json, the error labels
// ("batch (--batch)"), the `run` flags and the `sweep` axis flags are all made from it; docs/run-schema.md lists
// the same fields. A new field is one row here (and its validation in run_config.cpp).
#pragma once
#include "config/run_config.hpp"

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace moebench {

/// Where a field's value lives in a RunConfig.
using RunFieldRef = std::variant<std::string*, int64_t*, double*, bool*, Mode*, uint64_t*>;

struct RunField {
    // Every column given: a row that forgets one does not compile (aggregate init would turn the accessor into a bool).
    RunField(std::string key_, std::string flag_, std::string help_, bool sweep_flag_, bool record_axis_,
             RunFieldRef (*ref_)(RunConfig&))
        : key(std::move(key_)),
          flag(std::move(flag_)),
          help(std::move(help_)),
          sweep_flag(sweep_flag_),
          record_axis(record_axis_),
          ref(ref_) {}
    std::string key;   // JSON key, also the name an error gives
    std::string flag;  // "--batch"; "" = config only
    std::string help;  // for --help
    bool sweep_flag;   // `moebench sweep --<flag> LIST` makes it an axis
    bool record_axis;  // one of a report record's `axes` (what compare matches points on)
    RunFieldRef (*ref)(RunConfig&);
};

/// What a field holds: whole numbers (INT in --help), decimals (FLOAT), text (TEXT; the mode too), or a switch.
enum class RunFieldType { whole, decimal, text, flag };
RunFieldType run_field_type(const RunField& f);

const std::vector<RunField>& run_fields();
/// nullptr for a key that is no field.
const RunField* find_run_field(const std::string& key);
/// The fields of `cfg` as JSON (mode as its name): all of them (run_config_to_json), or the record axes only.
json run_fields_json(const RunConfig& cfg, bool record_axes_only);
/// A record's `axes`: the record_axis fields of `cfg` (the runner then names the backend that really ran).
json run_axes(const RunConfig& cfg);
/// "batch (--batch)": the key as errors name it, with its flag when it has one; `path` prefixes the key.
std::string run_field_label(const std::string& path, const std::string& key);

}  // namespace moebench
