// SPDX-License-Identifier: Apache-2.0
// Which point of report B stands for which point of report A. Match keys: the model, the hardware (sim profile, cuda
// device) and every axis of either report; with --match, the model and the named axes, the others that differ being
// the contrast. Points of different models never match. Ambiguous keys and an empty match are ConfigErrors that say
// which keys differ.
#pragma once
#include "common/json_util.hpp"
#include "report/formats.hpp"
#include "report/report_reader.hpp"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace moebench {

struct PointMatch {
    std::vector<std::string> keys;                 // the match keys, "model" first
    std::vector<std::string> all_keys;             // every key either report has (model, hardware, axes)
    json contrast = json::object();                // key left out of the match -> [value in A, value in B]
    std::set<std::string> shown;                   // keys that vary within either report: labels show them
    std::vector<json> key_a, key_b;                // per run of A / B: {key: value}
    std::vector<std::pair<size_t, size_t>> pairs;  // matched (run of A, run of B), in A's order
    std::vector<size_t> unmatched_a, unmatched_b;

    /// "context=4096 batch=8": the shown keys of one point, or "(single point)".
    std::string label(const json& key) const;
};

/// Matches the points of `a` and `b`. `match_keys` empty: every key; else the model and these (each must be a key
/// of either report). ConfigError when two points of one report share their keys, and when nothing matches.
PointMatch match_points(const ReadReport& a, const ReadReport& b, const std::vector<std::string>& match_keys);

/// A match key's value as a reader writes it: "-" for null, strings bare, numbers as JSON (one definition, shared
/// with compare's views).
using formats_detail::key_text;

}  // namespace moebench
