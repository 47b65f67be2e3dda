// SPDX-License-Identifier: Apache-2.0
// 'moebench deploy': serving figures (TTFT, TPOT, tokens/s/GPU and per user, memory, cost, energy) from the sim's
// step times for one layout, a search over layouts and hardware with its Pareto frontier, or disaggregated prefill and
// decode pools (docs/deploy.md). The layout, number formats and routing are run's own fields and flags.
#include "serving/deploy.hpp"
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/paths.hpp"
#include "config/hardware.hpp"
#include "config/run_fields.hpp"
#include "harness/validate.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

// The run fields deploy takes: what to model and how the steps are priced (not the shape, not the measuring).
const char* const kDeployRunFields[] = {"model",
                                        "hardware",
                                        "routing",
                                        "routing_path",
                                        "seed",
                                        "ep",
                                        "tp",
                                        "attention_dp",
                                        "moe_tp",
                                        "moe_ep",
                                        "a2a",
                                        "placement",
                                        "redundant_experts",
                                        "dtype",
                                        "expert_dtype",
                                        "kv_dtype",
                                        "dispatch_dtype",
                                        "capacity_factor",
                                        "allow_no_fit"};
// A search's concurrencies when --concurrency is not given.
constexpr const char* kDefaultSearchConcurrency = "1..1024";
const char* const kLayoutFields[] = {"ep", "tp", "attention_dp", "moe_tp", "moe_ep", "redundant_experts", "placement"};

// deploy's own flags (the run fields' come from config/run_fields.hpp, as in `run`); their keys, as messages below the
// CLI name them, are registered in flag_names.cpp.
struct DeployFlags {
    int64_t isl = 0, osl = 0, max_prefill_tokens = kDefaultMaxPrefillTokens;
    std::string concurrency, gpus, format = "text", out;
    double price = -1, ttft_ms = 0, tpot_ms = 0, request_overhead_ms = 0;
    bool disagg = false;
    int64_t prefill_gpus = 0, decode_gpus = 0;
    std::string prefill_layout, decode_layout;
    bool isl_given = false, osl_given = false, concurrency_given = false, gpus_given = false, price_given = false;
    bool ttft_given = false, tpot_given = false;
};

// The profiles of --hardware: one name, or a list (h100-sxm,h200-sxm) in a search.
std::vector<std::string> hardware_list(const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item.empty())
            config_error("--hardware", "has an empty name in its list", text,
                         "write one profile, or a list separated by commas in a search, e.g. h100-sxm,h200-sxm");
        out.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

void deploy_command(const DeployFlags& f, const RunFieldFlags& fields) {
    const std::string format = parse_format(f.format, DocKind::deploy, "--format");
    RunConfig base;
    base.backend = "sim";
    fields.apply(base);
    if (!fields.given("model"))
        config_error("--model", "is required", "", "name the model, e.g. --model deepseek-v3 (configs/models)");
    if (!f.isl_given) config_error("--isl", "is required", "", "give the prompt tokens per request, e.g. --isl 1024");
    if (!f.osl_given) config_error("--osl", "is required", "", "give the output tokens per request, e.g. --osl 1024");
    check_output_path(f.out);  // a bad output fails now, not after the search
    bool layout_given = false;
    for (const char* key : kLayoutFields) layout_given = layout_given || fields.given(key);
    const std::vector<std::string> hardware =
        base.hardware.empty() ? std::vector<std::string>{kDefaultHardware} : hardware_list(base.hardware);
    std::vector<FileArg> inputs = {{"--model", resolve_config("models", base.model, "--model")}};
    for (const std::string& h : hardware) inputs.push_back({"--hardware", resolve_config("hardware", h, "--hardware")});
    refuse_output_over_input({{"--out", f.out}}, inputs);

    DeployRequest req;
    req.isl = f.isl;
    req.osl = f.osl;
    req.max_prefill_tokens = f.max_prefill_tokens;
    req.request_overhead_ms = f.request_overhead_ms;
    if (f.price_given) req.price_per_gpu_hour = f.price;  // checked with the load (serving/deploy.cpp check_load)
    json doc;
    if (f.gpus_given) {  // search
        if (layout_given)
            config_error("--gpus", "searches the layouts; a layout flag fixes one", f.gpus,
                         "drop --gpus to model the layout given, or drop the layout flags to search");
        if (f.disagg)
            config_error("--gpus", "searches aggregated layouts; --disagg takes its pools' layouts", f.gpus,
                         "drop one of them");
        SearchRequest s;
        s.base = req;
        s.base.base = base;
        s.gpus = parse_whole_list(f.gpus, "--gpus");
        s.hardware = hardware;
        s.concurrency =
            parse_whole_list(f.concurrency_given ? f.concurrency : kDefaultSearchConcurrency, "--concurrency");
        s.ttft_ms_limit = f.ttft_ms;
        s.tpot_ms_limit = f.tpot_ms;
        doc = deploy_search(s);
    } else {
        if (f.ttft_given || f.tpot_given)
            config_error(f.ttft_given ? "--ttft-ms" : "--tpot-ms", "limits a search", "",
                         "add --gpus N[,N...] (and drop the layout flags) to search under the limits");
        if (hardware.size() != 1)
            config_error("--hardware", "takes one profile for one layout", base.hardware,
                         "give one profile, or add --gpus N[,N...] (and drop the layout flags) to search a list");
        if (!f.concurrency_given)
            config_error("--concurrency", "is required", "", "give the requests in flight, e.g. --concurrency 64");
        const std::vector<int64_t> c = parse_whole_list(f.concurrency, "--concurrency");
        if (c.size() != 1)
            config_error("--concurrency", "takes one value for one layout", f.concurrency,
                         "give one value, or add --gpus N[,N...] (and drop the layout flags) to search a list or "
                         "range (1,8,64; 1..1024)");
        req.concurrency = c.front();
        base.hardware = hardware.front();
        req.base = base;
        if (f.disagg) {
            if (layout_given)
                config_error("--disagg", "takes each pool's layout", "",
                             "use --prefill-layout and --decode-layout (e.g. ep=8) instead of --ep/--tp");
            DisaggRequest d;
            d.base = req;
            d.prefill_gpus = f.prefill_gpus;
            d.decode_gpus = f.decode_gpus;
            if (f.prefill_gpus < 1)
                config_error("--prefill-gpus", "must be at least 1 with --disagg", std::to_string(f.prefill_gpus),
                             "e.g. --prefill-gpus 8");
            if (f.decode_gpus < 1)
                config_error("--decode-gpus", "must be at least 1 with --disagg", std::to_string(f.decode_gpus),
                             "e.g. --decode-gpus 8");
            d.prefill_layout = f.prefill_layout.empty()
                                   ? parse_compact_layout("ep=" + std::to_string(f.prefill_gpus), "--prefill-layout")
                                   : parse_compact_layout(f.prefill_layout, "--prefill-layout");
            d.decode_layout = f.decode_layout.empty()
                                  ? parse_compact_layout("ep=" + std::to_string(f.decode_gpus), "--decode-layout")
                                  : parse_compact_layout(f.decode_layout, "--decode-layout");
            doc = deploy_disagg(d);
        } else {
            for (const auto& [flag, given] : {std::pair<const char*, bool>{"--prefill-gpus", f.prefill_gpus != 0},
                                              {"--decode-gpus", f.decode_gpus != 0},
                                              {"--prefill-layout", !f.prefill_layout.empty()},
                                              {"--decode-layout", !f.decode_layout.empty()}})
                if (given)
                    config_error(flag, "describes a pool of disaggregated serving", "", "add --disagg, or drop it");
            doc = deploy_point(req);
        }
    }
    emit_view(render_view(doc, DocKind::deploy, format), f.out);
}

}  // namespace

void add_deploy_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("deploy",
                                   "Serving figures (TTFT, TPOT, tokens/s/GPU, cost, energy) from the sim's "
                                   "step times; a layout search with its Pareto frontier");
    cmd->footer(
        "One layout: --model M --isl I --osl O --concurrency C [--hardware H] [--ep/--tp/...].\n"
        "Search: --gpus 8,16 [--hardware h100-sxm,h200-sxm,b200] [--concurrency 1,8,64 or 1..1024] [--ttft-ms X]\n"
        "  [--tpot-ms Y]; --gpus and --concurrency take a sweep axis's lists and ranges.\n"
        "Disaggregated: --disagg --prefill-gpus N --prefill-layout ep=N --decode-gpus M --decode-layout ep=M.\n"
        "Every figure is modeled; docs/deploy.md gives the formulas and what the model leaves out.");
    auto f = std::make_shared<DeployFlags>();
    auto fields = std::make_shared<RunFieldFlags>(cmd, [](const RunField& field) {
        for (const char* key : kDeployRunFields)
            if (field.key == key) return true;
        return false;
    });
    fields->option("hardware")
        ->description(std::string("Hardware profile (configs/hardware; default ") + kDefaultHardware +
                      "); a list (h100-sxm,h200-sxm) in a search (--gpus)");
    auto* o_isl = add_whole_option(cmd, "--isl", f->isl, "Prompt tokens per request (>= 1)");
    auto* o_osl = add_whole_option(cmd, "--osl", f->osl, "Output tokens per request (>= 1)");
    auto* o_conc = cmd->add_option("--concurrency", f->concurrency,
                                   std::string("Requests in flight; in a search a list or range (1,8,64; 1..1024; "
                                               "default ") +
                                       kDefaultSearchConcurrency + ")")
                       ->type_name("LIST");
    add_whole_option(cmd, "--max-prefill-tokens", f->max_prefill_tokens,
                     "Prompt tokens one step may carry (the chunk budget; default 8192)");
    auto* o_price =
        add_decimal_option(cmd, "--price", f->price, "USD per GPU-hour (default: the profile's price_per_gpu_hour)");
    add_decimal_option(cmd, "--request-overhead-ms", f->request_overhead_ms,
                       "The server's own time per request, added to TTFT (HTTP, tokenizing, scheduling; default 0)");
    cmd->add_option("--format", f->format,
                    "Output: " + format_names_help(DocKind::deploy) + " (default text; json schema moebench.deploy/1)")
        ->type_name("FORMAT");
    cmd->add_option("-o,--out", f->out, "Write the output to FILE (atomically) instead of stdout")->type_name("FILE");
    auto* o_gpus =
        cmd->add_option("--gpus", f->gpus, "Search: every layout of these GPU counts, a list or range (8,16; 8..64)")
            ->type_name("LIST");
    auto* o_ttft =
        add_decimal_option(cmd, "--ttft-ms", f->ttft_ms, "Search: the best point with TTFT at most this (ms)");
    auto* o_tpot =
        add_decimal_option(cmd, "--tpot-ms", f->tpot_ms, "Search: the best point with TPOT at most this (ms)");
    cmd->add_flag("--disagg", f->disagg, "Disaggregated serving: a prefill pool and a decode pool");
    add_whole_option(cmd, "--prefill-gpus", f->prefill_gpus, "Disaggregated: GPUs of the prefill pool");
    add_whole_option(cmd, "--decode-gpus", f->decode_gpus, "Disaggregated: GPUs of the decode pool");
    cmd->add_option("--prefill-layout", f->prefill_layout,
                    "Disaggregated: the prefill pool's layout, e.g. tp=8 or ep=8")
        ->type_name("LAYOUT");
    cmd->add_option("--decode-layout", f->decode_layout, "Disaggregated: the decode pool's layout, e.g. ep=16")
        ->type_name("LAYOUT");
    cmd->callback([=] {
        f->isl_given = o_isl->count() > 0;
        f->osl_given = o_osl->count() > 0;
        f->concurrency_given = o_conc->count() > 0;
        f->gpus_given = o_gpus->count() > 0;
        f->price_given = o_price->count() > 0;
        f->ttft_given = o_ttft->count() > 0;
        f->tpot_given = o_tpot->count() > 0;
        deploy_command(*f, *fields);
    });
}

}  // namespace moebench::cli
