// SPDX-License-Identifier: Apache-2.0
// 'moebench bench moe': the MoE block of one layer on the CPU backend, phase by phase, against the physical floor
// of this machine (touched weight bytes / measured read bandwidth vs FLOPs / measured sgemm rate, same run).
#include "cli/commands.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "common/atomic_file.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"
#include "backends/registry.hpp"
#include "engine/backend.hpp"
#include "engine/engine.hpp"
#include "metrics/ceilings.hpp"
#include "metrics/timing_stats.hpp"
#include "model/phase_work.hpp"
#include "report/report_json.hpp"
#include "workload/workload.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <optional>
#include <tuple>

namespace moebench::cli {

namespace {

struct BenchFlags {
    std::string model, mode = "decode", routing = "router", format = "text", out, dump_routing, expert_gemm = "auto";
    int64_t layer = -1, batch = 0, tokens = 0, threads = 0, iters = 10, warmup = 2, seed = 0;
    bool warm_cache = false;
    bool batch_given = false, tokens_given = false;  // on the command line (0 is then an error, not "the default")
};

// The MoE block's phases in engine order (no all-to-all: one process).
std::vector<Phase> block_phases(const ModelConfig& m) {
    std::vector<Phase> p = {Phase::router_gemm, Phase::topk,        Phase::permute, Phase::expert_up,
                            Phase::activation,  Phase::expert_down};
    if (m.moe.num_shared_experts > 0 && m.moe.shared_intermediate_size > 0) p.push_back(Phase::shared_expert);
    p.push_back(Phase::unpermute_reduce);
    return p;
}

json ceiling_json(const Ceiling& c) {
    return json{{"value", c.value}, {"unit", c.unit}, {"source", c.source}, {"method", c.method}};
}

void run_bench_moe(const BenchFlags& f) {
    ensure_blas_kernels("moebench bench");
    // 1. Inputs.
    if (f.model.empty()) config_error("--model", "is required", "", "use e.g. --model olmoe-1b-7b");
    ModelConfig model = load_model(f.model);
    if (model.moe.num_experts <= 0)
        config_error("--model", "has no MoE layers", model.name,
                     "pick a MoE model (the short names are the files in configs/models)");
    int64_t layer = f.layer;
    if (layer < 0) {
        for (int64_t l = 0; l < model.num_layers && layer < 0; ++l)
            if (model.is_moe_layer(l)) layer = l;
    }
    if (layer < 0 || layer >= model.num_layers)
        config_error("--layer", "outside the model", std::to_string(f.layer),
                     fmt::format("use 0..{}", model.num_layers - 1));
    if (!model.is_moe_layer(layer))
        config_error("--layer", "is a dense layer", std::to_string(layer), "pick a MoE layer");
    // Given flags mean what they say: --batch 0 used to run the default 8 tokens silently.
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
    if (f.iters < 1 || f.iters > 1'000'000)
        config_error("--iters", "must be in 1..1000000", std::to_string(f.iters), "use e.g. --iters 10");
    if (f.warmup < 0 || f.warmup > 1'000'000)
        config_error("--warmup", "must be in 0..1000000", std::to_string(f.warmup), "use e.g. --warmup 2");
    if (f.threads < 0 || f.threads > 4096)
        config_error("--threads", "must be in 0..4096", std::to_string(f.threads), "use 0 for all cores");
    if (f.seed < 0) config_error("--seed", "must be >= 0", std::to_string(f.seed), "use a value >= 0");
    if (f.format != "text" && f.format != "json")
        config_error("--format", "unknown format", f.format, "use text or json");
    check_output_path(f.out);  // bad outputs fail now, not after the measurement
    check_output_path(f.dump_routing);
    StepShape shape;
    const int64_t T = f.tokens_given ? f.tokens : f.batch_given ? f.batch : (f.mode == "prefill" ? 4096 : 8);
    if (f.mode == "decode") {
        shape.mode = Mode::decode;
        shape.batch = T;
        shape.context = 0;  // the block does not read the KV cache
    } else if (f.mode == "prefill") {
        shape.mode = Mode::prefill;
        shape.batch = 1;
        shape.seq_len = T;
    } else {
        config_error("--mode", "unknown mode", f.mode, "use decode or prefill");
    }
    RunOptions opt;
    opt.seed = static_cast<uint64_t>(f.seed);
    opt.num_threads = f.threads;
    opt.expert_gemm = f.expert_gemm;
    const std::vector<int64_t> layers = {layer};
    std::unique_ptr<Workload> workload = make_workload(f.routing, model, opt.seed, "--routing");
    workload->check_layers(layers);

    // 2. Backend and routing (one routing for every iteration, so the torch peer can replay it).
    std::string why;
    std::unique_ptr<Backend> backend = make_backend("cpu", &why);
    backend->prepare(model, layers, shape, opt);
    std::optional<StepRouting> routing = workload->next_step(T, layers);
    backend->set_routing_override(routing ? &*routing : nullptr);
    const json backend_info = backend->describe();
    const int64_t threads = backend_info.value("threads", int64_t(1));

    // 3. Ceilings, measured in this run before the block.
    //    Other work on the machine only ever lowers a ceiling, so each is the best of passes taken before, between
    //    (the cache-evicting read passes) and after the iterations.
    ReadBuffer buf(0, threads);
    Ceiling bw = measure_read_bandwidth(buf, 8);
    Ceiling gemm = measure_sgemm_rate(2048, threads, 5);
    double best_pass_s = static_cast<double>(buf.bytes()) / bw.value;
    int64_t bw_passes = 8;

    // 4. The block: ffn_norm once (its output is the block's input), then warm-up and measured iterations.
    const std::vector<Phase> phases = block_phases(model);
    backend->begin_step();
    backend->mark();
    backend->run_phase(Phase::ffn_norm, 0);
    backend->mark();
    (void)backend->end_step();
    std::vector<std::vector<double>> phase_us(phases.size());
    std::vector<double> block_us;
    // Read rate of the evicting pass before each iteration, and of one pass after the last: the memory system's
    // state right next to each iteration (a neighbour's load moves it within seconds on a shared machine).
    std::vector<double> pass_rate;
    const auto evict = [&] {
        const double s = buf.read_pass();
        best_pass_s = std::min(best_pass_s, s);
        ++bw_passes;
        pass_rate.push_back(static_cast<double>(buf.bytes()) / s);
    };
    for (int64_t it = 0; it < f.warmup + f.iters; ++it) {
        if (!f.warm_cache) evict();  // evict the weights: a real model's layers do not stay in the LLC
        backend->begin_step();
        backend->mark();
        for (Phase p : phases) {
            backend->run_phase(p, 0);
            backend->mark();
        }
        const std::vector<double> us = backend->end_step();
        MOEBENCH_CHECK(us.size() == phases.size(), "bench: {} intervals for {} phases", us.size(), phases.size());
        if (it < f.warmup) continue;
        double sum = 0;
        for (size_t i = 0; i < phases.size(); ++i) {
            phase_us[i].push_back(us[i]);
            sum += us[i];
        }
        block_us.push_back(sum);
    }
    if (!f.warm_cache) evict();
    const MoeLayerResult res = backend->moe_result(0);
    {
        const Ceiling bw2 = measure_read_bandwidth(buf, 8);
        best_pass_s = std::min(best_pass_s, static_cast<double>(buf.bytes()) / bw2.value);
        bw_passes += 8;
        bw.value = static_cast<double>(buf.bytes()) / best_pass_s;
        bw.method = read_bandwidth_method(buf, bw_passes) + " passes before, between and after the iterations";
        const Ceiling gemm2 = measure_sgemm_rate(2048, threads, 3);
        if (gemm2.value > gemm.value) gemm.value = gemm2.value;
        gemm.method = fmt::format("OpenBLAS sgemm 2048x2048x2048 (A.B^T) on {} threads, best of 8 (5 before and 3 "
                                  "after the iterations)", threads);
    }

    // 5. Counted work of the phases that read weights, and the floor.
    double weight_bytes = 0, flops = 0;
    for (Phase p : {Phase::router_gemm, Phase::expert_up, Phase::expert_down, Phase::shared_expert}) {
        if (p == Phase::shared_expert && model.moe.num_shared_experts == 0) continue;
        const PhaseWork w = phase_work(model, p, layer, shape, res.tokens_per_expert, 4.0, 4.0, 1);
        weight_bytes += w.weight_bytes;
        flops += w.flops;
    }
    const Floor floor = physical_floor(weight_bytes, flops, bw.value, gemm.value);
    const TimingStats block = summarize(block_us);
    // Each measured iteration against a floor from the faster of the read passes just before and after it.
    std::vector<double> adjacent_ratio, adjacent_rate;
    if (!f.warm_cache)
        for (int64_t i = 0; i < f.iters; ++i) {
            const size_t it = static_cast<size_t>(f.warmup + i);
            const double rate = std::max(pass_rate[it], pass_rate[it + 1]);
            const Floor local = physical_floor(weight_bytes, flops, rate, gemm.value);
            adjacent_rate.push_back(rate);
            adjacent_ratio.push_back(block_us[static_cast<size_t>(i)] / local.floor_us);
        }
    int64_t touched = 0;
    for (int64_t n : res.tokens_per_expert) touched += n > 0;

    // 6. Routing dump for peers (safetensors: topk_ids [T, k] int32, topk_weights [T, k] f32 + shapes).
    if (!f.dump_routing.empty()) {
        TensorFile tf;
        const LayerRouting& r = res.routing;
        tf.tensors.push_back(NamedTensor::i32("topk_ids", {r.num_tokens, r.k}, r.ids.data()));
        tf.tensors.push_back(NamedTensor::f32("topk_weights", {r.num_tokens, r.k}, r.weights.data()));
        tf.metadata = {{"model", model.name},
                       {"layer", std::to_string(layer)},
                       {"mode", f.mode},
                       {"num_tokens", std::to_string(T)},
                       {"hidden_size", std::to_string(model.hidden_size)},
                       {"expert_intermediate_size", std::to_string(model.moe.expert_intermediate_size)},
                       {"num_experts", std::to_string(model.moe.num_experts)},
                       {"top_k", std::to_string(r.k)},
                       {"num_shared_experts", std::to_string(model.moe.num_shared_experts)},
                       {"shared_intermediate_size", std::to_string(model.moe.shared_intermediate_size)},
                       {"activation", to_string(model.activation)},
                       {"routing_kind", to_string(model.moe.routing)},
                       {"routing_spec", f.routing},
                       {"threads", std::to_string(threads)},
                       {"seed", std::to_string(f.seed)},
                       {"source", "moebench bench moe"}};
        write_safetensors(f.dump_routing, tf);
    }

    // 7. Output.
    json j;
    j["schema"] = "moebench.bench_moe/1";
    j["command"] = current_command_line("moebench bench moe");
    j["created_utc"] = utc_now(false);
    j["environment"] = environment_block();
    j["backend"] = backend_info;
    j["blas_core"] = openblas_get_corename();
    j["openblas_coretype_env"] = std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "";
    j["model"] = model.name;
    j["layer"] = layer;
    j["mode"] = f.mode;
    j["num_tokens"] = T;
    j["threads"] = threads;
    j["routing"] = f.routing;
    j["cache"] = f.warm_cache ? "warm" : "cold (LLC evicted before each iteration)";
    j["warmup"] = f.warmup;
    j["iters"] = f.iters;
    j["tokens_per_expert"] = {{"source", "counted"}, {"values", res.tokens_per_expert}};
    j["experts_touched"] = touched;
    j["ceilings"] = {{"read_bandwidth", ceiling_json(bw)}, {"sgemm", ceiling_json(gemm)}};
    j["work"] = {{"source", "counted"},
                 {"weight_bytes", weight_bytes},
                 {"flops", flops},
                 {"phases", "router_gemm + expert_up + expert_down (+ shared_expert), touched experts only"}};
    j["floor"] = {{"source", "counted work / measured ceilings"},
                  {"memory_us", floor.memory_us},
                  {"compute_us", floor.compute_us},
                  {"floor_us", floor.floor_us},
                  {"bound", floor.bound}};
    json pj = json::object();
    for (size_t i = 0; i < phases.size(); ++i) pj[std::string(phase_name(phases[i]))] = to_json(summarize(phase_us[i]));
    j["time"] = {{"source", "measured"}, {"block", to_json(block)}, {"phases", pj}};
    j["ratio_to_floor"] = {{"p50", block.p50_us / floor.floor_us}, {"min", block.min_us / floor.floor_us}};
    // Faster than the floor means a ceiling was measured below what the machine does: said next to the ratio.
    const std::string floor_warning = below_floor_warning(floor, block.min_us);
    if (!floor_warning.empty()) j["ratio_to_floor"]["warning"] = floor_warning;
    if (!adjacent_ratio.empty()) {
        std::sort(adjacent_ratio.begin(), adjacent_ratio.end());
        std::sort(adjacent_rate.begin(), adjacent_rate.end());
        j["ratio_to_floor"]["adjacent_passes"] = {
            {"p50", percentile_sorted(adjacent_ratio, 50)},
            {"min", adjacent_ratio.front()},
            {"read_bandwidth_p50", percentile_sorted(adjacent_rate, 50)},
            {"method", "each iteration's time over a floor whose read bandwidth is the faster of the LLC-evicting "
                       "read passes just before and just after it (sgemm rate as above): follows a neighbour's "
                       "load, which the run's best pass does not"}};
    }

    if (!f.out.empty()) write_file_atomic(f.out, j.dump(2) + "\n");
    if (f.format == "json") {
        std::cout << j.dump(2) << "\n";
        return;
    }
    std::cout << fmt::format("moebench bench moe: {} layer {} {} {} tokens, routing {}, {} threads, {} cache\n",
                             model.name, layer, f.mode, T, f.routing, threads, f.warm_cache ? "warm" : "cold");
    std::cout << fmt::format("{:<18} {:>12} {:>12} {:>7}\n", "phase", "p50 us", "min us", "share");
    for (size_t i = 0; i < phases.size(); ++i) {
        const TimingStats s = summarize(phase_us[i]);
        std::cout << fmt::format("{:<18} {:>12.1f} {:>12.1f} {:>6.1f}%\n", phase_name(phases[i]), s.p50_us, s.min_us,
                                 block.p50_us > 0 ? 100.0 * s.p50_us / block.p50_us : 0.0);
    }
    std::cout << fmt::format("{:<18} {:>12.1f} {:>12.1f}   (measured, {} iterations)\n", "block", block.p50_us,
                             block.min_us, f.iters);
    std::cout << fmt::format("expert GEMMs    {}\n", backend_info.value("expert_gemm_kernel", std::string("-")));
    const char* coretype_env = std::getenv("OPENBLAS_CORETYPE");
    std::cout << fmt::format("BLAS            OpenBLAS {} kernels{}\n", openblas_get_corename(),
                             coretype_env ? fmt::format(" (OPENBLAS_CORETYPE={})", coretype_env) : std::string());
    std::cout << fmt::format("read bandwidth  {:8.2f} GB/s   (measured: {})\n", bw.value / 1e9, bw.method);
    std::cout << fmt::format("sgemm rate      {:8.1f} GFLOP/s (measured: {})\n", gemm.value / 1e9, gemm.method);
    std::cout << fmt::format("work            {:8.1f} MB of weights ({} of {} experts touched), {:.2f} GFLOP (counted)\n",
                             weight_bytes / 1e6, touched, model.moe.num_experts, flops / 1e9);
    std::cout << fmt::format("floor           {:8.1f} us ({}-bound: memory {:.1f} us, compute {:.1f} us)\n",
                             floor.floor_us, floor.bound, floor.memory_us, floor.compute_us);
    std::cout << fmt::format("time / floor    {:8.2f}x (p50), {:.2f}x (min)\n", block.p50_us / floor.floor_us,
                             block.min_us / floor.floor_us);
    if (j["ratio_to_floor"].contains("adjacent_passes")) {
        const json& a = j["ratio_to_floor"]["adjacent_passes"];
        std::cout << fmt::format("  vs the read passes next to each iteration: {:.2f}x (p50), {:.2f}x (min); their read "
                                 "bandwidth {:.2f} GB/s (p50)\n",
                                 a["p50"].get<double>(), a["min"].get<double>(),
                                 a["read_bandwidth_p50"].get<double>() / 1e9);
    }
    if (!floor_warning.empty()) std::cout << "warning: the block " << floor_warning << "\n";
    if (!f.out.empty()) std::cout << "json: " << f.out << "\n";
    if (!f.dump_routing.empty()) std::cout << "routing: " << f.dump_routing << "\n";
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("bench", "Micro-benchmarks against this machine's measured ceilings");
    cmd->require_subcommand(1);
    auto* moe = cmd->add_subcommand("moe", "The MoE block of one layer on the CPU backend vs the physical floor");
    moe->footer(
        "Floor = max(touched weight bytes / measured read bandwidth, FLOPs / measured OpenBLAS sgemm rate),\n"
        "both ceilings measured in the same run. The LLC is evicted before each iteration unless --warm-cache.\n"
        "--dump-routing writes topk_ids/topk_weights (safetensors) for peers such as bench/cpu_moe_vs_torch.py.");
    auto f = std::make_shared<BenchFlags>();
    moe->add_option("--model", f->model, "Model: short name, moebench model file or HF config.json")->required();
    moe->add_option("--layer", f->layer, "Model layer (default: the first MoE layer)");
    auto* batch_opt = moe->add_option("--batch", f->batch, "Decode: tokens of the step (default 8)");
    auto* tokens_opt = moe->add_option("--tokens", f->tokens, "Tokens of the step (prefill default 4096)");
    moe->add_option("--mode", f->mode, "decode | prefill");
    moe->add_option("--routing", f->routing, "Workload: router, uniform, balanced, zipf:1.2, hot:4:0.6, trace:FILE ...");
    moe->add_option("--threads", f->threads, "CPU threads (0 = all cores)");
    moe->add_option("--iters", f->iters, "Measured iterations");
    moe->add_option("--warmup", f->warmup, "Warm-up iterations (not measured)");
    moe->add_option("--seed", f->seed, "Seed for weights, inputs and synthetic routing");
    moe->add_option("--format", f->format, "text | json (to stdout)");
    moe->add_option("--out", f->out, "Also write the JSON result to this file");
    moe->add_option("--dump-routing", f->dump_routing, "Write the routing used (safetensors) to this file");
    moe->add_flag("--warm-cache", f->warm_cache, "Do not evict the LLC between iterations");
    moe->add_option("--expert-gemm", f->expert_gemm, "auto | panel | blas: the expert GEMM kernel (auto: by rows per expert)");
    moe->callback([f, batch_opt, tokens_opt] {
        f->batch_given = batch_opt->count() > 0;
        f->tokens_given = tokens_opt->count() > 0;
        run_bench_moe(*f);
    });
}

}  // namespace moebench::cli
