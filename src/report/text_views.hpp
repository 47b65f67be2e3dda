// SPDX-License-Identifier: Apache-2.0
// The terminal views of the documents other than the report: each reads its document alone (everything a view
// prints is in the JSON).
#pragma once
#include "common/json_util.hpp"

#include <string>

namespace moebench {

/// moebench.plan/1: parameters and FLOPs per component, memory per GPU, the decode-step floor.
std::string render_plan_text(const json& doc);
/// moebench.bench_moe/1: the phases of the block, the ceilings, the counted work and the floor.
std::string render_bench_moe_text(const json& doc);
/// moebench.bench_a2a/1: moebench's exchanges against the bare calls, cold and warm.
std::string render_bench_a2a_text(const json& doc);

}  // namespace moebench
