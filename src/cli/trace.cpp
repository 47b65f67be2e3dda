// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER: replaced by the real 'trace' command.
#include "cli/commands.hpp"
#include "common/error.hpp"

namespace moebench::cli {

void add_trace_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("trace", "(not implemented yet)");
    cmd->callback([] { throw Error("trace: not implemented yet"); });
}

}  // namespace moebench::cli
