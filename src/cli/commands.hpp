// SPDX-License-Identifier: Apache-2.0
// One file per subcommand; each adds itself to the app and sets its callback.
#pragma once
#include <CLI/CLI.hpp>

namespace moebench::cli {

void add_plan_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_place_command(CLI::App& app);
void add_deploy_command(CLI::App& app);
void add_offload_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
/// `bench a2a` under `bench` (bench_a2a.cpp).
void add_bench_a2a_command(CLI::App* bench);

/// Tells the layers below which flag spells each field their messages name (flag_names.cpp); once, at start-up.
void register_flag_names();

}  // namespace moebench::cli
