// SPDX-License-Identifier: Apache-2.0
// Which flag spells which field, for the messages of the layers below (common/flag_names.hpp): the run field table's
// flags, and the CLI's own options that those layers name.
#include "common/flag_names.hpp"
#include "cli/commands.hpp"
#include "config/run_fields.hpp"

#include <utility>

namespace moebench::cli {

namespace {

// The options that are not run config fields and that a lower layer names, as the subcommands declare them
// (tests/cpu/test_flag_names.cpp checks that each is an option of some subcommand).
constexpr std::pair<const char*, const char*> kOwnFlags[] = {
    {"format", "--format"},
    {"journal", "--journal"},
    {"resume", "--resume"},
    {"slo_p95_ms", "--slo-p95-ms"},
    {"match", "--match"},
    {"threshold", "--threshold"},
    {"noise_floor", "--noise-floor"},
    {"allow_modeled", "--allow-modeled"},
    {"allow_missing", "--allow-missing"},
    {"window", "--window"},
    {"top_pairs", "--top-pairs"},
    {"replicas", "--replicas"},
    {"num_experts", "--num-experts"},
    {"trace", "--trace"},
    {"tokens", "--tokens"},
    {"layer", "--layer"},
    {"baseline_iters", "--baseline-iters"},
    {"config", "--config"},
    // deploy (cli/deploy.cpp): the load, the search and the pools that serving/ names
    {"isl", "--isl"},
    {"osl", "--osl"},
    {"concurrency", "--concurrency"},
    {"max_prefill_tokens", "--max-prefill-tokens"},
    {"price", "--price"},
    {"request_overhead_ms", "--request-overhead-ms"},
    {"gpus", "--gpus"},
    {"ttft_ms", "--ttft-ms"},
    {"tpot_ms", "--tpot-ms"},
    {"disagg", "--disagg"},
    {"prefill_gpus", "--prefill-gpus"},
    {"decode_gpus", "--decode-gpus"},
    {"prefill_layout", "--prefill-layout"},
    {"decode_layout", "--decode-layout"},
    {"policy", "--policy"},
    {"cache_window", "--cache-window"},
    {"cpu_profile", "--cpu-profile"},
    {"no_fit", "--no-fit"},
};

}  // namespace

void register_flag_names() {
    for (const RunField& f : run_fields())
        if (!f.flag.empty()) register_flag(f.key, f.flag);
    for (const auto& [key, flag] : kOwnFlags) register_flag(key, flag);
}

}  // namespace moebench::cli
