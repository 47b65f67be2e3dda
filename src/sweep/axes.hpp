// SPDX-License-Identifier: Apache-2.0
// Sweep axes: parsing value lists ("1,2,4", "1..1024", "0..4096:+1024"), the cartesian expansion into points,
// and applying one point to a base run config (axis names are run config field names, docs/sweep.md).
#pragma once
#include "common/json_util.hpp"
#include "config/run_config.hpp"

#include <string>
#include <vector>

namespace moebench {

/// One axis: a run config field (`batch`, `context`, `routing`, ...) and the values it takes, in order.
struct SweepAxis {
    std::string name;
    std::vector<json> values;
};

/// Parses the text of one axis. Accepted forms, combinable with commas:
///   "8"  "1,2,4"  "1..1024" (powers of two from 1 to 1024)  "a..b:xF" (geometric, factor F)  "a..b:+S" (step S)
///   any other token is a string value ("router,zipf:1.2" -> two strings; colons inside a string are kept).
/// Numbers become JSON integers when whole, else doubles. Empty or malformed ranges -> ConfigError naming `field`.
std::vector<json> parse_axis_values(const std::string& text, const std::string& field);

/// The forms of an axis's values, for messages: what a sweep takes where a run takes one value.
inline constexpr const char* kAxisSyntax =
    "one value (8), a list (1,2,4) or a range (1..64: powers of two; 1..64:x4: factor 4; 0..64:+8: step 8)";

/// "1..64" for "1-64" (a range written with a dash), else "": what the user probably meant.
std::string range_meant(const std::string& text);

/// Refuses a value of `axis` that its run config field cannot hold, where the field holds numbers and the value is
/// text (`--batch 1-64`): ConfigError naming `field` (the flag or config key that gave it), the value, the list and
/// range forms (kAxisSyntax) and, for a range written with a dash, the range meant.
void check_axis_types(const SweepAxis& axis, const std::string& field);

/// Reads a JSON value given for an axis in a config: an array of values, a scalar, or a string spec as above.
std::vector<json> axis_values_from_json(const json& v, const std::string& field);

/// Puts axes in the canonical order (model, backend, mode, routing, ep, capacity_factor, soft_topn, layers,
/// context, seq_len, then unknown names alphabetically, batch last) so batch varies fastest and each
/// throughput-vs-batch series is contiguous. Duplicate names: the later one wins.
std::vector<SweepAxis> canonical_axes(const std::vector<SweepAxis>& axes);

/// The cartesian product: one JSON object {axis name: value} per point, the first axis outermost.
/// No axes -> one empty point (a sweep of one run). Duplicate values inside an axis are dropped.
std::vector<json> expand_axes(const std::vector<SweepAxis>& axes);

/// Stable identity of a point for the journal and --resume: the compact dump of its axis object
/// (keys sorted; whole doubles written as integers).
std::string point_key(const json& point);

/// The run config of one point: `base` (run config JSON) with each axis field replaced; parsed and validated.
/// Bad values -> ConfigError naming "axes.<name>".
RunConfig apply_point(const json& base, const json& point);

/// "batch=8 context=1024" (axis order as given by the object; for progress lines and labels).
std::string point_label(const json& point);

}  // namespace moebench
