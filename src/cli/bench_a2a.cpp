// SPDX-License-Identifier: Apache-2.0
// `mpirun -np N moebench bench a2a [run flags]`: one expert-parallel run, then bare MPI_Alltoallv calls of the byte
// matrices it counted, in the same job; prints both and the ratio (moebench's algbw over the bare calls').
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "comm/communicator.hpp"
#include "comm/process_group.hpp"
#include "common/atomic_file.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "config/run_fields.hpp"
#include "harness/a2a_baseline.hpp"
#include "harness/runner.hpp"
#include "harness/validate.hpp"
#include "report/report_json.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct A2aFlags {
    int64_t baseline_iters = 50;
    std::string out;
};

void run_bench_a2a(const A2aFlags& f, const RunFieldFlags& fields) {
    ensure_blas_kernels("moebench bench a2a");
    Communicator* comm = process_group();
    if (!comm || comm->world_size() < 2)
        config_error("bench a2a", "times the all-to-alls between processes; this is one process", "",
                     "launch it with mpirun -np N moebench bench a2a --ep N ...");
    if (f.baseline_iters < 1)
        config_error("--baseline-iters", "must be >= 1", std::to_string(f.baseline_iters), "e.g. --baseline-iters 50");
    RunConfig cfg = run_config_from_json(json::object(), "");
    cfg.backend = "cpu";
    cfg.layout.ep = comm->world_size();
    cfg.layers = 1;
    fields.apply(cfg);
    validate_run(cfg);
    const json record = run_point(cfg);
    int64_t moe_layers = 0;
    if (comm->rank() == 0)
        for (const json& k : record["layers"]["kinds"]) moe_layers += k == "moe";
    comm->broadcast_bytes(&moe_layers, sizeof(moe_layers), 0);
    const json traffic = comm->rank() == 0 ? record["traffic"] : json();
    const json bare = time_bare_alltoallv(*comm, traffic, moe_layers, f.baseline_iters);
    if (!writes_outputs()) return;
    const json& bw = traffic["bandwidth"];
    const double ours_us = bw["dispatch"]["exchange_us"].get<double>() + bw["combine"]["exchange_us"].get<double>();
    const auto bare_total = [&](const char* which) {
        return bare[which]["dispatch_us"].get<double>() + bare[which]["combine_us"].get<double>();
    };
    const double bare_us = bare_total("cold"), warm_us = bare_total("warm");
    const double bytes = bw["dispatch"]["bytes_per_rank"].get<double>() + bw["combine"]["bytes_per_rank"].get<double>();
    const auto algbw = [&](double us) { return us > 0 ? bytes / (us * 1e-6) / 1e9 : 0.0; };
    const json result = {
        {"schema", "moebench.bench_a2a/1"},
        {"context", report_context(0, current_command_line("moebench bench a2a"))},
        {"ranks", comm->world_size()},
        {"library", comm->library()},
        {"model", record["model"]},
        {"mode", record["mode"]},
        {"num_tokens", record["num_tokens"]},
        {"a2a", cfg.layout.a2a},
        {"moe_layers", moe_layers},
        {"bytes_per_rank_per_step", bytes},
        {"moebench", {{"source", "measured"},
                      {"basis", "the run's dispatch (row counts, then rows with metadata) and combine exchanges: "
                                "the slowest rank, mean per step"},
                      {"dispatch_us", bw["dispatch"]["exchange_us"]},
                      {"combine_us", bw["combine"]["exchange_us"]},
                      {"algbw_gbps", algbw(ours_us)}}},
        {"bare_mpi_alltoallv", {{"source", "measured"},
                                {"basis", "MPI_Alltoallv of the same byte matrices with the counts known in advance, "
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
    std::cout << fmt::format("{} ranks ({}), {} tokens per step, --a2a {}, {:.0f} bytes per rank per step\n",
                             comm->world_size(), comm->library(), record["num_tokens"].get<int64_t>(),
                             cfg.layout.a2a, bytes)
              << fmt::format("  {:<28} {:>12} {:>12} {:>12}\n", "per step", "dispatch_us", "combine_us", "algbw GB/s")
              << fmt::format("  {:<28} {:>12.1f} {:>12.1f} {:>12.3f}\n", "moebench dispatch+combine",
                             bw["dispatch"]["exchange_us"].get<double>(), bw["combine"]["exchange_us"].get<double>(),
                             algbw(ours_us))
              << fmt::format("  {:<28} {:>12.1f} {:>12.1f} {:>12.3f}\n", "bare MPI_Alltoallv, cold LLC",
                             bare["cold"]["dispatch_us"].get<double>(), bare["cold"]["combine_us"].get<double>(),
                             algbw(bare_us))
              << fmt::format("  {:<28} {:>12.1f} {:>12.1f} {:>12.3f}\n", "bare MPI_Alltoallv, warm",
                             bare["warm"]["dispatch_us"].get<double>(), bare["warm"]["combine_us"].get<double>(),
                             algbw(warm_us))
              << fmt::format("  algbw ratio (moebench / bare): {:.2f} cold, {:.2f} warm\n",
                             ours_us > 0 ? bare_us / ours_us : 0.0, ours_us > 0 ? warm_us / ours_us : 0.0);
    if (!f.out.empty()) {
        write_file_atomic(f.out, result.dump(2) + "\n");
        std::cout << "result: " << f.out << "\n";
    }
}

}  // namespace

void add_bench_a2a_command(CLI::App* bench) {
    auto* cmd = bench->add_subcommand("a2a", "Expert-parallel all-to-alls vs bare MPI_Alltoallv of the same bytes");
    cmd->footer("Run under mpirun -np N: one cpu run with --ep N (default: --layers 1), then bare MPI_Alltoallv\n"
                "calls of the byte matrices it counted, in the same job. The ratio is moebench's algbw over the\n"
                "bare calls' (1 = no overhead beyond MPI's).");
    auto f = std::make_shared<A2aFlags>();
    auto fields = std::make_shared<RunFieldFlags>(cmd, [](const RunField& r) {
        return r.key == "model" || r.key == "mode" || r.key == "batch" || r.key == "seq_len" || r.key == "context" ||
               r.key == "layers" || r.key == "routing" || r.key == "seed" || r.key == "a2a" ||
               r.key == "dispatch_dtype" || r.key == "placement" || r.key == "threads" || r.key == "iters" ||
               r.key == "warmup" || r.key == "ep" || r.key == "rank_timeout";
    });
    cmd->add_option("--baseline-iters", f->baseline_iters, "Repetitions of the bare calls");
    cmd->add_option("--out", f->out, "Write the result (JSON) to this file");
    cmd->callback([f, fields] { run_bench_a2a(*f, *fields); });
}

}  // namespace moebench::cli
