// SPDX-License-Identifier: Apache-2.0
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
    // As the binary does at start-up: messages below the CLI spell the flags a user types.
    moebench::cli::register_flag_names();
    return Catch::Session().run(argc, argv);
}
