// SPDX-License-Identifier: Apache-2.0
#include "core/phase.hpp"

namespace moebench {

std::string_view phase_group_name(PhaseGroup g) {
    switch (g) {
        case PhaseGroup::embed: return "embed";
        case PhaseGroup::attention: return "attention";
        case PhaseGroup::router: return "router";
        case PhaseGroup::dispatch: return "dispatch";
        case PhaseGroup::experts: return "experts";
        case PhaseGroup::combine: return "combine";
        case PhaseGroup::dense: return "dense";
        case PhaseGroup::head: return "head";
    }
    return "?";
}

PhaseGroup phase_group(Phase p) {
    switch (p) {
        case Phase::embed: return PhaseGroup::embed;
        case Phase::attn_norm:
        case Phase::qkv_proj:
        case Phase::attention:
        case Phase::linear_attention:
        case Phase::o_proj: return PhaseGroup::attention;
        case Phase::ffn_norm:
        case Phase::router_gemm:
        case Phase::topk: return PhaseGroup::router;
        case Phase::permute:
        case Phase::dispatch_a2a: return PhaseGroup::dispatch;
        case Phase::expert_up:
        case Phase::activation:
        case Phase::expert_down:
        case Phase::shared_expert: return PhaseGroup::experts;
        case Phase::combine_a2a:
        case Phase::unpermute_reduce: return PhaseGroup::combine;
        case Phase::dense_mlp: return PhaseGroup::dense;
        case Phase::final_norm:
        case Phase::lm_head:
        case Phase::count_: return PhaseGroup::head;
    }
    return PhaseGroup::head;
}

}  // namespace moebench
