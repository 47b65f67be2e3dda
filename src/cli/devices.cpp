// SPDX-License-Identifier: Apache-2.0
// `moebench devices`: the GPUs found (or plainly why none), the CPU and host memory, and, in CUDA builds, the
// toolkit/runtime/driver versions (harness/devices.hpp), printed in a view of the format table.
#include "backends/sim/sim_backend.hpp"
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "config/hardware_fields.hpp"
#include "harness/devices.hpp"
#include "report/formats.hpp"

#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct DevicesArgs {
    std::string format = "text";
    bool measure = false;
    bool hardware_fields = false;
    std::string out;
};

// The fields a hardware profile may hold, and those of its `sim` object, from their tables: the help for writing a
// profile, and (--format md) the tables of docs/hardware-schema.md and docs/sim-backend.md.
std::string hardware_fields_text(const std::string& format) {
    if (format == "json")
        return json{{"profile", json::parse(hardware_fields_table("json"))},
                    {"sim", json::parse(sim_fields_table("json"))}}.dump(2) + "\n";
    if (format == "md")
        return "## Hardware profile fields (docs/hardware-schema.md)\n\n" + hardware_fields_table("md") +
               "\n## The `sim` object's fields (docs/sim-backend.md)\n\n" + sim_fields_table("md");
    return "Hardware profile fields (configs/hardware/*.json; docs/hardware-schema.md):\n" +
           hardware_fields_table("text") + "\nThe \"sim\" object's fields (docs/sim-backend.md):\n" +
           sim_fields_table("text");
}

void run_devices(const DevicesArgs& a) {
    std::string text;
    if (a.hardware_fields) {
        if (a.format != "text" && a.format != "json" && a.format != "md")
            config_error("--format", "unknown output format for --hardware-fields", a.format, "use text, md or json");
        if (a.measure)
            config_error("--measure", "measures GPUs; --hardware-fields lists the fields of a profile", "",
                         "give one of --measure and --hardware-fields");
        text = hardware_fields_text(a.format);
    } else {
        const std::string format = parse_format(a.format, DocKind::devices, "--format");
        text = render_view(devices_document(a.measure), DocKind::devices, format);
    }
    if (a.out.empty() || a.out == "-") std::cout << text;
    else write_file_atomic(a.out, text);
}

}  // namespace

void add_devices_command(CLI::App& app) {
    auto args = std::make_shared<DevicesArgs>();
    auto* cmd = app.add_subcommand("devices", "GPUs found (or why none), CPU, host memory and CUDA library versions");
    cmd->add_option("--format", args->format,
                    "Output: " + format_names_help(DocKind::devices) + " (default text); with --hardware-fields also md");
    cmd->add_flag("--measure", args->measure, "Also measure copy/read bandwidth and bf16 GEMM rate on each GPU (~1 s each)");
    cmd->add_flag("--hardware-fields", args->hardware_fields,
                  "List the fields of a hardware profile (configs/hardware/*.json) and of its sim object: key, unit, "
                  "required or default, plausible range, meaning");
    cmd->add_option("--out", args->out, "Write the output to FILE instead of stdout");
    cmd->callback([args] { run_devices(*args); });
}

}  // namespace moebench::cli
