// SPDX-License-Identifier: Apache-2.0
// --dump-tensors: the MoE block of one layer as safetensors, with the metadata that scripts/check_moe_dump.py needs
// to recompute it without moebench (docs/report-schema.md, "--dump-tensors").
#pragma once
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "engine/backend.hpp"

#include <cstdint>
#include <string>

namespace moebench {

/// Writes DIR/moe_layer.safetensors from the backend's moe_block_tensors(slot) of model layer `layer` (its tensors
/// capability).
/// With expert parallelism over processes (`comm`): every rank's token rows (moe_in, topk_ids, topk_weights,
/// moe_out; a rank holds only its experts' weights, so none are written) joined at rank 0 in token order; only
/// rank 0 writes. Every rank must call it.
void dump_moe_layer(const std::string& dir, const Backend& backend, const ModelConfig& model, const RunConfig& cfg,
                    int64_t slot, int64_t layer, Communicator* comm = nullptr);

}  // namespace moebench
