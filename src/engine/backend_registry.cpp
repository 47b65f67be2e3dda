// SPDX-License-Identifier: Apache-2.0
// make_backend: name -> backend; "auto" prefers cuda when built and a GPU is present.
#include "backends/cpu/cpu_backend.hpp"
#include "common/error.hpp"
#include "engine/backend.hpp"
#if MOEBENCH_HAS_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace moebench {

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why) {
    auto note = [&](const std::string& s) { if (why) *why = s; };
    if (name == "cpu") {
        note("");
        return make_cpu_backend();
    }
    if (name == "cuda" || name == "auto") {
#if MOEBENCH_HAS_CUDA
        std::string reason;
        if (cuda_available(&reason)) {
            note(name == "auto" ? "backend auto: using cuda (" + reason + ")" : "");
            return make_cuda_backend();
        }
        if (name == "cuda") config_error("--backend", "cuda is unavailable", reason, "run on a machine with an NVIDIA GPU, or use --backend cpu");
        note("backend auto: using cpu (" + reason + ")");
#else
        if (name == "cuda")
            config_error("--backend", "this build has no CUDA backend", "cuda",
                         "rebuild with the CUDA toolkit (-DMOEBENCH_CUDA=ON), or use --backend cpu");
        note("backend auto: using cpu (built without CUDA)");
#endif
        return make_cpu_backend();
    }
    config_error("--backend", "unknown backend", name, "use auto, cpu or cuda");
}

}  // namespace moebench
