// SPDX-License-Identifier: Apache-2.0
// `mpirun -np N moebench bench a2a [run flags]`: one expert-parallel run, then bare MPI_Alltoallv calls of the byte
// matrices it counted, in the same job (harness/bench_a2a.hpp). This file parses the flags and prints a view.
#include "harness/bench_a2a.hpp"
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/blas_kernels.hpp"
#include "config/run_fields.hpp"
#include "report/formats.hpp"

#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct A2aFlags {
    int64_t baseline_iters = 50;
    std::string out, format = "text";
};

void run_bench_a2a(const A2aFlags& f, const RunFieldFlags& fields) {
    ensure_blas_kernels("moebench bench a2a");
    const std::string format = parse_format(f.format, DocKind::bench_a2a, "--format");
    BenchA2aRequest request;
    request.run = bench_a2a_run_config();
    fields.apply(request.run);
    request.baseline_iters = f.baseline_iters;
    const json doc = bench_a2a(request);
    if (doc.is_null()) return;  // not the rank that writes
    std::cout << render_view(doc, DocKind::bench_a2a, format);
    if (!f.out.empty()) {
        write_file_atomic(f.out, doc.dump(2) + "\n");
        if (format != "json") std::cout << "result: " << f.out << "\n";  // json: stdout is the document
    }
}

}  // namespace

void add_bench_a2a_command(CLI::App* bench) {
    auto* cmd = bench->add_subcommand("a2a", "Expert-parallel all-to-alls vs bare MPI_Alltoallv of the same bytes");
    cmd->footer(
        "Run under mpirun -np N: one cpu run with --ep N (default: --layers 1), then bare MPI_Alltoallv\n"
        "calls of the byte matrices it counted, in the same job. The ratio is moebench's algbw over the\n"
        "bare calls' (1 = no overhead beyond MPI's).");
    auto f = std::make_shared<A2aFlags>();
    auto fields = std::make_shared<RunFieldFlags>(cmd, [](const RunField& r) {
        return r.key == "model" || r.key == "mode" || r.key == "batch" || r.key == "seq_len" || r.key == "context" ||
               r.key == "layers" || r.key == "routing" || r.key == "seed" || r.key == "a2a" ||
               r.key == "dispatch_dtype" || r.key == "placement" || r.key == "threads" || r.key == "iters" ||
               r.key == "warmup" || r.key == "ep" || r.key == "rank_timeout";
    });
    add_whole_option(cmd, "--baseline-iters", f->baseline_iters, "Repetitions of the bare calls");
    cmd->add_option("-o,--out", f->out, "Write the result (JSON) to this file")->type_name("FILE");
    cmd->add_option("--format", f->format, format_names_help(DocKind::bench_a2a) + " (to stdout; default text)")
        ->type_name("FORMAT");
    cmd->callback([f, fields] { run_bench_a2a(*f, *fields); });
}

}  // namespace moebench::cli
