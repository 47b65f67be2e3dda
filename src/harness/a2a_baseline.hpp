// SPDX-License-Identifier: Apache-2.0
// `moebench bench a2a`: moebench's dispatch and combine exchanges against bare MPI_Alltoallv calls of the same
// byte matrices, timed in the same job right after the run (the ratio the expert-parallel issue sets: >= 90%).
#pragma once
#include "common/json_util.hpp"

#include <cstdint>

namespace moebench {

class Communicator;

/// Times `iters` repetitions of one step's all-to-alls as bare calls: per MoE layer one all-to-all-v of the
/// dispatch bytes (payload and metadata; the counts known in advance) and one of the combine bytes, from the
/// run's `traffic` block (rank 0's; broadcast here) divided evenly over `num_moe_layers`. Every rank calls it.
/// Returns, at rank 0, {"cold": {dispatch_us, combine_us}, "warm": {...}} per step: the slowest rank's, mean over
/// the repetitions; cold after an LLC-evicting read before each repetition (moebench's exchanges run between the
/// step's GEMMs, which evict it), warm back to back.
json time_bare_alltoallv(Communicator& comm, const json& traffic, int64_t num_moe_layers, int64_t iters);

}  // namespace moebench
