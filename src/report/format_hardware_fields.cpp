// SPDX-License-Identifier: Apache-2.0
// The terminal and Markdown views of `moebench devices --hardware-fields` (harness/devices.hpp): the fields of a
// hardware profile and of its `sim` object. Each table renders its own rows (config/hardware_fields.cpp,
// backends/sim/sim_backend.cpp), as docs/hardware-schema.md and docs/sim-backend.md hold them (tests/cpu/
// test_hardware.cpp checks the docs against them); these views put the two tables together.
#include "backends/sim/sim_backend.hpp"
#include "config/hardware_fields.hpp"
#include "report/formats.hpp"

namespace moebench::formats_detail {

std::string render_hardware_fields_text(const json&) {
    return "Hardware profile fields (configs/hardware/*.json; docs/hardware-schema.md):\n" +
           hardware_fields_table("text") + "\nThe \"sim\" object's fields (docs/sim-backend.md):\n" +
           sim_fields_table("text");
}

std::string render_hardware_fields_md(const json&) {
    return "## Hardware profile fields (docs/hardware-schema.md)\n\n" + hardware_fields_table("md") +
           "\n## The `sim` object's fields (docs/sim-backend.md)\n\n" + sim_fields_table("md");
}

}  // namespace moebench::formats_detail
