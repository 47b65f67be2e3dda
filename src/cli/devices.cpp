// SPDX-License-Identifier: Apache-2.0
// `moebench devices`: the GPUs found (or plainly why none), the CPU and host memory, and, in CUDA builds, the
// toolkit/runtime/driver versions (harness/devices.hpp), printed in a view of the format table; with --cpu-profile,
// this machine's CPU measured as a hardware profile (harness/cpu_profile.hpp), written with -o.
#include "harness/devices.hpp"
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "harness/cpu_profile.hpp"
#include "report/formats.hpp"

#include <filesystem>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct DevicesArgs {
    std::string format = "text";
    bool measure = false;
    bool hardware_fields = false;
    bool cpu_profile = false;
    std::string out;
};

// --cpu-profile: the profile is a file like place's placement: -o writes the document (atomically), stdout shows its
// view (--format json: the document itself, for a pipe).
void run_cpu_profile(const DevicesArgs& a) {
    const std::string format = parse_format(a.format, DocKind::hardware_profile, "--format");
    if (a.hardware_fields)
        config_error("--cpu-profile", "writes a profile; --hardware-fields lists the fields of one", "",
                     "give one of --cpu-profile and --hardware-fields");
    const bool to_file = !a.out.empty() && a.out != "-";
    if (to_file) check_output_path(a.out);
    ensure_blas_kernels("moebench devices --cpu-profile");  // the sgemm rate of the kernels cpu runs use
    const std::string name = to_file ? std::filesystem::path(a.out).stem().string() : "cpu-local";
    const json doc = measure_cpu_profile(name);
    if (to_file) write_file_atomic(a.out, doc.dump(2) + "\n");
    std::cout << render_view(doc, DocKind::hardware_profile, to_file || a.out.empty() ? format : "json");
    if (to_file && format != "json") std::cout << "profile: " << a.out << "\n";
}

void run_devices(const DevicesArgs& a) {
    if (a.cpu_profile) return run_cpu_profile(a);
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
    if (a.out.empty() || a.out == "-")
        std::cout << text;
    else
        write_file_atomic(a.out, text);
}

}  // namespace

void add_devices_command(CLI::App& app) {
    auto args = std::make_shared<DevicesArgs>();
    auto* cmd = app.add_subcommand("devices", "GPUs found (or why none), CPU, host memory and CUDA library versions");
    cmd->add_option("--format", args->format,
                    "Output: " + format_names_help(DocKind::devices) + " (default text); with --hardware-fields " +
                        format_names_help(DocKind::hardware_fields) + "; with --cpu-profile " +
                        format_names_help(DocKind::hardware_profile) + " (to stdout: the view, or the profile)")
        ->type_name("FORMAT");
    cmd->add_flag("--measure", args->measure,
                  "Also measure copy/read bandwidth and bf16 GEMM rate on each GPU (~1 s each)");
    cmd->add_flag("--hardware-fields", args->hardware_fields,
                  "List the fields of a hardware profile (configs/hardware/*.json) and of its sim object: key, unit, "
                  "required or default, plausible range, meaning");
    cmd->add_flag("--cpu-profile", args->cpu_profile,
                  "Measure this machine's CPU (read bandwidth, sgemm rate: the cpu backend's ceilings, ~15 s) as a "
                  "hardware profile for the sim and moebench calibrate; -o FILE writes it (named after FILE's stem, "
                  "else cpu-local)");
    cmd->add_option("-o,--out", args->out,
                    "Write the output to FILE instead of stdout (with --cpu-profile: the profile, atomically)")
        ->type_name("FILE");
    cmd->callback([args] { run_devices(*args); });
}

}  // namespace moebench::cli
