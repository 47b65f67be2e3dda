// SPDX-License-Identifier: Apache-2.0
// `moebench plan`: the accounting of one model on one hardware profile (params, FLOPs, memory per GPU, decode floor)
// as the stable document "moebench.plan/1" (docs/plan-schema.md). Its views are the format table's
// (report/formats.hpp).
#pragma once
#include "common/json_util.hpp"
#include "config/hardware.hpp"
#include "config/layout_request.hpp"
#include "config/precision_request.hpp"

#include <cstdint>
#include <string>

namespace moebench {

/// What to plan. The fields are checked by plan_document (ConfigError naming the field).
struct PlanRequest {
    std::string model = "mixtral-8x7b";       // short name, moebench model file or HF config.json
    std::string hardware = kDefaultHardware;  // short name or a profile's path
    LayoutRequest layout;
    PrecisionRequest precision;  // "auto" = bf16
    int64_t batch = 1;           // concurrent sequences
    int64_t context = 4096;      // tokens per sequence in the KV cache
    bool include_mtp = false;    // count multi-token-prediction modules in params and memory
    bool layout_given = false;   // false: when one GPU is too small, the fewest GPUs that fit are chosen (and said)
    bool fit_asked = false;      // batch or context asked for: a KV cache that does not fit is the answer (exit 2)
};

/// The request's fields that need no file (number formats, layout, batch and context): ConfigError naming the field.
void check_plan_request(const PlanRequest& r);

/// The moebench.plan/1 document. ConfigError (exit 2) when the weights do not fit the layout asked for, or, with
/// fit_asked, when the KV cache of batch x context does not fit (naming the largest batch and context that do).
json plan_document(const PlanRequest& r);

}  // namespace moebench
