// SPDX-License-Identifier: Apache-2.0
// moebench entry point: subcommands, and the mapping of errors to exit codes (2 = bad input, 3 = --check failed).
#include "build_info.hpp"
#include "cli/commands.hpp"
#include "comm/communicator.hpp"
#include "comm/process_group.hpp"
#include "common/checked_stdout.hpp"
#include "common/error.hpp"
#include "common/sanitizers.hpp"

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

namespace {

// Ends the process without running the libraries' exit handlers. OpenBLAS 0.3.21 joins its worker threads at exit,
// and a worker that could not map its buffer (a tight `ulimit -v`, as some clusters set) retries forever, so a
// finished command would hang in exit(). Everything moebench writes is flushed or renamed into place before this.
// Sanitizer builds keep the normal exit: LeakSanitizer reports from an exit handler.
// In a job started by mpirun/srun, a rank that fails ends every rank (MPI_Abort): the others would wait for it in
// the next all-to-all forever.
// A write to stdout that failed (a full disk, a closed pipe) makes a command that otherwise succeeded exit 1 with
// the reason: its output is incomplete, and a script must not take it for done.
[[noreturn]] void finish(int rc) {
    if (const std::string why = moebench::close_stdout(); !why.empty()) {
        std::cerr << moebench::rank_prefix() << "moebench: error: writing to stdout failed: " << why << "\n";
        if (rc == 0) rc = 1;
    }
    std::cerr.flush();
    std::fflush(nullptr);
    if (moebench::Communicator* comm = moebench::process_group()) {
        if (rc != 0)
            comm->abort(rc, moebench::rank_prefix() + "moebench: ending every rank of the job (exit " +
                                std::to_string(rc) + ")\n");
        moebench::leave_process_group();
    }
    if (moebench::kAddressSanitizer) std::exit(rc);
    std::_Exit(rc);
}

int run_main(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
    moebench::install_checked_stdout();
    moebench::cli::register_flag_names();  // before anything can fail: every message spells the flags typed
    try {
        moebench::join_process_group(&argc, &argv);
    } catch (const moebench::Error& e) {
        std::cerr << "moebench: " << e.label() << ": " << e.what() << "\n";
        finish(e.exit_code());
    }
    finish(run_main(argc, argv));
}

namespace {

int run_main(int argc, char** argv) {
    CLI::App app{"moebench: benchmark and profile Mixture-of-Experts inference, phase by phase", "moebench"};
    app.set_version_flag("--version", std::string(MOEBENCH_VERSION) + " (" + MOEBENCH_GIT_REV + ")");
    app.require_subcommand(1);
    // CLI11's own messages, in moebench's form (what is wrong, then the fix); exit 2 below.
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        const bool conversion = dynamic_cast<const CLI::ConversionError*>(&e) != nullptr;
        return fmt::format("{}moebench: error: {}; {}\n", moebench::rank_prefix(), e.what(),
                           conversion ? "give the option a value of its type, e.g. a whole number for --batch; "
                                        "`moebench <command> --help` lists each option's type"
                                      : "see `moebench <command> --help`");
    });
    moebench::cli::add_plan_command(app);
    moebench::cli::add_devices_command(app);
    moebench::cli::add_run_command(app);
    moebench::cli::add_trace_command(app);
    moebench::cli::add_sweep_command(app);
    moebench::cli::add_compare_command(app);
    moebench::cli::add_report_command(app);
    moebench::cli::add_bench_command(app);
    moebench::cli::add_deploy_command(app);
    moebench::cli::add_place_command(app);
    moebench::cli::add_offload_command(app);
    moebench::cli::add_calibrate_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    } catch (const moebench::Error& e) {
        std::cerr << moebench::rank_prefix() << "moebench: " << e.label() << ": " << e.what() << "\n";
        return e.exit_code();
    } catch (const std::bad_alloc&) {
        std::cerr << moebench::rank_prefix()
                  << "moebench: error: out of host memory; use fewer --layers or a smaller --batch\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << moebench::rank_prefix() << "moebench: internal error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

}  // namespace
