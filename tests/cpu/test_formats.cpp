// SPDX-License-Identifier: Apache-2.0
// Report views on a constructed report: the CSV header is exactly the documented one, the HTML holds every chart
// and no external reference, the Chrome trace is valid JSON with the expected slices, the Prometheus exposition
// is well formed.
#include "common/error.hpp"
#include "core/phase.hpp"
#include "harness/devices.hpp"
#include "report/formats.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "report_edit.hpp"
#include "test_paths.hpp"

using namespace moebench;

namespace {

const std::vector<std::string> kLayerPhases = {"attn_norm", "qkv_proj",    "attention",   "o_proj",
                                               "ffn_norm",  "router_gemm", "topk",        "permute",
                                               "expert_up", "activation",  "expert_down", "unpermute_reduce"};

// Two MoE layers, 4 experts; phase p of layer l takes (10 + p + l) us; embed 3, final_norm 2, lm_head 5.
json constructed_run(int batch, bool with_roofline) {
    json phases = json::object(), per_layer = json::array();
    std::map<std::string, double> sum;
    for (int l = 0; l < 2; ++l) {
        json lp = json::object();
        for (size_t p = 0; p < kLayerPhases.size(); ++p) {
            double us = 10.0 + static_cast<double>(p) + l;
            lp[kLayerPhases[p]] = {{"mean_us", us}, {"p50_us", us}};
            sum[kLayerPhases[p]] += us;
        }
        per_layer.push_back({{"layer", l}, {"kind", "moe"}, {"phases", lp}});
    }
    sum["embed"] = 3;
    sum["final_norm"] = 2;
    sum["lm_head"] = 5;
    double total = 0;
    for (auto& [k, v] : sum) total += v;
    for (auto& [k, v] : sum) {
        phases[k] = {{"mean_us", v},         {"p50_us", v},       {"p95_us", v * 1.1},
                     {"p99_us", v * 1.2},    {"min_us", v * 0.9}, {"max_us", v * 1.3},
                     {"stdev_us", v * 0.05}, {"cv", 0.05},        {"share", v / total}};
        if (with_roofline) phases[k]["flops"] = 1e6 * v, phases[k]["bytes"] = 1e4 * v;
    }
    // The step's samples (mean `total`) and their statistics (report_edit.hpp), as the reader checks them.
    const std::vector<double> samples = {total * 0.95, total * 0.97, total * 0.98, total * 1.1};
    json load = json::array();
    for (int l = 0; l < 2; ++l)
        load.push_back({{"layer", l},
                        {"tokens_per_expert", {8, 4, 2, 2}},
                        {"max_over_mean", 2.0},
                        {"cv", 0.6},
                        {"gini", 0.3},
                        {"idle_experts", 0},
                        {"dropped", 0},
                        {"windows", {{"window_tokens", 4}, {"counts", {{4, 2, 1, 1}, {4, 2, 1, 1}}}}},
                        {"coactivation", {{0, 3, 1, 0}, {3, 0, 1, 0}, {1, 1, 0, 2}, {0, 0, 2, 0}}}});
    return json{{"status", "ok"},
                {"model", "tiny, \"quoted\""},
                {"mode", "decode"},
                {"batch", batch},
                {"seq_len", 1},
                {"context", 0},
                {"num_tokens", batch},
                {"axes",
                 {{"backend", "cpu"},
                  {"mode", "decode"},
                  {"batch", batch},
                  {"seq_len", 1},
                  {"context", 0},
                  {"routing", "router"},
                  {"ep", 1},
                  {"capacity_factor", 0},
                  {"soft_topn", 0},
                  {"layers", 2}}},
                {"sweep_point", {{"batch", batch}}},
                {"iterations", {{"measured", 4}}},
                {"latency",
                 {{"source", "measured"},
                  {"step", test::stats_of(samples)},
                  {"phases", phases},
                  {"per_layer", per_layer},
                  {"step_samples_us", samples}}},
                {"throughput", {{"source", "measured"}, {"tokens_per_s", batch / (total * 1e-6)}}},
                {"expert_load", {{"source", "counted"}, {"per_layer", load}}}};
}

json constructed_report(bool with_roofline = false) {
    json runs = {constructed_run(1, with_roofline),
                 constructed_run(4, with_roofline),
                 {{"status", "skipped"},
                  {"skip_reason", "out of memory, batch 64"},
                  {"batch", 64},
                  {"axes", {{"backend", "cpu"}, {"batch", 64}}}}};
    return json{{"schema", "moebench.report/1"},
                {"command", "moebench sweep --batch 1,4,64"},
                {"tool", {{"version", "0.1.0"}, {"git_rev", "abc"}, {"build_type", "Release"}}},
                {"config", {{"run", {{"model", "tiny"}}}}},
                {"runs", runs},
                {"sweep",
                 {{"golden", {{"run_index", 1}, {"reason", "batch 4: test"}}},
                  {"series", json::array()},
                  {"slo_p95_ms", 1.0}}}};
}

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string l;
    while (std::getline(ss, l)) out.push_back(l);
    return out;
}

// Splits one CSV record (RFC 4180 quoting).
std::vector<std::string> csv_split(const std::string& line) {
    std::vector<std::string> f(1);
    bool q = false;
    for (size_t i = 0; i < line.size(); ++i) {
        char c = line[i];
        if (q) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
                f.back() += '"', ++i;
            else if (c == '"')
                q = false;
            else
                f.back() += c;
        } else if (c == '"')
            q = true;
        else if (c == ',')
            f.emplace_back();
        else
            f.back() += c;
    }
    return f;
}

}  // namespace

TEST_CASE("csv: exact header, one row per point x phase", "[formats]") {
    std::string csv = render_report(constructed_report(), "csv");
    auto lines = lines_of(csv);
    // The documented header (docs/csv-columns.md); changing it breaks users' spreadsheets.
    CHECK(
        lines[0] ==
        "point,status,reason,model,backend,mode,batch,seq_len,context,num_tokens,routing,ep,capacity_factor,soft_topn,"
        "layers,extra_axes,phase,phase_group,phase_mean_us,phase_p50_us,phase_p95_us,phase_p99_us,phase_min_us,"
        "phase_max_us,phase_stdev_us,phase_cv,phase_share,step_mean_us,step_p50_us,step_p95_us,step_p99_us,step_cv,"
        "tokens_per_s,iterations,load_max_over_mean_avg,timing_source,low_confidence,energy_j_per_token,energy_scope,"
        "host_contended,throttled,rank,tp,attention_dp,moe_tp,moe_ep,dtype,expert_dtype,kv_dtype,first_layer,"
        "redundant_experts,resident_experts,offload_ratio,offload_policy,prune_below");
    const size_t ncol = csv_columns().size();
    // 2 ok points x 15 phases + 1 skipped point.
    REQUIRE(lines.size() == 1 + 2 * 15 + 1);
    std::set<std::string> phases_seen;
    for (size_t i = 1; i < lines.size(); ++i) {
        auto f = csv_split(lines[i]);
        REQUIRE(f.size() == ncol);
        if (f[1] == "ok") {
            CHECK(f[3] == "tiny, \"quoted\"");  // quoting round-trips
            CHECK(phase_from_name(f[16]).has_value());
            phases_seen.insert(f[16]);
        }
    }
    CHECK(phases_seen.size() == 15);
    auto last = csv_split(lines.back());
    CHECK(last[1] == "skipped");
    CHECK(last[2] == "out of memory, batch 64");
    CHECK(last[16].empty());
    // qkv_proj of the first point: (10+1) + (10+1+1) = 23 us; group attention.
    for (size_t i = 1; i < lines.size(); ++i) {
        auto f = csv_split(lines[i]);
        if (f[0] == "0" && f[16] == "qkv_proj") {
            CHECK(f[17] == "attention");
            CHECK(std::stod(f[18]) == Approx(23.0));
            CHECK(std::stod(f[34]) == Approx(2.0));
        }
    }
}

TEST_CASE("html: every chart, golden point marked, no external reference", "[formats]") {
    for (bool roof : {false, true}) {
        std::string html = render_report(constructed_report(roof), "html");
        for (const char* id :
             {"chart-phase-stack", "chart-throughput-p95", "chart-expert-heatmap", "chart-expert-heatmap-layer-0",
              "chart-expert-heatmap-layer-1", "chart-tokens-per-expert", "chart-tokens-per-expert-layer-0",
              "chart-tokens-per-expert-layer-1", "chart-coactivation", "chart-roofline", "golden-point"})
            CHECK(html.find(std::string("id=\"") + id + "\"") != std::string::npos);
        CHECK(html.find("http") == std::string::npos);
        CHECK(html.find("//") == std::string::npos);
        CHECK(html.find("<script") == std::string::npos);
        CHECK(html.find("<link") == std::string::npos);
        CHECK(html.find("@import") == std::string::npos);
        CHECK(html.find("url(") == std::string::npos);
        // Roofline: placed phases when FLOPs/bytes exist, else an explicit "not available".
        size_t at = html.find("id=\"chart-roofline\"");
        std::string roof_svg = html.substr(at, html.find("</svg>", at) - at);
        if (roof)
            CHECK(roof_svg.find("<circle") != std::string::npos);
        else
            CHECK(roof_svg.find("not available") != std::string::npos);
        CHECK(html.find("out of memory, batch 64") != std::string::npos);
    }
}

TEST_CASE("chrome trace: valid JSON, a slice per phase per layer laid end to end", "[formats]") {
    json t = json::parse(render_report(constructed_report(), "trace"));
    REQUIRE(t["traceEvents"].is_array());
    std::map<int, std::vector<json>> by_pid;
    std::set<std::string> thread_names;
    for (const auto& e : t["traceEvents"]) {
        if (e["ph"] == "X") by_pid[e["pid"].get<int>()].push_back(e);
        if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"]);
    }
    CHECK(thread_names.count("rank 0 compute") == 1);
    REQUIRE(by_pid.size() == 2);  // the skipped point has no track
    for (auto& [pid, ev] : by_pid) {
        // embed + 2 layers x 12 phases + final_norm + lm_head.
        REQUIRE(ev.size() == 1 + 2 * 12 + 2);
        CHECK(ev.front()["name"] == "embed");
        CHECK(ev.back()["name"] == "lm_head");
        double ts = 0;
        for (size_t i = 0; i < ev.size(); ++i) {
            CHECK(phase_from_name(ev[i]["name"].get<std::string>()).has_value());
            CHECK(ev[i]["ts"].get<double>() == Approx(ts));
            ts += ev[i]["dur"].get<double>();
        }
        // Layer 1's qkv_proj slice: 10 + 1 + 1 us.
        int found = 0;
        for (const auto& e : ev)
            if (e["name"] == "qkv_proj" && e["args"].value("layer", -1) == 1) {
                CHECK(e["dur"].get<double>() == Approx(12.0));
                ++found;
            }
        CHECK(found == 1);
        CHECK(ts == Approx(3 + 2 + 5 + [] {
                  double s = 0;
                  for (int l = 0; l < 2; ++l)
                      for (int p = 0; p < 12; ++p) s += 10 + p + l;
                  return s;
              }()));
    }
}

TEST_CASE("prometheus: well-formed exposition with HELP/TYPE and consistent histograms", "[formats]") {
    std::string prom = render_report(constructed_report(), "prom");
    static const std::regex sample(
        R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*)?\})? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$)");
    std::map<std::string, std::string> type_of;
    std::set<std::string> finished;  // families whose block has ended
    std::string current;
    std::map<std::string, int> counts;
    for (const auto& line : lines_of(prom)) {
        if (line.rfind("# HELP ", 0) == 0) {
            std::string name = line.substr(7, line.find(' ', 7) - 7);
            CHECK(finished.count(name) == 0);  // one block per family
            if (!current.empty()) finished.insert(current);
            current = name;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            std::string rest = line.substr(7);
            std::string name = rest.substr(0, rest.find(' ')), type = rest.substr(rest.find(' ') + 1);
            CHECK(name == current);
            CHECK((type == "counter" || type == "gauge" || type == "summary" || type == "histogram"));
            type_of[name] = type;
            continue;
        }
        std::smatch m;
        INFO(line);
        REQUIRE(std::regex_match(line, m, sample));
        std::string name = m[1];
        std::string family = name;
        for (const char* suf : {"_bucket", "_sum", "_count"})
            if (!type_of.count(family) && family.size() > strlen(suf) &&
                family.substr(family.size() - strlen(suf)) == suf)
                family = family.substr(0, family.size() - strlen(suf));
        CHECK(family == current);  // samples sit inside their family's block, after HELP and TYPE
        if (type_of[family] == "counter") CHECK(name.substr(name.size() - 6) == "_total");
        counts[name]++;
    }
    CHECK(type_of["moebench_expert_activations_total"] == "counter");
    CHECK(type_of["moebench_phase_latency_seconds"] == "summary");
    CHECK(type_of["moebench_step_latency_seconds"] == "histogram");
    CHECK(type_of["moebench_expert_load_max_over_mean"] == "gauge");
    CHECK(counts["moebench_expert_activations_total"] == 2 * 2 * 4);  // points x layers x experts
    // Histogram of point 0: buckets cumulative, +Inf equals the count (4 samples).
    std::vector<double> buckets;
    for (const auto& line : lines_of(prom))
        if (line.rfind("moebench_step_latency_seconds_bucket{point=\"0\"", 0) == 0)
            buckets.push_back(std::stod(line.substr(line.rfind(' ') + 1)));
    REQUIRE(buckets.size() >= 2);
    for (size_t i = 1; i < buckets.size(); ++i) CHECK(buckets[i] >= buckets[i - 1]);
    CHECK(buckets.back() == 4);
    CHECK(prom.find("moebench_step_latency_seconds_count{point=\"0\"") != std::string::npos);
}

TEST_CASE("markdown and the report command", "[formats][cli]") {
    std::string md = render_report(constructed_report(), "md");
    CHECK(md.find("| # | point | status |") != std::string::npos);
    CHECK(md.find("**(golden)**") != std::string::npos);
    CHECK(md.find("**Golden point**: batch 4: test") != std::string::npos);
    CHECK_THROWS_AS(render_report(constructed_report(), "pdf"), ConfigError);
    CHECK_THROWS_AS(render_report(json::object(), "csv"), ConfigError);

    std::string dir = test::temp_dir("formats");
    std::string path = dir + "/r.json";
    std::ofstream(path) << constructed_report().dump();
    auto r = test::run_cli("report " + path + " --format csv");
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind("point,status,reason,", 0) == 0);
    auto h = test::run_cli("report " + path + " --format html -o " + dir + "/r.html");
    CHECK(h.exit_code == 0);
    CHECK(test::read_text(dir + "/r.html").find("chart-throughput-p95") != std::string::npos);
    CHECK(test::run_cli("report " + path + " --format pdf").exit_code == 2);
    CHECK(test::run_cli("report " + dir + "/missing.json --format csv").exit_code == 2);
    std::filesystem::remove_all(dir);
}

TEST_CASE("views say which percentiles are weak, the energy per token and whether the host was quiet", "[formats]") {
    json report = constructed_report();
    json& run = report["runs"][0];
    run["latency"]["step"]["low_confidence"] = {"p95_us", "p99_us"};
    run["conditions"] = {
        {"host",
         {{"contended", true},
          {"throttled", nullptr},
          {"note", "other processes used 40% of all CPU time"},
          {"energy",
           {{"source", "counter"}, {"scope", "RAPL package zones"}, {"joules", 2.0}, {"joules_per_token", 0.25}}}}},
        {"device", {{"throttled", false}, {"energy", {{"available", false}, {"reason", "no NVML"}}}}}};
    const std::string csv = render_report(report, "csv");
    const auto header = csv_split(lines_of(csv)[0]);
    const auto row = csv_split(lines_of(csv)[1]);  // the first phase row of point 0
    std::map<std::string, std::string> cell;
    for (size_t i = 0; i < header.size(); ++i) cell[header[i]] = row[i];
    CHECK(cell["low_confidence"] == "p95_us;p99_us");
    CHECK(cell["energy_j_per_token"] == "0.25");  // device energy unavailable: the host's RAPL counter
    CHECK(cell["energy_scope"] == "host: RAPL package zones");
    CHECK(cell["host_contended"] == "yes");
    CHECK(cell["throttled"] == "no");  // the device says no, the host does not know
    // Point 1 has no conditions block (an older report): empty, not "no".
    const auto row1 = csv_split(lines_of(csv)[16]);
    std::map<std::string, std::string> cell1;
    for (size_t i = 0; i < header.size(); ++i) cell1[header[i]] = row1[i];
    CHECK(cell1["point"] == "1");
    CHECK(cell1["host_contended"].empty());
    CHECK(cell1["energy_j_per_token"].empty());

    const std::string md = render_report(report, "md");
    CHECK(md.find("| ~") != std::string::npos);
    CHECK(md.find("Point 0 was not measured on a quiet machine") != std::string::npos);
    CHECK(md.find("Point 1 was not measured") == std::string::npos);
    const std::string html = render_report(report, "html");
    CHECK(html.find("not quiet: other processes used 40%") != std::string::npos);
    const std::string prom = render_report(report, "prom");
    CHECK(prom.find("moebench_energy_joules_per_token{") != std::string::npos);
    CHECK(prom.find("moebench_host_contended{") != std::string::npos);
}

TEST_CASE("views of modeled times say modeled, never measured", "[formats]") {
    json report = constructed_report(true);
    for (json& r : report["runs"])
        if (r.contains("latency")) r["latency"]["source"] = "modeled", r["throughput"]["source"] = "modeled";
    const std::string md = render_report(report, "md");
    CHECK(md.find("Latency is the modeled end-to-end step") != std::string::npos);
    CHECK(md.find("measured end-to-end") == std::string::npos);
    const std::string html = render_report(report, "html");
    CHECK(html.find("Mean µs of each phase per step (modeled)") != std::string::npos);
    CHECK(html.find("(both modeled)") != std::string::npos);
    CHECK(html.find("achieved FLOP/s (modeled)") != std::string::npos);
    CHECK(html.find("(measured)") == std::string::npos);
    const std::string prom = render_report(report, "prom");
    CHECK(prom.find("source=\"modeled\"") != std::string::npos);
    CHECK(prom.find("source=\"measured\"") == std::string::npos);
    CHECK(json::parse(render_report(report, "trace"))["otherData"]["note"].get<std::string>().find("(modeled)") !=
          std::string::npos);
    // One measured point beside a modeled one: the views say both.
    report["runs"][0]["latency"]["source"] = "measured";
    CHECK(render_report(report, "md").find("measured or modeled (per point)") != std::string::npos);
    CHECK(render_report(report, "prom").find("source=\"measured\"") != std::string::npos);
}

TEST_CASE("format table: each kind's views, and a format a kind lacks refused naming the formats it has", "[formats]") {
    const std::vector<DocKind> kinds = {DocKind::report,     DocKind::plan,       DocKind::bench_moe,
                                        DocKind::bench_a2a,  DocKind::comparison, DocKind::trace_info,
                                        DocKind::devices,    DocKind::placement,  DocKind::hardware_fields,
                                        DocKind::deploy,     DocKind::offload,    DocKind::hardware_profile,
                                        DocKind::calibration};
    // Every kind has its terminal view and its JSON document; the run report alone has trace and prom, the run report
    // and the deploy document csv and html, the cache replay csv.
    for (DocKind k : kinds) {
        INFO(to_string(k));
        CHECK(parse_format("text", k, "--format") == "text");
        CHECK(parse_format("json", k, "--format") == "json");
        const bool report = k == DocKind::report, deploy = k == DocKind::deploy, offload = k == DocKind::offload;
        for (const char* f : {"trace", "prom"})
            CHECK(test::config_error_of([&] { parse_format(f, k, "--format"); }).empty() == report);
        CHECK(test::config_error_of([&] { parse_format("csv", k, "--format"); }).empty() ==
              (report || deploy || offload));
        CHECK(test::config_error_of([&] { parse_format("html", k, "--format"); }).empty() == (report || deploy));
    }
    CHECK(format_names(DocKind::report) ==
          std::vector<std::string>{"text", "csv", "md", "html", "trace", "prom", "json"});
    CHECK(format_names(DocKind::comparison) == std::vector<std::string>{"text", "md", "json"});
    CHECK(format_names(DocKind::plan) == std::vector<std::string>{"text", "json"});
    CHECK(format_names(DocKind::hardware_fields) == std::vector<std::string>{"text", "md", "json"});
    CHECK(format_names(DocKind::deploy) == std::vector<std::string>{"text", "csv", "html", "json"});
    CHECK(format_names(DocKind::offload) == std::vector<std::string>{"text", "csv", "json"});
    CHECK(format_names_help(DocKind::trace_info) == "text | json");
    // An alias resolves to its format's name, for the kinds that have it.
    CHECK(parse_format("markdown", DocKind::comparison, "--format") == "md");
    // A known format without a view of the kind, and an unknown one: the field, the value and that kind's formats.
    std::string msg = test::config_error_of([] { parse_format("md", DocKind::plan, "--format"); });
    CHECK_THAT(msg, Catch::StartsWith("--format: a plan has no md view (got md); use one of: text, json"));
    msg = test::config_error_of([] { parse_format("pdf", DocKind::comparison, "--format"); });
    CHECK_THAT(msg, Catch::StartsWith("--format: unknown format (got pdf); use one of: text, md, json"));
    msg = test::config_error_of([] { parse_format_list("csv,md", DocKind::report, "--format", false); });
    CHECK_THAT(msg, Catch::Contains("takes one format"));
    CHECK(parse_format_list("csv,markdown,json", DocKind::report, "--format", true) ==
          std::vector<std::string>{"csv", "md", "json"});
    // The JSON view of any document is the document.
    const json doc = {{"schema", "moebench.devices/1"}, {"x", 1}};
    CHECK(json::parse(render_view(doc, DocKind::devices, "json")) == doc);
    CHECK(format_extension("text") == "txt");
}

TEST_CASE("format table: every subcommand that prints a view takes --format from the table", "[formats][cli]") {
    const std::string tiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";
    const std::string dir = test::temp_dir("views");
    // A format the kind lacks is exit 2 before any work, naming the kind's formats.
    for (const auto& [args, formats] : std::vector<std::pair<std::string, std::string>>{
             {"plan --format md", "text, json"},
             {"devices --format csv", "text, json"},
             {"devices --hardware-fields --format csv", "text, md, json"},
             {"bench moe --model " + tiny + " --format html", "text, json"},
             {"trace info " + dir + "/none.safetensors --format prom", "text, json"},
             {"report " + dir + "/none.json --format yaml", "text, csv, md, html, trace, prom, json"},
             {"deploy --model olmoe-1b-7b --isl 8 --osl 8 --concurrency 1 --format md", "text, csv, html, json"},
             {"offload --trace " + dir + "/none.jsonl --resident 2 --format md", "text, csv, json"}}) {
        INFO(args);
        const auto r = test::run_cli(args);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err,
                   Catch::StartsWith("moebench: error: --format: ") && Catch::Contains("use one of: " + formats));
    }
    // The help texts list the kind's formats from the table.
    CHECK_THAT(test::run_cli("plan --help").out, Catch::Contains("text | json"));
    CHECK_THAT(test::run_cli("compare --help").out, Catch::Contains("text | md | json"));
    CHECK_THAT(test::run_cli("report --help").out, Catch::Contains("text | csv | md | html | trace | prom | json"));
    CHECK_THAT(test::run_cli("devices --help").out, Catch::Contains("with --hardware-fields text | md | json"));
    CHECK_THAT(test::run_cli("deploy --help").out, Catch::Contains("text | csv | html | json"));
    // devices --hardware-fields: the views of its document, through the table.
    for (const char* f : {"text", "md", "json"}) {
        INFO(f);
        const auto r = test::run_cli(std::string("devices --hardware-fields --format ") + f);
        CHECK(r.exit_code == 0);
        CHECK(r.out == render_view(hardware_fields_document(), DocKind::hardware_fields, f));
    }
    CHECK_THAT(test::run_cli("devices --hardware-fields --format csv").err,
               Catch::Contains("a hardware field table has no csv view"));

    // run's terminal summary is the report's text view; a sweep's summary is its report's text view.
    const auto run =
        test::run_cli("run --backend sim --model " + tiny + " --batch 4 --layers 2 --out " + dir + "/r.json");
    REQUIRE(run.exit_code == 0);
    const auto text = test::run_cli("report " + dir + "/r.json --format text");
    REQUIRE(text.exit_code == 0);
    CHECK(run.out == text.out + "report: " + dir + "/r.json\n");
    const auto sweep = test::run_cli("sweep --backend sim --model " + tiny + " --layers 2 --batch 1,2 --out " + dir +
                                     "/s.json --format text");
    REQUIRE(sweep.exit_code == 0);
    const std::string sweep_text = test::read_text(dir + "/s.txt");  // --format text: the view next to the report
    CHECK_THAT(sweep_text,
               Catch::StartsWith("point ") && Catch::Contains("batch=2") && Catch::Contains("golden point"));
    CHECK(sweep.out ==
          sweep_text + "report: " + dir + "/s.json\njournal: " + dir + "/s.jsonl\nwrote: " + dir + "/s.txt\n");
    CHECK(test::run_cli("report " + dir + "/s.json --format text").out == sweep_text);
    std::filesystem::remove_all(dir);
}
