// SPDX-License-Identifier: Apache-2.0
// Expert parallelism over processes: what each rank measured goes to rank 0, which merges it into the one record
// of the job (phases: the slowest rank; routing: every rank's tokens in step order) and adds the per-rank and
// traffic blocks. Only rank 0 writes files.
#pragma once
#include "common/json_util.hpp"
#include "core/step.hpp"
#include "metrics/moe_samples.hpp"

#include <string>
#include <vector>

namespace moebench {

class Communicator;

/// One rank's measurement, as it travels to rank 0.
struct RankMeasurement {
    int64_t rank = 0;
    std::string host;
    int64_t tokens = 0;            // tokens of this rank's sequences per step
    std::vector<int32_t> experts;  // experts held (global ids)
    std::vector<StepTimes> steps;
    std::vector<MoeLayerSamples> moe;  // this rank's tokens; traffic summed over the measured steps
};

/// The job's view, at rank 0.
struct MergedRanks {
    std::vector<StepTimes> steps;      // per step and phase: the slowest rank
    std::vector<MoeLayerSamples> moe;  // every rank's tokens, step by step in rank order
    std::vector<RankMeasurement> ranks;
};

/// Sends `mine` to rank 0; returns the merged view there (elsewhere: empty). Every rank must have measured the
/// same number of steps of the same plan (the runner's stop rule is decided at rank 0 and broadcast).
MergedRanks gather_ranks(Communicator& comm, const RankMeasurement& mine);

/// The record's `ranks` block: per rank its tokens, experts and mean phase times; per phase the slowest and fastest
/// rank (straggler); rank-level load beside the expert-level load of expert_load.
json ranks_block(const MergedRanks& m, const std::vector<PhaseEntry>& plan, const Communicator& comm,
                 const RunOptions& opt, const std::string& placement_source);

/// The record's `traffic` block: [src][dst] byte matrices per step (dispatch payload and metadata, combine),
/// local / remote and intra- / inter-node bytes (ranks grouped by host), rows received per rank, and the
/// all-to-alls' bandwidth (algbw and busbw as nccl-tests defines them) from their measured exchange times.
json traffic_block(const MergedRanks& m, const std::vector<std::string>& hosts);

}  // namespace moebench
