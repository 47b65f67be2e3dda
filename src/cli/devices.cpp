// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER: replaced by the real 'devices' command.
#include "cli/commands.hpp"
#include "common/error.hpp"

namespace moebench::cli {

void add_devices_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("devices", "(not implemented yet)");
    cmd->callback([] { throw Error("devices: not implemented yet"); });
}

}  // namespace moebench::cli
