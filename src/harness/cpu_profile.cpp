// SPDX-License-Identifier: Apache-2.0
#include "harness/cpu_profile.hpp"

#include "backends/registry.hpp"
#include "backends/sim/sim_backend.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/host_environment.hpp"
#include "common/host_memory.hpp"
#include "config/hardware.hpp"

#include <fmt/format.h>

#include <thread>

namespace moebench {

json measure_cpu_profile(const std::string& name) {
    std::string why;
    std::unique_ptr<Backend> cpu = make_backend("cpu", &why);
    const CeilingProbe* probe = cpu ? cpu->capability<CeilingProbe>() : nullptr;
    if (!probe)
        throw UnsupportedError("this build's cpu backend measures no ceilings" + (why.empty() ? "" : ": " + why));
    RunOptions opt;  // num_threads 0: every hardware thread, as a cpu run without --threads
    // Neighbours on the machine only ever lower a measured ceiling: two rounds, the higher of each kept.
    RooflineCeilings c = probe->measure_ceilings(opt);
    const RooflineCeilings again = probe->measure_ceilings(opt);
    for (auto [rate, key] : {std::pair{&RooflineCeilings::mem_bw_bytes_per_s, "mem_bw"},
                             std::pair{&RooflineCeilings::peak_flops_per_s, "peak_flops"}})
        if (again.*rate > c.*rate) {
            c.*rate = again.*rate;
            c.detail[key] = again.detail[key];
        }
    const json env = environment_block();
    const std::string cpu_model = env.value("cpu_model", std::string("unknown CPU"));
    const double tflops = c.peak_flops_per_s / 1e12, bw_gbps = c.mem_bw_bytes_per_s / 1e9;
    json doc = {
        {"schema", "moebench.hardware/1"},
        {"name", name},
        {"display_name", cpu_model + " (this machine's CPU, measured)"},
        {"comment",
         fmt::format("Measured by moebench devices {} on {} threads: memory_bw_gbps is the streaming read "
                     "bandwidth, fp32_tflops the OpenBLAS sgemm rate (the cpu backend's {}, twice, "
                     "the higher of each kept). "
                     "bf16_tflops is not measured: the cpu backend computes fp32 only, and a profile needs a bf16 "
                     "rate, so it repeats the fp32 rate. memory_bytes is the host's MemTotal. The sim object models "
                     "the cpu backend (fp32, MLA with the expanded cache); its efficiencies start at 1 (the ceilings "
                     "are this machine's own) and its fixed costs at the sim's defaults until moebench calibrate "
                     "fits them to this machine's cpu reports.",
                     flag_of("cpu_profile"), std::thread::hardware_concurrency(), flag_of("measure_ceilings"))},
        {"sources", json::array({c.detail["mem_bw"].value("method", std::string()),
                                 c.detail["peak_flops"].value("method", std::string())})},
        {"machine", machine_identity(env)},
        {"memory_bytes", meminfo_bytes("MemTotal")},
        {"memory_bw_gbps", bw_gbps},
        {"bf16_tflops", tflops},
        {"fp32_tflops", tflops},
        {"gpus_per_node", 1},
        {"sim",
         {{"dtype", "fp32"}, {"mla_form", "expanded_cache"}, {"compute_efficiency", 1.0}, {"memory_efficiency", 1.0}}}};
    hardware_from_json(doc, name);  // a profile every reader takes, or a ConfigError now
    sim_params_from_json(doc["sim"], name + ": sim");
    return doc;
}

}  // namespace moebench
