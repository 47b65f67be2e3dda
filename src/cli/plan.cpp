// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER: replaced by the real 'plan' command.
#include "cli/commands.hpp"
#include "common/error.hpp"

namespace moebench::cli {

void add_plan_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("plan", "(not implemented yet)");
    cmd->callback([] { throw Error("plan: not implemented yet"); });
}

}  // namespace moebench::cli
