// SPDX-License-Identifier: Apache-2.0
// Lower layers name fields; the CLI says which flag spells each (common/flag_names.hpp, cli/flag_names.cpp): every
// flag it registers is an option of some subcommand, and a message below the CLI follows the registry.
#include "cli/commands.hpp"
#include "common/flag_names.hpp"
#include "config/run_fields.hpp"
#include "error_helpers.hpp"
#include "workload/placement_search.hpp"

#include <catch2/catch.hpp>

#include <set>

using namespace moebench;

namespace {

// Every option name of `app` and its subcommands, recursively ("--batch", "-o", ...).
void collect_options(const CLI::App& app, std::set<std::string>& names) {
    for (const CLI::Option* o : app.get_options()) {
        for (const std::string& n : o->get_lnames()) names.insert("--" + n);
        for (const std::string& n : o->get_snames()) names.insert("-" + n);
    }
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) collect_options(*sub, names);
}

RoutingTrace four_experts_trace() {
    RoutingTrace t;
    t.num_layers = 1;
    t.num_tokens = 8;
    t.top_k = 1;
    t.num_experts = 4;
    for (int32_t i = 0; i < 8; ++i) t.topk_ids.push_back(i % 4);
    t.seq_starts = {0};
    return t;
}

}  // namespace

TEST_CASE("flag names: every flag the CLI registers is an option of some subcommand", "[flag_names][cli]") {
    CLI::App app{"moebench", "moebench"};
    cli::add_plan_command(app);
    cli::add_devices_command(app);
    cli::add_run_command(app);
    cli::add_trace_command(app);
    cli::add_sweep_command(app);
    cli::add_compare_command(app);
    cli::add_report_command(app);
    cli::add_bench_command(app);
    cli::add_place_command(app);
    cli::add_deploy_command(app);
    cli::add_offload_command(app);
    cli::add_calibrate_command(app);
    std::set<std::string> options;
    collect_options(app, options);
    const auto flags = registered_flags();
    REQUIRE(flags.size() > 40);
    for (const auto& [key, flag] : flags) {
        INFO(key << " -> " << flag);
        CHECK(options.count(flag) == 1);
    }
    // The run fields' flags come from their table.
    for (const RunField& f : run_fields())
        if (!f.flag.empty()) CHECK(flag_of(f.key) == f.flag);
}

TEST_CASE("flag names: a message below the CLI spells the flag the registry names, the field without one",
          "[flag_names]") {
    CHECK(flag_of("no_such_field") == "no_such_field");
    const RoutingTrace t = four_experts_trace();
    // Registered as the binary registers it: the message reads as before.
    std::string msg = test::config_error_of([&] { search_placement(t, 2, 1, 8); });
    CHECK_THAT(msg, Catch::StartsWith("--replicas: must be a multiple of --ep 2"));
    // Another spelling of the same fields: the message follows it (nothing below the CLI writes the flag itself).
    const std::string replicas = flag_of("replicas"), ep = flag_of("ep");
    register_flag("replicas", "--copies");
    register_flag("ep", "--ranks");
    msg = test::config_error_of([&] { search_placement(t, 2, 1, 8); });
    register_flag("replicas", replicas);
    register_flag("ep", ep);
    CHECK_THAT(msg, Catch::StartsWith("--copies: must be a multiple of --ranks 2"));
}
