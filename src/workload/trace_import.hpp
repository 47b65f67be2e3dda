// SPDX-License-Identifier: Apache-2.0
// Import of routing traces from JSONL records (one object per (token, layer)) and from a plain text form
// (one line per token). Policies for incomplete records are documented in docs/trace-format.md.
#pragma once
#include "workload/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

/// What an import found; printed by `moebench trace convert` and kept in the trace metadata.
struct ImportSummary {
    std::string format;      // "jsonl" or "text"
    int64_t lines = 0;       // non-empty lines read
    int64_t records = 0;     // JSONL: well-formed (token, layer) records; text: token lines
    int64_t malformed = 0;   // lines skipped because they could not be read
    int64_t duplicates = 0;  // JSONL: repeated (sequence, token, layer) records (first one kept)
    int64_t num_layers = 0;
    int64_t num_sequences = 0;
    int64_t tokens_seen = 0;            // distinct (sequence, token) pairs with at least one record
    int64_t tokens_kept = 0;            // present in every layer
    int64_t tokens_incomplete = 0;      // dropped: missing from at least one layer
    int64_t missing_records = 0;        // (token, layer) records absent among tokens_seen
    int64_t position_gaps = 0;          // JSONL: token_idx values skipped inside a sequence (no record at all)
    std::vector<std::string> examples;  // up to 5 messages about malformed or missing records
    std::string describe() const;       // multi-line human summary
};

/// JSONL: {"dataset", "problem_id", "layer", "experts": [k ids], "gating_probs": [k], "token_idx"} per line.
/// num_experts 0 = infer (largest id + 1). Keeps only tokens present in every layer.
RoutingTrace trace_from_jsonl(const std::string& path, int64_t num_experts, ImportSummary* summary);

/// Text: one line per token; per layer a group of k ids (optionally id:weight) separated by '|'; a blank line
/// starts a new sequence; '#' starts a comment.
RoutingTrace trace_from_text(const std::string& path, int64_t num_experts, ImportSummary* summary);

/// Picks the reader by content: a first non-blank, non-comment character '{' means JSONL, otherwise text.
RoutingTrace import_trace(const std::string& path, int64_t num_experts, ImportSummary* summary);

}  // namespace moebench
