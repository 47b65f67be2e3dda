// SPDX-License-Identifier: Apache-2.0
// The `moebench offload` document (moebench.offload/1, docs/offload.md): replays of a trace through the expert caches
// (offload_replay.hpp) as JSON; its views (text, csv) are the format table's (report/formats.cpp, DocKind::offload).
#pragma once
#include "common/json_util.hpp"
#include "workload/offload_replay.hpp"

#include <string>
#include <vector>

namespace moebench {

/// What the replays were of, for the document's head.
struct OffloadContext {
    std::string trace;         // the file
    std::string model;         // empty when none was given or known
    std::string expert_dtype;  // the experts' format the bytes are counted in
    double expert_bytes = 0;   // one routed expert's weights in that format; 0 = unknown (no model)
    int64_t num_layers = 0, num_tokens = 0, num_sequences = 0;
};

/// One replay per --resident value, in the order given. With one replay its figures sit at the top level (hit_rate,
/// per_layer, ...); with several, each is an element of points[] with the same keys and the top level holds only the
/// head.
json offload_document(const OffloadContext& ctx, const std::vector<OffloadReplay>& replays);

}  // namespace moebench
