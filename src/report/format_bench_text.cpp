// SPDX-License-Identifier: Apache-2.0
// The terminal views of `bench moe` and `bench a2a` (their documents: harness/bench_moe.hpp, harness/bench_a2a.hpp).
#include "core/report_keys.hpp"

#include "common/flag_names.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

namespace moebench::formats_detail {

std::string render_bench_moe_text(const json& j) {
    std::string o;
    const json& block = j["time"]["block"];
    const double block_p50_us = block[keys::kP50Us].get<double>(), block_min_us = block["min_us"].get<double>();
    const json& fl = j["floor"];
    const double floor_us = fl[keys::kFloorUs].get<double>();
    const json& bw = j["ceilings"]["read_bandwidth"];
    const json& gemm = j["ceilings"]["sgemm"];
    const bool warm = j["cache"].get<std::string>() == "warm";
    o += fmt::format("moebench bench moe: {} layer {} {} {} tokens, routing {}, {} threads, {} cache\n",
                     j["model"].get<std::string>(), j["layer"].get<int64_t>(), j["mode"].get<std::string>(),
                     j["num_tokens"].get<int64_t>(), j["routing"].get<std::string>(), j["threads"].get<int64_t>(),
                     warm ? "warm" : "cold");
    o += fmt::format("{:<18} {:>12} {:>12} {:>7}\n", "phase", "p50 us", "min us", "share");
    const json& phases = j["time"][keys::kPhases];
    for (const std::string& name : phases_in_order(phases)) {
        const double p50_us = phases[name][keys::kP50Us].get<double>(), min_us = phases[name]["min_us"].get<double>();
        o += fmt::format("{:<18} {:>12.1f} {:>12.1f} {:>6.1f}%\n", name, p50_us, min_us,
                         block_p50_us > 0 ? 100.0 * p50_us / block_p50_us : 0.0);
    }
    o += fmt::format("{:<18} {:>12.1f} {:>12.1f}   (measured, {} iterations)\n", "block", block_p50_us, block_min_us,
                     j["iters"].get<int64_t>());
    o += fmt::format("expert GEMMs    {}\n", j["backend"].value("expert_gemm_kernel", std::string("-")));
    const std::string coretype_env = j["openblas_coretype_env"].get<std::string>();
    o += fmt::format("BLAS            OpenBLAS {} kernels{}\n", j["blas_core"].get<std::string>(),
                     coretype_env.empty() ? std::string() : fmt::format(" (OPENBLAS_CORETYPE={})", coretype_env));
    o += fmt::format("read bandwidth  {:8.2f} GB/s   (measured: {})\n", bw["value"].get<double>() / 1e9,
                     bw["method"].get<std::string>());
    o += fmt::format("sgemm rate      {:8.1f} GFLOP/s (measured: {})\n", gemm["value"].get<double>() / 1e9,
                     gemm["method"].get<std::string>());
    o += fmt::format("work            {:8.1f} MB of weights ({} of {} experts touched), {:.2f} GFLOP (counted)\n",
                     j["work"]["weight_bytes"].get<double>() / 1e6, j["experts_touched"].get<int64_t>(),
                     j["tokens_per_expert"]["values"].size(), j["work"]["flops"].get<double>() / 1e9);
    o += fmt::format("floor           {:8.1f} us ({}-bound: memory {:.1f} us, compute {:.1f} us)\n", floor_us,
                     fl["bound"].get<std::string>(), fl["memory_us"].get<double>(), fl["compute_us"].get<double>());
    o += fmt::format("time / floor    {:8.2f}x (p50), {:.2f}x (min)\n", block_p50_us / floor_us,
                     block_min_us / floor_us);
    const json& ratio = j[keys::kRatioToFloor];
    if (ratio.contains("adjacent_passes")) {
        const json& a = ratio["adjacent_passes"];
        o += fmt::format(
            "  vs the read passes next to each iteration: {:.2f}x (p50), {:.2f}x (min); their read "
            "bandwidth {:.2f} GB/s (p50)\n",
            a["p50"].get<double>(), a["min"].get<double>(), a["read_bandwidth_p50"].get<double>() / 1e9);
    }
    if (ratio.contains("warning")) o += "warning: the block " + ratio["warning"].get<std::string>() + "\n";
    return o;
}

std::string render_bench_a2a_text(const json& j) {
    const double bytes = num_at(j, {"bytes_per_rank_per_step"});
    const json& ours = j["moebench"];
    const json& bare = j["bare_mpi_alltoallv"];
    std::string o;
    o += fmt::format("{} ranks ({}), {} tokens per step, {} {}, {:.0f} bytes per rank per step\n",
                     j["ranks"].get<int64_t>(), str_at(j, {"library"}), j["num_tokens"].get<int64_t>(), flag_of("a2a"),
                     str_at(j, {"a2a"}), bytes);
    o += fmt::format("  {:<28} {:>12} {:>12} {:>12}\n", "per step", "dispatch_us", "combine_us", "algbw GB/s");
    o += fmt::format("  {:<28} {:>12.1f} {:>12.1f} {:>12.3f}\n", "moebench dispatch+combine",
                     ours["dispatch_us"].get<double>(), ours["combine_us"].get<double>(),
                     ours["algbw_gbps"].get<double>());
    o += fmt::format("  {:<28} {:>12.1f} {:>12.1f} {:>12.3f}\n", "bare MPI_Alltoallv, cold LLC",
                     bare["cold"]["dispatch_us"].get<double>(), bare["cold"]["combine_us"].get<double>(),
                     bare["algbw_gbps_cold"].get<double>());
    o += fmt::format("  {:<28} {:>12.1f} {:>12.1f} {:>12.3f}\n", "bare MPI_Alltoallv, warm",
                     bare["warm"]["dispatch_us"].get<double>(), bare["warm"]["combine_us"].get<double>(),
                     bare["algbw_gbps_warm"].get<double>());
    o += fmt::format("  algbw ratio (moebench / bare): {:.2f} cold, {:.2f} warm\n", j["algbw_ratio"].get<double>(),
                     j["algbw_ratio_warm"].get<double>());
    return o;
}

}  // namespace moebench::formats_detail
