// SPDX-License-Identifier: Apache-2.0
#include "core/phase.hpp"

#include "core/precision.hpp"

namespace moebench {

DType matmul_dtype(Phase p, const Precision& precision) {
    switch (phase_info(p).matmul) {
        case PhaseMatmul::expert_weights: return precision.expert_weights;
        case PhaseMatmul::high_precision_weights: return precision.high_precision_dtype();
        case PhaseMatmul::activations: return precision.activations;
        case PhaseMatmul::dense_weights:
        case PhaseMatmul::none: break;
    }
    return precision.dense_weights;
}

}  // namespace moebench
