// SPDX-License-Identifier: Apache-2.0
// The terminal view of the placement file `moebench place` writes (workload/placement_search.hpp): the chosen
// placement against contiguous blocks on the trace it was searched on.
#include "common/flag_names.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

namespace moebench::formats_detail {

std::string render_placement_text(const json& j) {
    const json& p = j["predicted"];
    const json& c = p["contiguous"];
    const json& placed = p["placed"];
    const auto line = [](const std::string& what, double before, double after) {
        return fmt::format("  {:<36} {:>12.2f} {:>12.2f}  ({:+.1f}%)\n", what, before, after,
                           before > 0 ? 100.0 * (after - before) / before : 0.0);
    };
    const auto row = [&](const std::string& what, const char* key) {
        return line(what, c[key].get<double>(), placed[key].get<double>());
    };
    const int64_t batch = p["batch"].get<int64_t>();
    const std::string a2a = flag_of("a2a");
    std::string o = fmt::format(
        "placement of {} experts on {} ranks ({} replicas) from {} ({} steps of {} tokens, {} "
        "layers)\n",
        j["num_experts"].get<int64_t>(), j["num_ranks"].get<int64_t>(), p["replicas"].get<int64_t>(),
        p["trace"].get<std::string>(), p["steps"].get<int64_t>(), batch, p["trace_layers"].get<int64_t>());
    o += fmt::format("  {:<36} {:>12} {:>12}\n", "per step", "contiguous", "placed");
    o += row("remote dispatch rows, " + a2a + " dedup", "dedup_remote_rows_per_step");
    o += row("remote dispatch rows, " + a2a + " per-expert", "per_expert_remote_rows_per_step");
    o += row("max/mean rank load", "max_over_mean_rank_load");
    o += fmt::format("  chosen of {} candidates: {}\n", p["candidates_scored"].get<int64_t>(),
                     p["chosen_from"].get<std::string>());
    if (c.contains("dedup_remote_bytes_per_step"))
        o += row("remote dispatch bytes (bf16), dedup", "dedup_remote_bytes_per_step");
    if (p["steps"].get<int64_t>() == 0)
        o += fmt::format(
            "note: the trace holds fewer than {} {} tokens: nothing to replay, the prediction is empty "
            "(use a smaller {})\n",
            flag_of("batch"), batch, flag_of("batch"));
    return o;
}

}  // namespace moebench::formats_detail
