// SPDX-License-Identifier: Apache-2.0
// 'moebench calibrate R1.json R2.json ... --hardware P -o P-calibrated.json': the sim's efficiencies and fixed costs
// of profile P fitted to measured reports of one machine, with the model's error per phase before and after
// (compare/calibrate.hpp; docs/calibration.md).
#include "compare/calibrate.hpp"
#include "backends/sim/sim_backend.hpp"
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/paths.hpp"
#include "report/formats.hpp"

#include <filesystem>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct CalibrateFlags {
    std::vector<std::string> reports;
    std::string hardware, out, format = "text";
    bool no_fit = false;
};

void run_calibrate(const CalibrateFlags& f) {
    const std::string format = parse_format(f.format, DocKind::calibration, "--format");
    if (f.no_fit && !f.out.empty())
        config_error("-o", "writes the fitted profile; --no-fit fits nothing", f.out,
                     "drop -o to see the profile's errors on these reports, or drop --no-fit");
    const std::string profile_path = resolve_config("hardware", f.hardware, "--hardware");
    std::vector<FileArg> inputs = {{"--hardware", profile_path}};
    for (const std::string& r : f.reports) inputs.push_back({"REPORT", r});
    refuse_output_over_input({{"-o", f.out}}, inputs);
    check_output_path(f.out);
    const HardwareProfile hw = load_hardware(profile_path);
    const SimParams start = sim_params_for(hw);
    const std::vector<CalibrationCase> cases = calibration_cases(f.reports, hw);
    const CalibrationResult r = calibrate(cases, hw, start, !f.no_fit);
    std::cout << render_view(calibration_document(r), DocKind::calibration, format);
    std::cout.flush();
    if (f.out.empty()) return;
    const std::string name = std::filesystem::path(f.out).stem().string();
    write_file_atomic(
        f.out, calibrated_profile(load_json_file(profile_path, kMaxConfigBytes), r, f.reports, name).dump(2) + "\n");
    std::cerr << "calibrated profile: " << f.out << "\n";
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
    auto* cmd = app.add_subcommand(
        "calibrate", "Fit a hardware profile's sim efficiencies and fixed costs to measured reports of one machine");
    cmd->footer(
        "Each report's run is modeled by the sim on --hardware (as run --backend sim --routing-path per-token\n"
        "--config REPORT.json would) and compared phase by phase with the report's measured medians; the numbers\n"
        "of the profile's sim object that some modeled time depends on are fitted to minimise the sum of\n"
        "ln(modeled / measured)^2. Prints each report's phases and step, measured and modeled, with the error\n"
        "before and after. Judge the result on reports it was not fitted to: --no-fit prints a profile's errors\n"
        "on other reports. Reports of another\n"
        "machine (or of another than the one the profile was measured on), modeled reports, reports without phases\n"
        "and fewer reports than parameters to fit are refused (exit 2). docs/calibration.md.");
    auto f = std::make_shared<CalibrateFlags>();
    cmd->add_option("REPORT", f->reports, "Measured reports of one point each (moebench run -o R.json)")->required();
    cmd->add_option("--hardware", f->hardware,
                    "The profile to calibrate: a name in configs/hardware or a file "
                    "(moebench devices --cpu-profile writes this machine's)")
        ->required();
    cmd->add_option("-o,--out", f->out, "Write the calibrated profile to FILE, atomically (its name: FILE's stem)")
        ->type_name("FILE");
    cmd->add_option("--format", f->format,
                    format_names_help(DocKind::calibration) +
                        " (to stdout: the error table, or its moebench.calibration/1 document; default text)")
        ->type_name("FORMAT");
    cmd->add_flag("--no-fit", f->no_fit, "Fit nothing: the profile's own errors on these reports (held-out checks)");
    cmd->callback([f] { run_calibrate(*f); });
}

}  // namespace moebench::cli
