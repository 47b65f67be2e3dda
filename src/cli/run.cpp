// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER: replaced by the real 'run' command.
#include "cli/commands.hpp"
#include "common/error.hpp"

namespace moebench::cli {

void add_run_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("run", "(not implemented yet)");
    cmd->callback([] { throw Error("run: not implemented yet"); });
}

}  // namespace moebench::cli
