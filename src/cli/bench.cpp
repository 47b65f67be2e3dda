// SPDX-License-Identifier: Apache-2.0
// 'moebench bench moe': the MoE block of one layer on the CPU backend, phase by phase, against the physical floor
// of this machine (touched weight bytes / measured read bandwidth vs FLOPs / measured sgemm rate, same run).
#include "cli/commands.hpp"
#include "core/report_keys.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
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

// The floor is this host's (read bandwidth and sgemm rate measured here), so the block runs on the cpu backend.
constexpr const char* kBenchBackend = "cpu";

struct BenchFlags {
    std::string model, mode = "decode", routing = "router", format = "text", out, dump_routing, expert_gemm = "auto";
    int64_t layer = -1, batch = 0, tokens = 0, threads = 0, iters = 10, warmup = 2, seed = 0;
    bool warm_cache = false;
    bool batch_given = false, tokens_given = false;  // on the command line (0 is then an error, not "the default")
};

json ceiling_json(const Ceiling& c) {
    return json{{"value", c.value}, {"unit", c.unit}, {"source", c.source}, {"method", c.method}};
}

// ---- validate: the flags as one step of one MoE layer ----

struct BenchPoint {
    ModelConfig model;
    int64_t layer = -1;
    StepShape shape;
    RunOptions opt;
    int64_t num_tokens = 0;
};

int64_t bench_layer(const ModelConfig& model, int64_t asked) {
    if (model.moe.num_experts <= 0)
        config_error("--model", "has no MoE layers", model.name,
                     "pick a MoE model (the short names are the files in configs/models)");
    int64_t layer = asked;
    for (int64_t l = 0; l < model.num_layers && layer < 0; ++l)
        if (model.is_moe_layer(l)) layer = l;
    if (layer < 0 || layer >= model.num_layers)
        config_error("--layer", "outside the model", std::to_string(asked), fmt::format("use 0..{}", model.num_layers - 1));
    if (!model.is_moe_layer(layer)) config_error("--layer", "is a dense layer", std::to_string(layer), "pick a MoE layer");
    return layer;
}

void check_bench_flags(const BenchFlags& f) {
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
    if (f.format != "text" && f.format != "json") config_error("--format", "unknown format", f.format, "use text or json");
    if (f.mode != "decode" && f.mode != "prefill") config_error("--mode", "unknown mode", f.mode, "use decode or prefill");
    check_output_path(f.out);  // bad outputs fail now, not after the measurement
    check_output_path(f.dump_routing);
}

BenchPoint bench_point(const BenchFlags& f) {
    if (f.model.empty()) config_error("--model", "is required", "", "use e.g. --model olmoe-1b-7b");
    BenchPoint p;
    p.model = load_model(f.model);
    p.layer = bench_layer(p.model, f.layer);
    check_bench_flags(f);
    std::vector<FileArg> inputs = {{"--model", p.model.source}};
    if (f.routing.rfind("trace:", 0) == 0) inputs.push_back({"--routing", f.routing.substr(6)});
    refuse_output_over_input({{"--out", f.out}, {"--dump-routing", f.dump_routing}}, inputs);
    p.num_tokens = f.tokens_given ? f.tokens : f.batch_given ? f.batch : (f.mode == "prefill" ? 4096 : 8);
    if (f.mode == "decode") {
        p.shape.mode = Mode::decode;
        p.shape.batch = p.num_tokens;
        p.shape.context = 0;  // the block does not read the KV cache
    } else {
        p.shape.mode = Mode::prefill;
        p.shape.batch = 1;
        p.shape.seq_len = p.num_tokens;
    }
    p.opt.seed = static_cast<uint64_t>(f.seed);
    p.opt.num_threads = f.threads;
    p.opt.expert_gemm = f.expert_gemm;
    return p;
}

// ---- measure: the engine's MoE-block plan, between the read passes that also evict the LLC ----

// The read bandwidth and sgemm rate of this run. Other work on the machine only ever lowers a ceiling, so each is
// the best of passes taken before, between (the cache-evicting passes) and after the iterations.
struct CeilingProbe {
    ReadBuffer buf;
    Ceiling bw, gemm;
    double best_pass_s = 0;
    int64_t bw_passes = 0;
    std::vector<double> pass_rate;  // read rate of each evicting pass: the memory system next to each iteration
    int64_t threads = 1;

    explicit CeilingProbe(int64_t num_threads) : buf(0, num_threads), threads(num_threads) {
        bw = measure_read_bandwidth(buf, 8);
        gemm = measure_sgemm_rate(2048, threads, 5);
        best_pass_s = static_cast<double>(buf.bytes()) / bw.value;
        bw_passes = 8;
    }
    void evict() {
        const double s = buf.read_pass();
        best_pass_s = std::min(best_pass_s, s);
        ++bw_passes;
        pass_rate.push_back(static_cast<double>(buf.bytes()) / s);
    }
    void finish() {
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
};

struct BlockTimes {
    std::vector<std::vector<double>> phase_us;  // [phase of the plan][measured iteration]
    std::vector<double> block_us;
};

BlockTimes measure_block(Backend& backend, const std::vector<PhaseEntry>& plan, const BenchFlags& f,
                         CeilingProbe& probe, int64_t layer) {
    // ffn_norm once: its output is the block's input.
    (void)run_step(backend, {PhaseEntry{Phase::ffn_norm, layer, 0}});
    BlockTimes t;
    t.phase_us.resize(plan.size());
    for (int64_t it = 0; it < f.warmup + f.iters; ++it) {
        if (!f.warm_cache) probe.evict();  // evict the weights: a real model's layers do not stay in the LLC
        const StepTimes st = run_step(backend, plan);
        if (it < f.warmup) continue;
        double sum = 0;
        for (size_t i = 0; i < plan.size(); ++i) {
            t.phase_us[i].push_back(st.phase_us[i]);
            sum += st.phase_us[i];
        }
        t.block_us.push_back(sum);
    }
    if (!f.warm_cache) probe.evict();
    probe.finish();
    return t;
}

// ---- derive and record ----

// Routing dump for peers (safetensors: topk_ids [T, k] int32, topk_weights [T, k] f32 + shapes).
void write_routing_dump(const BenchFlags& f, const BenchPoint& p, const MoeLayerResult& res, int64_t threads) {
    const ModelConfig& model = p.model;
    TensorFile tf;
    const LayerRouting& r = res.routing;
    tf.tensors.push_back(NamedTensor::i32("topk_ids", {r.num_tokens, r.k}, r.ids.data()));
    tf.tensors.push_back(NamedTensor::f32("topk_weights", {r.num_tokens, r.k}, r.weights.data()));
    tf.metadata = {{"model", model.name},
                   {"layer", std::to_string(p.layer)},
                   {"mode", f.mode},
                   {"num_tokens", std::to_string(p.num_tokens)},
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

// Each measured iteration against a floor from the faster of the read passes just before and after it: follows a
// neighbour's load, which the run's best pass does not.
json adjacent_pass_ratios(const BenchFlags& f, const CeilingProbe& probe, const BlockTimes& t, double weight_bytes,
                          double flops) {
    std::vector<double> ratio, rate;
    for (int64_t i = 0; i < f.iters; ++i) {
        const size_t it = static_cast<size_t>(f.warmup + i);
        const double r = std::max(probe.pass_rate[it], probe.pass_rate[it + 1]);
        rate.push_back(r);
        ratio.push_back(t.block_us[static_cast<size_t>(i)] / physical_floor(weight_bytes, flops, r, probe.gemm.value).floor_us);
    }
    std::sort(ratio.begin(), ratio.end());
    std::sort(rate.begin(), rate.end());
    return {{"p50", percentile_sorted(ratio, 50)},
            {"min", ratio.front()},
            {"read_bandwidth_p50", percentile_sorted(rate, 50)},
            {"method", "each iteration's time over a floor whose read bandwidth is the faster of the LLC-evicting "
                       "read passes just before and just after it (sgemm rate as above): follows a neighbour's "
                       "load, which the run's best pass does not"}};
}

json bench_record(const BenchFlags& f, const BenchPoint& p, const std::vector<PhaseEntry>& plan, const BlockTimes& t,
                  const CeilingProbe& probe, const MoeLayerResult& res, const json& backend_info) {
    const ModelConfig& model = p.model;
    // Counted work of the phases whose matrix products read weights (the phase table's matmul), and the floor.
    double weight_bytes = 0, flops = 0;
    for (const PhaseEntry& e : plan) {
        if (!is_weight_matmul(e.phase)) continue;
        const PhaseWork w =
            phase_work(model, e.phase, p.layer, p.shape, res.tokens_per_expert, uniform_precision(DType::fp32), 1);
        weight_bytes += w.weight_bytes;
        flops += w.flops;
    }
    const Floor floor = physical_floor(weight_bytes, flops, probe.bw.value, probe.gemm.value);
    const TimingStats block = summarize(t.block_us);
    int64_t touched = 0;
    for (int64_t n : res.tokens_per_expert) touched += n > 0;

    json j;
    j["schema"] = "moebench.bench_moe/1";
    j["command"] = current_command_line("moebench bench moe");
    j["created_utc"] = utc_now(false);
    j["environment"] = environment_block();
    j["backend"] = backend_info;
    j["blas_core"] = openblas_get_corename();
    j["openblas_coretype_env"] = std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "";
    j["model"] = model.name;
    j["layer"] = p.layer;
    j["mode"] = f.mode;
    j["num_tokens"] = p.num_tokens;
    j["threads"] = probe.threads;
    j["routing"] = f.routing;
    j["cache"] = f.warm_cache ? "warm" : "cold (LLC evicted before each iteration)";
    j["warmup"] = f.warmup;
    j["iters"] = f.iters;
    j["tokens_per_expert"] = {{"source", "counted"}, {"values", res.tokens_per_expert}};
    j["experts_touched"] = touched;
    j["ceilings"] = {{"read_bandwidth", ceiling_json(probe.bw)}, {"sgemm", ceiling_json(probe.gemm)}};
    j["work"] = {{"source", "counted"},
                 {"weight_bytes", weight_bytes},
                 {"flops", flops},
                 {keys::kPhases, "router_gemm + expert_up + expert_down (+ shared_expert), touched experts only"}};
    j["floor"] = {{"source", "counted work / measured ceilings"},
                  {"memory_us", floor.memory_us},
                  {"compute_us", floor.compute_us},
                  {keys::kFloorUs, floor.floor_us},
                  {"bound", floor.bound}};
    json pj = json::object();
    for (size_t i = 0; i < plan.size(); ++i) pj[std::string(phase_name(plan[i].phase))] = to_json(summarize(t.phase_us[i]));
    j["time"] = {{"source", "measured"}, {"block", to_json(block)}, {keys::kPhases, pj}};
    j[keys::kRatioToFloor] = {{"p50", block.p50_us / floor.floor_us}, {"min", block.min_us / floor.floor_us}};
    // Faster than the floor means a ceiling was measured below what the machine does: said next to the ratio.
    const std::string floor_warning = below_floor_warning(floor, block.min_us);
    if (!floor_warning.empty()) j[keys::kRatioToFloor]["warning"] = floor_warning;
    if (!f.warm_cache) j[keys::kRatioToFloor]["adjacent_passes"] = adjacent_pass_ratios(f, probe, t, weight_bytes, flops);
    return j;
}

// The terminal view of the record (everything it prints is in the JSON).
void print_bench_text(const BenchFlags& f, const json& j, const std::vector<PhaseEntry>& plan, const BlockTimes& t) {
    const TimingStats block = summarize(t.block_us);
    const json& fl = j["floor"];
    const double floor_us = fl[keys::kFloorUs].get<double>();
    const json& bw = j["ceilings"]["read_bandwidth"];
    const json& gemm = j["ceilings"]["sgemm"];
    std::cout << fmt::format("moebench bench moe: {} layer {} {} {} tokens, routing {}, {} threads, {} cache\n",
                             j["model"].get<std::string>(), j["layer"].get<int64_t>(), f.mode,
                             j["num_tokens"].get<int64_t>(), f.routing, j["threads"].get<int64_t>(),
                             f.warm_cache ? "warm" : "cold");
    std::cout << fmt::format("{:<18} {:>12} {:>12} {:>7}\n", "phase", "p50 us", "min us", "share");
    for (size_t i = 0; i < plan.size(); ++i) {
        const TimingStats s = summarize(t.phase_us[i]);
        std::cout << fmt::format("{:<18} {:>12.1f} {:>12.1f} {:>6.1f}%\n", phase_name(plan[i].phase), s.p50_us, s.min_us,
                                 block.p50_us > 0 ? 100.0 * s.p50_us / block.p50_us : 0.0);
    }
    std::cout << fmt::format("{:<18} {:>12.1f} {:>12.1f}   (measured, {} iterations)\n", "block", block.p50_us,
                             block.min_us, f.iters);
    std::cout << fmt::format("expert GEMMs    {}\n", j["backend"].value("expert_gemm_kernel", std::string("-")));
    const std::string coretype_env = j["openblas_coretype_env"].get<std::string>();
    std::cout << fmt::format("BLAS            OpenBLAS {} kernels{}\n", j["blas_core"].get<std::string>(),
                             coretype_env.empty() ? std::string() : fmt::format(" (OPENBLAS_CORETYPE={})", coretype_env));
    std::cout << fmt::format("read bandwidth  {:8.2f} GB/s   (measured: {})\n", bw["value"].get<double>() / 1e9,
                             bw["method"].get<std::string>());
    std::cout << fmt::format("sgemm rate      {:8.1f} GFLOP/s (measured: {})\n", gemm["value"].get<double>() / 1e9,
                             gemm["method"].get<std::string>());
    std::cout << fmt::format("work            {:8.1f} MB of weights ({} of {} experts touched), {:.2f} GFLOP (counted)\n",
                             j["work"]["weight_bytes"].get<double>() / 1e6, j["experts_touched"].get<int64_t>(),
                             j["tokens_per_expert"]["values"].size(), j["work"]["flops"].get<double>() / 1e9);
    std::cout << fmt::format("floor           {:8.1f} us ({}-bound: memory {:.1f} us, compute {:.1f} us)\n", floor_us,
                             fl["bound"].get<std::string>(), fl["memory_us"].get<double>(), fl["compute_us"].get<double>());
    std::cout << fmt::format("time / floor    {:8.2f}x (p50), {:.2f}x (min)\n", block.p50_us / floor_us,
                             block.min_us / floor_us);
    const json& ratio = j[keys::kRatioToFloor];
    if (ratio.contains("adjacent_passes")) {
        const json& a = ratio["adjacent_passes"];
        std::cout << fmt::format("  vs the read passes next to each iteration: {:.2f}x (p50), {:.2f}x (min); their read "
                                 "bandwidth {:.2f} GB/s (p50)\n",
                                 a["p50"].get<double>(), a["min"].get<double>(),
                                 a["read_bandwidth_p50"].get<double>() / 1e9);
    }
    if (ratio.contains("warning")) std::cout << "warning: the block " << ratio["warning"].get<std::string>() << "\n";
    if (!f.out.empty()) std::cout << "json: " << f.out << "\n";
    if (!f.dump_routing.empty()) std::cout << "routing: " << f.dump_routing << "\n";
}

// validate -> prepare -> measure -> derive -> record, as a run point, on the engine's MoE-block plan.
void run_bench_moe(const BenchFlags& f) {
    ensure_blas_kernels("moebench bench");
    const BenchPoint p = bench_point(f);
    const std::vector<int64_t> layers = {p.layer};
    std::unique_ptr<Workload> workload = make_workload(f.routing, p.model, p.opt.seed, "--routing");
    workload->check_layers(layers);

    // One routing for every iteration, so that the torch peer can replay it.
    std::string why;
    std::unique_ptr<Backend> backend = make_backend(kBenchBackend, &why);
    backend->prepare(p.model, layers, p.shape, p.opt);
    std::optional<StepRouting> routing = workload->next_step(p.num_tokens, layers);
    backend->set_routing_override(routing ? &*routing : nullptr);
    const json backend_info = backend->describe();
    CeilingProbe probe(backend_info.value("threads", int64_t(1)));

    const std::vector<PhaseEntry> plan = moe_block_plan(p.model, p.layer, 0, 1);
    const BlockTimes t = measure_block(*backend, plan, f, probe, p.layer);
    const MoeLayerResult res = backend->moe_result(0);
    if (!f.dump_routing.empty()) write_routing_dump(f, p, res, probe.threads);
    const json j = bench_record(f, p, plan, t, probe, res, backend_info);
    if (!f.out.empty()) write_file_atomic(f.out, j.dump(2) + "\n");
    if (f.format == "json") {
        std::cout << j.dump(2) << "\n";
        return;
    }
    print_bench_text(f, j, plan, t);
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
