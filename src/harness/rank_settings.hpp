// SPDX-License-Identifier: Apache-2.0
// The start of a multi-process run: every rank must run the same point (the all-to-alls pair their steps, and rank 0
// reports the job), so before any work the ranks compare a hash of their resolved settings, and a difference ends
// every rank with exit 2 naming the first differing rank and field. Without it a different --layers deadlocked, a
// different model or --dispatch-dtype aborted inside MPI, and a different --batch or --seed gave a report that
// misstated the run.
#pragma once
#include "common/json_util.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "model/placement.hpp"

#include <string>

namespace moebench {

class Communicator;

/// The settings every rank of a job must share, in run field order: [{"key", "value", "shown"?}], "value" what is
/// compared and hashed, "shown" (when present) how a difference is shown. Resolved: the model's shapes (not its
/// path), the placement's experts per rank (not its path), a trace's content beside the --routing spec, whether
/// --dump-tensors is given (every rank then sends rows to rank 0; the folder is rank 0's). Left out, as each rank's
/// own or rank 0's alone: out, threads, rank_timeout, and the stop rule's targets (iters, max_iters, min_time_s,
/// max_noise: rank 0 decides each step for all).
json rank_settings(const RunConfig& cfg, const ModelConfig& model, const ExpertPlacement& placement);

/// "rank R differs from rank 0 in batch (--batch): 16 vs 8" for the first entry where `theirs` (rank R's settings)
/// differs from `rank0`; "" when none does.
std::string settings_difference(const json& rank0, const json& theirs, int64_t rank);

/// Every rank's hash of `settings` against rank 0's (one all-to-all of 8 bytes); on a difference, the settings of
/// rank 0 and of the first differing rank go to every rank, which throws the same ConfigError (exit 2):
/// settings_difference and the fix.
void agree_on_settings(Communicator& comm, const json& settings);

}  // namespace moebench
