// SPDX-License-Identifier: Apache-2.0
// 'moebench bench moe': the MoE block of one layer on the CPU backend, phase by phase, against the physical floor
// of this machine (harness/bench_moe.hpp). This file parses the flags and prints a view of the document.
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/paths.hpp"
#include "config/run_config.hpp"
#include "harness/bench_moe.hpp"
#include "report/formats.hpp"

#include <iostream>
#include <memory>
#include <tuple>

namespace moebench::cli {

namespace {

struct BenchFlags {
    std::string model, mode = "decode", routing = "router", format = "text", out, dump_routing, expert_gemm = "auto";
    int64_t layer = -1, batch = 0, tokens = 0, threads = 0, iters = 10, warmup = 2, seed = 0;
    bool warm_cache = false;
    bool batch_given = false, tokens_given = false;  // on the command line (0 is then an error, not "the default")
};

// The flags as a request. Given flags mean what they say: --batch 0 used to run the default 8 tokens silently.
BenchMoeRequest bench_request(const BenchFlags& f) {
    constexpr int64_t kMaxStepTokens = int64_t{1} << 26;  // as `run` (the cpu backend then checks host memory)
    for (const auto& [flag, given, v] : {std::tuple<const char*, bool, int64_t>{"--batch", f.batch_given, f.batch},
                                         {"--tokens", f.tokens_given, f.tokens}}) {
        if (given && v < 1)
            config_error(flag, "must be >= 1 (tokens of the step)", std::to_string(v),
                         "leave it out for the default (decode 8, prefill 4096 tokens), or give e.g. " +
                             std::string(flag) + " 8");
        if (given && v > kMaxStepTokens)
            config_error(flag, "is beyond 2^26 (67108864) tokens per step", std::to_string(v), "use fewer tokens");
    }
    if (f.batch_given && f.tokens_given && f.batch != f.tokens)
        config_error("--batch/--tokens", "give one of them", fmt::format("{} and {}", f.batch, f.tokens),
                     "use --batch B or --tokens T");
    BenchMoeRequest r;
    r.model = f.model;
    r.layer = f.layer;
    r.mode = parse_mode(f.mode, "--mode");
    r.num_tokens = f.tokens_given ? f.tokens : f.batch_given ? f.batch : 0;
    r.routing = f.routing;
    r.threads = f.threads;
    r.iters = f.iters;
    r.warmup = f.warmup;
    r.seed = f.seed;
    r.warm_cache = f.warm_cache;
    r.expert_gemm = f.expert_gemm;
    r.dump_routing = f.dump_routing;
    return r;
}

void run_bench_moe(const BenchFlags& f) {
    ensure_blas_kernels("moebench bench");
    if (f.model.empty()) config_error("--model", "is required", "", "use e.g. --model olmoe-1b-7b");
    const BenchMoeRequest request = bench_request(f);
    check_bench_moe_request(request);
    const std::string format = parse_format(f.format, DocKind::bench_moe, "--format");
    check_output_path(f.out);  // bad outputs fail now, not after the measurement
    check_output_path(f.dump_routing);
    std::vector<FileArg> inputs = {{"--model", resolve_config("models", f.model, "--model")}};
    if (f.routing.rfind("trace:", 0) == 0) inputs.push_back({"--routing", f.routing.substr(6)});
    refuse_output_over_input({{"--out", f.out}, {"--dump-routing", f.dump_routing}}, inputs);

    const json doc = bench_moe(request);
    if (!f.out.empty()) write_file_atomic(f.out, doc.dump(2) + "\n");
    std::cout << render_view(doc, DocKind::bench_moe, format);
    if (format == "json") return;  // stdout is the document
    if (!f.out.empty()) std::cout << "json: " << f.out << "\n";
    if (!f.dump_routing.empty()) std::cout << "routing: " << f.dump_routing << "\n";
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("bench", "Micro-benchmarks against this machine's measured ceilings");
    cmd->require_subcommand(1);
    add_bench_a2a_command(cmd);
    auto* moe = cmd->add_subcommand("moe", "The MoE block of one layer on the CPU backend vs the physical floor");
    moe->footer(
        "Floor = max(touched weight bytes / measured read bandwidth, FLOPs / measured OpenBLAS sgemm rate),\n"
        "both ceilings measured in the same run. The LLC is evicted before each iteration unless --warm-cache.\n"
        "--dump-routing writes topk_ids/topk_weights (safetensors) for peers such as bench/cpu_moe_vs_torch.py.");
    auto f = std::make_shared<BenchFlags>();
    moe->add_option("--model", f->model, "Model: short name, moebench model file or HF config.json")->required();
    add_whole_option(moe, "--layer", f->layer, "Model layer (default: the first MoE layer)");
    auto* batch_opt = add_whole_option(moe, "--batch", f->batch, "Decode: tokens of the step (default 8)");
    auto* tokens_opt = add_whole_option(moe, "--tokens", f->tokens, "Tokens of the step (prefill default 4096)");
    moe->add_option("--mode", f->mode, "decode | prefill");
    moe->add_option("--routing", f->routing,
                    "Workload: router, uniform, balanced, zipf:1.2, hot:4:0.6, trace:FILE ...");
    add_whole_option(moe, "--threads", f->threads, "CPU threads (0 = all cores)");
    add_whole_option(moe, "--iters", f->iters, "Measured iterations");
    add_whole_option(moe, "--warmup", f->warmup, "Warm-up iterations (not measured)");
    add_whole_option(moe, "--seed", f->seed, "Seed for weights, inputs and synthetic routing");
    moe->add_option("--format", f->format, format_names_help(DocKind::bench_moe) + " (to stdout; default text)")
        ->type_name("FORMAT");
    moe->add_option("-o,--out", f->out, "Also write the JSON result to this file")->type_name("FILE");
    moe->add_option("--dump-routing", f->dump_routing, "Write the routing used (safetensors) to this file");
    moe->add_flag("--warm-cache", f->warm_cache, "Do not evict the LLC between iterations");
    moe->add_option("--expert-gemm", f->expert_gemm,
                    "auto | panel | blas: the expert GEMM kernel (auto: by rows per expert)");
    moe->callback([f, batch_opt, tokens_opt] {
        f->batch_given = batch_opt->count() > 0;
        f->tokens_given = tokens_opt->count() > 0;
        run_bench_moe(*f);
    });
}

}  // namespace moebench::cli
