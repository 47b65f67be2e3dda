// SPDX-License-Identifier: Apache-2.0
#include "harness/bench_a2a.hpp"

#include "comm/communicator.hpp"
#include "comm/process_group.hpp"
#include "common/document_context.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "harness/a2a_baseline.hpp"
#include "harness/runner.hpp"
#include "harness/validate.hpp"

namespace moebench {

namespace {

Communicator& processes() {
    Communicator* comm = process_group();
    if (!comm || comm->world_size() < 2)
        config_error("bench a2a", "times the all-to-alls between processes; this is one process", "",
                     "launch it with mpirun -np N moebench bench a2a " + flag_of("ep") + " N ...");
    return *comm;
}

}  // namespace

RunConfig bench_a2a_run_config() {
    const int64_t world = processes().world_size();
    RunConfig cfg = run_config_from_json(json::object(), "");
    cfg.backend = "cpu";  // expert parallelism over processes
    cfg.layout.ep = world;
    cfg.layers = 1;
    return cfg;
}

json bench_a2a(const BenchA2aRequest& r) {
    Communicator* comm = &processes();
    if (r.baseline_iters < 1)
        config_error(flag_of("baseline_iters"), "must be >= 1", std::to_string(r.baseline_iters),
                     "e.g. " + flag_of("baseline_iters") + " 50");
    RunConfig cfg = r.run;
    validate_run(cfg);
    const json record = run_point(cfg);
    int64_t moe_layers = 0;
    if (comm->rank() == 0)
        for (const json& k : record["layers"]["kinds"]) moe_layers += k == "moe";
    comm->broadcast_bytes(&moe_layers, sizeof(moe_layers), 0);
    const json traffic = comm->rank() == 0 ? record["traffic"] : json();
    const json bare = time_bare_alltoallv(*comm, traffic, moe_layers, r.baseline_iters);
    if (!writes_outputs()) return nullptr;
    const json& bw = traffic["bandwidth"];
    const double ours_us = bw["dispatch"]["exchange_us"].get<double>() + bw["combine"]["exchange_us"].get<double>();
    const auto bare_total = [&](const char* which) {
        return bare[which]["dispatch_us"].get<double>() + bare[which]["combine_us"].get<double>();
    };
    const double bare_us = bare_total("cold"), warm_us = bare_total("warm");
    const double bytes = bw["dispatch"]["bytes_per_rank"].get<double>() + bw["combine"]["bytes_per_rank"].get<double>();
    const auto algbw = [&](double us) { return us > 0 ? bytes / (us * 1e-6) / 1e9 : 0.0; };
    return {{"schema", "moebench.bench_a2a/1"},
            {"context", document_context(current_command_line("moebench bench a2a"))},
            {"ranks", comm->world_size()},
            {"library", comm->library()},
            {"model", record["model"]},
            {"mode", record["mode"]},
            {"num_tokens", record["num_tokens"]},
            {"a2a", cfg.layout.a2a},
            {"moe_layers", moe_layers},
            {"bytes_per_rank_per_step", bytes},
            {"moebench",
             {{"source", "measured"},
              {"basis",
               "the run's dispatch (row counts, then rows with metadata) and combine exchanges: "
               "the slowest rank, mean per step"},
              {"dispatch_us", bw["dispatch"]["exchange_us"]},
              {"combine_us", bw["combine"]["exchange_us"]},
              {"algbw_gbps", algbw(ours_us)}}},
            {"bare_mpi_alltoallv",
             {{"source", "measured"},
              {"basis",
               "MPI_Alltoallv of the same byte matrices with the counts known in advance, "
               "per MoE layer one for dispatch and one for combine; the slowest rank; "
               "cold: after a read of 4 x LLC (the step's GEMMs evict the LLC between "
               "moebench's exchanges), warm: back to back"},
              {"cold", bare["cold"]},
              {"warm", bare["warm"]},
              {"algbw_gbps_cold", algbw(bare_us)},
              {"algbw_gbps_warm", algbw(warm_us)}}},
            {"algbw_ratio", ours_us > 0 ? bare_us / ours_us : 0.0},
            {"algbw_ratio_basis", "moebench's algbw / the cold bare calls' (the same bytes; 1 = no overhead)"},
            {"algbw_ratio_warm", ours_us > 0 ? warm_us / ours_us : 0.0},
            {"traffic", traffic}};
}

}  // namespace moebench
