// SPDX-License-Identifier: Apache-2.0
// `moebench devices`: the GPUs found (or plainly why none), the CPU and host memory, and, in CUDA builds, the
// toolkit/runtime/driver versions (harness/devices.hpp), printed in a view of the format table.
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
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

void run_devices(const DevicesArgs& a) {
    std::string text;
    if (a.hardware_fields) {
        const std::string format = parse_format(a.format, DocKind::hardware_fields, "--format");
        if (a.measure)
            config_error("--measure", "measures GPUs; --hardware-fields lists the fields of a profile", "",
                         "give one of --measure and --hardware-fields");
        text = render_view(hardware_fields_document(), DocKind::hardware_fields, format);
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
                    "Output: " + format_names_help(DocKind::devices) + " (default text); with --hardware-fields " +
                        format_names_help(DocKind::hardware_fields))
        ->type_name("FORMAT");
    cmd->add_flag("--measure", args->measure, "Also measure copy/read bandwidth and bf16 GEMM rate on each GPU (~1 s each)");
    cmd->add_flag("--hardware-fields", args->hardware_fields,
                  "List the fields of a hardware profile (configs/hardware/*.json) and of its sim object: key, unit, "
                  "required or default, plausible range, meaning");
    cmd->add_option("-o,--out", args->out, "Write the output to FILE instead of stdout")->type_name("FILE");
    cmd->callback([args] { run_devices(*args); });
}

}  // namespace moebench::cli
