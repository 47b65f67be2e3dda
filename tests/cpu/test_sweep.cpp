// SPDX-License-Identifier: Apache-2.0
// Sweep axes, expansion, journal (torn line, fingerprint), the sweep loop with an injected executor
// (skips, resume, time budget) and golden point / knee selection on constructed series.
#include "common/error.hpp"
#include "sweep/axes.hpp"
#include "sweep/golden.hpp"
#include "sweep/journal.hpp"
#include "sweep/sweep_runner.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "cli_helpers.hpp"

using namespace moebench;

namespace {

// A model that loads: planning a sweep reads the model each point names.
const std::string kTinyModel = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";

json base_run() {
    RunConfig c;
    c.model = kTinyModel;
    c.backend = "cpu";
    return run_config_to_json(c);
}

// A record as run_point would give it, with a throughput that is a known function of the config.
json fake_record(const RunConfig& c) {
    double step_us = 100.0 + 10.0 * static_cast<double>(c.shape.batch);
    return json{{"status", "ok"},
                {"batch", c.shape.batch},
                {"context", c.shape.context},
                {"axes", {{"backend", "cpu"}, {"batch", c.shape.batch}, {"context", c.shape.context}}},
                {"latency", {{"step", {{"mean_us", step_us}, {"p95_us", step_us * 1.1}}}}},
                {"throughput", {{"tokens_per_s", static_cast<double>(c.shape.batch) / (step_us * 1e-6)}}}};
}

}  // namespace

TEST_CASE("axis values: lists, ranges, strings", "[sweep]") {
    CHECK(parse_axis_values("1,2,4", "batch") == std::vector<json>{1, 2, 4});
    CHECK(parse_axis_values("1..16", "batch") == std::vector<json>{1, 2, 4, 8, 16});
    CHECK(parse_axis_values("1..100:x10", "batch") == std::vector<json>{1, 10, 100});
    CHECK(parse_axis_values("0..3072:+1024", "context") == std::vector<json>{0, 1024, 2048, 3072});
    CHECK(parse_axis_values("1.5,2", "capacity_factor") == std::vector<json>{1.5, 2});
    CHECK(parse_axis_values("router,zipf:1.2,hot:4:0.6", "routing") ==
          std::vector<json>{"router", "zipf:1.2", "hot:4:0.6"});
    CHECK_THROWS_AS(parse_axis_values("1,,2", "batch"), ConfigError);
    CHECK_THROWS_AS(parse_axis_values("8..1", "batch"), ConfigError);
    CHECK_THROWS_AS(parse_axis_values("0..8", "batch"), ConfigError);  // geometric from 0
    CHECK_THROWS_AS(axis_values_from_json(json::array(), "axes.batch"), ConfigError);
    CHECK(axis_values_from_json(json{1, "4..8"}, "axes.batch") == std::vector<json>{1, 4, 8});
}

TEST_CASE("expansion: cartesian product in canonical order, batch fastest", "[sweep]") {
    auto axes = canonical_axes({{"batch", {1, 2, 4}}, {"context", {0, 512}}, {"routing", {"router", "uniform"}}});
    REQUIRE(axes.size() == 3);
    CHECK(axes[0].name == "routing");
    CHECK(axes[1].name == "context");
    CHECK(axes[2].name == "batch");
    auto pts = expand_axes(axes);
    REQUIRE(pts.size() == 12);
    CHECK(pts[0] == json{{"routing", "router"}, {"context", 0}, {"batch", 1}});
    CHECK(pts[1] == json{{"routing", "router"}, {"context", 0}, {"batch", 2}});
    CHECK(pts[3] == json{{"routing", "router"}, {"context", 512}, {"batch", 1}});
    CHECK(pts[11] == json{{"routing", "uniform"}, {"context", 512}, {"batch", 4}});
    // Duplicates are dropped; no axes = one point.
    CHECK(expand_axes({{"batch", {1, 1, 2}}}).size() == 2);
    CHECK(expand_axes({}).size() == 1);
    // A later axis of the same name replaces the earlier one (flags over config).
    CHECK(canonical_axes({{"batch", {1}}, {"batch", {2, 3}}})[0].values.size() == 2);
    // Keys are stable whether a value came in as 8 or 8.0.
    CHECK(point_key(json{{"batch", 8}}) == point_key(json{{"batch", 8.0}}));
}

TEST_CASE("apply_point sets fields and rejects bad values", "[sweep]") {
    RunConfig c = apply_point(base_run(), json{{"batch", 16}, {"context", 2048}, {"routing", "zipf:1.2"}});
    CHECK(c.shape.batch == 16);
    CHECK(c.shape.context == 2048);
    CHECK(c.routing == "zipf:1.2");
    CHECK(c.model == kTinyModel);
    CHECK_THROWS_AS(apply_point(base_run(), json{{"batch", -1}}), ConfigError);
    CHECK_THROWS_AS(apply_point(base_run(), json{{"no_such_field", 1}}), ConfigError);
}

TEST_CASE("knee and golden point on a constructed series", "[sweep]") {
    // Throughput saturates: 1000, 1900, 3500, 6000, 7800, 8000 tok/s; p95 grows with batch.
    std::vector<CurvePoint> s = {{0, 8, 1000, 1000},  {1, 16, 1900, 1100},  {2, 32, 3500, 1300},
                                 {3, 64, 6000, 1800}, {4, 128, 7800, 3000}, {5, 256, 8000, 5600}};
    // 90% of 8000 = 7200: the first batch reaching it is 128.
    REQUIRE(knee_index(s, 0.9) == 4u);
    REQUIRE(knee_index(s, 0.7) == 3u);  // 5600: batch 64
    REQUIRE(knee_index(s, 1.0) == 5u);
    // SLO 2 ms: the best throughput with p95 <= 2000 us is batch 64.
    REQUIRE(golden_index(s, 2000) == 3u);
    REQUIRE(golden_index(s, 10000) == 5u);
    REQUIRE_FALSE(golden_index(s, 500).has_value());

    // The same series as report records: reasoning names the share of peak and the p95 ratio.
    json runs = json::array();
    for (const auto& p : s)
        runs.push_back({{"status", "ok"},
                        {"batch", p.batch},
                        {"axes", {{"batch", p.batch}, {"context", 0}}},
                        {"throughput", {{"tokens_per_s", p.tokens_per_s}}},
                        {"latency", {{"step", {{"p95_us", p.p95_us}}}}}});
    runs.push_back(
        {{"status", "skipped"}, {"skip_reason", "does not fit"}, {"axes", {{"batch", 512}, {"context", 0}}}});
    json a = analyze_sweep(runs, std::nullopt, 0.9);
    REQUIRE(a["series"].size() == 1);
    CHECK(a["series"][0]["knee"]["batch"] == 128);
    // 7800 / 8000 = 98%, 3000 / 5600 = 54%.
    std::string reason = a["series"][0]["knee"]["reason"];
    CHECK(reason.find("batch 128: 98% of peak throughput") != std::string::npos);
    CHECK(reason.find("54% of the p95 of batch 256") != std::string::npos);
    CHECK(a["golden"]["batch"] == 128);  // no SLO: golden = knee
    json b = analyze_sweep(runs, 2.0, 0.9);
    CHECK(b["golden"]["batch"] == 64);
    CHECK(b["golden"]["share_of_peak"].get<double>() == Approx(0.75));
    CHECK(b["golden"]["reason"].get<std::string>().find("75% of peak throughput") != std::string::npos);
    json c = analyze_sweep(runs, 0.5, 0.9);
    CHECK(c["golden"].is_null());
    CHECK(c["golden_reason"].get<std::string>().find("no point meets") != std::string::npos);
    CHECK(a["source"] == "measured");
    CHECK(a["golden"]["reason"].get<std::string>().find("(context") == std::string::npos);  // one series: no name

    // A second series (context 64, half the throughput) of modeled points: the golden point names its series, and
    // the analysis says its times are modeled.
    json two = json::array();
    for (json r : runs) {
        if (r.contains("latency")) r["latency"]["source"] = "modeled";
        two.push_back(r);
        if (r["status"] != "ok") continue;
        r["axes"]["context"] = 64;
        r["throughput"]["tokens_per_s"] = r["throughput"]["tokens_per_s"].get<double>() / 2;
        two.push_back(r);
    }
    json d = analyze_sweep(two, std::nullopt, 0.9);
    REQUIRE(d["series"].size() == 2);
    CHECK(d["source"] == "modeled");
    CHECK(d["golden"]["reason"].get<std::string>().find("holding the peak throughput (context=0)") !=
          std::string::npos);
    json e = analyze_sweep(two, 2.0, 0.9);
    CHECK(e["golden"]["reason"].get<std::string>().find("batch 64 (context=0): 6000 tok/s") != std::string::npos);
}

TEST_CASE("journal: torn last line is dropped, other fingerprints are refused", "[sweep]") {
    std::string dir = test::temp_dir("journal");
    std::string path = dir + "/j.jsonl";
    append_journal(path, "f1", JournalEntry{"{\"batch\":1}", {{"batch", 1}}, {{"status", "ok"}}});
    append_journal(path, "f1", JournalEntry{"{\"batch\":2}", {{"batch", 2}}, {{"status", "ok"}}});
    {
        std::ofstream(path, std::ios::app)
            << "{\"journal\":\"moebench.sweep-journal/1\",\"fingerprint\":\"f1\",\"key\":\"{\\\"ba";
    }
    bool repaired = false;
    auto e = load_journal(path, "f1", &repaired);
    CHECK(repaired);
    REQUIRE(e.size() == 2);
    CHECK(e[1].point == json{{"batch", 2}});
    // The file now ends with a complete line, so the next append is a line of its own.
    append_journal(path, "f1", JournalEntry{"{\"batch\":4}", {{"batch", 4}}, {{"status", "ok"}}});
    CHECK(load_journal(path, "f1", &repaired).size() == 3);
    CHECK_FALSE(repaired);
    CHECK_THROWS_AS(load_journal(path, "other", nullptr), ConfigError);
    std::filesystem::remove_all(dir);
}

TEST_CASE("journal writer: every line written at once, each record read back at its span", "[sweep]") {
    // The sweep's journal stays open and is fsynced at most every 0.1 s (an fsync per point cost more than a sim
    // point); each line is still written before the next point starts, so a killed sweep loses only the running
    // point, and the report is written from the spans.
    std::string dir = test::temp_dir("journal-writer");
    std::string path = dir + "/j.jsonl";
    append_journal(path, "f1", JournalEntry{"{\"batch\":0}", {{"batch", 0}}, {{"status", "ok"}, {"n", 0}}});
    std::vector<JournalSpan> spans;
    std::vector<json> records;
    {
        JournalWriter w(path, "f1");
        for (int b = 1; b <= 50; ++b) {
            records.push_back({{"status", "ok"}, {"batch", b}, {"text", std::string(static_cast<size_t>(b), 'x')}});
            spans.push_back(
                w.append(JournalEntry{"{\"batch\":" + std::to_string(b) + "}", {{"batch", b}}, records.back()}));
            // Written already, before any sync: a reader (or a resume after a kill) sees every finished point.
            CHECK(load_journal(path, "f1", nullptr).size() == static_cast<size_t>(b) + 1);
        }
        w.close();
    }
    for (size_t i = 0; i < spans.size(); ++i) CHECK(json::parse(read_journal_span(path, spans[i])) == records[i]);
    const auto entries = load_journal(path, "f1", nullptr);
    REQUIRE(entries.size() == 51);
    CHECK(entries[50].record == records[49]);
    // A span the file no longer holds is refused, naming the journal.
    CHECK_THROWS_WITH(read_journal_span(path, JournalSpan{1 << 30, 10}), Catch::Contains("j.jsonl"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("run_sweep: skipped points, journal, resume, time budget", "[sweep]") {
    std::string dir = test::temp_dir("sweeprun");
    SweepSpec spec;
    spec.base_run = base_run();
    spec.axes = canonical_axes({{"batch", {1, 2, 4, 8}}, {"context", {0, 64}}});
    spec.journal_path = dir + "/j.jsonl";
    int calls = 0;
    auto exec = [&](const RunConfig& c) {
        ++calls;
        if (c.shape.batch == 8 && c.shape.context == 64) throw UnsupportedError("batch 8 does not fit");
        return fake_record(c);
    };
    SweepOutcome o = run_sweep(spec, exec);
    CHECK(calls == 8);
    CHECK(o.num_ok == 7);
    CHECK(o.num_skipped == 1);
    REQUIRE(o.runs.size() == 8);
    CHECK(o.runs[7]["status"] == "skipped");
    CHECK(o.runs[7]["skip_reason"] == "batch 8 does not fit");
    CHECK(o.runs[7]["axes"]["batch"] == 8);
    CHECK(o.sweep["num_points"] == 8);
    CHECK(o.sweep["stop_reason"] == "done");
    CHECK(o.sweep["series"].size() == 2);
    CHECK(load_journal(spec.journal_path, o.sweep["fingerprint"], nullptr).size() == 8);

    // Without --resume an existing journal is refused; with it nothing runs again.
    CHECK_THROWS_AS(run_sweep(spec, exec), ConfigError);
    spec.resume = true;
    calls = 0;
    SweepOutcome r = run_sweep(spec, exec);
    CHECK(calls == 0);
    CHECK(r.num_resumed == 8);
    CHECK(r.runs == o.runs);

    // Widening an axis runs only the new points.
    spec.axes = canonical_axes({{"batch", {1, 2, 4, 8, 16}}, {"context", {0, 64}}});
    calls = 0;
    SweepOutcome w = run_sweep(spec, exec);
    CHECK(calls == 2);
    CHECK(w.runs.size() == 10);

    // Changing a fixed field changes the fingerprint: the old journal is not reused.
    SweepSpec other = spec;
    other.base_run["seed"] = 7;
    CHECK_THROWS_AS(run_sweep(other, exec), ConfigError);

    // Time budget: points of ~30 ms and a 0.05 s budget stop the sweep early and say what was left.
    SweepSpec tb;
    tb.base_run = base_run();
    tb.axes = canonical_axes({{"batch", {1, 2, 3, 4, 5, 6, 7, 8}}});
    tb.journal_path = dir + "/tb.jsonl";
    tb.time_budget_s = 0.05;
    SweepOutcome t = run_sweep(tb, [](const RunConfig& c) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        return fake_record(c);
    });
    CHECK(t.sweep["stop_reason"] == "time_budget");
    CHECK(t.num_ok >= 1);
    CHECK(t.num_ok < 8);
    CHECK(t.num_not_run == 8 - t.num_ok);
    CHECK(t.sweep["not_run"].size() == t.num_not_run);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a sweep's report is written from its journal: the same records, in order, and the same analysis",
          "[sweep][cli]") {
    // The report no longer comes from records held in memory (a 10000-point sweep held gigabytes): each point's
    // record is read back from the journal where it was written.
    std::string dir = test::temp_dir("sweep-from-journal");
    const auto r = test::run_cli("sweep --backend sim --model " + kTinyModel +
                                 " --batch 1,4,16 --ep 1,2 --iters 2 --warmup 0 --quiet --out " + dir + "/s.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json report = load_json_file(dir + "/s.json");
    const auto entries = load_journal(dir + "/s.jsonl", report["sweep"]["fingerprint"].get<std::string>(), nullptr);
    REQUIRE(report["runs"].size() == 6);
    REQUIRE(entries.size() == 6);
    for (size_t i = 0; i < entries.size(); ++i) CHECK(report["runs"][i] == entries[i].record);
    CHECK(report["sweep"]["source"] == "modeled");
    CHECK(report["sweep"]["ok"] == 6);
    CHECK(report["environment"]["backend"] == "sim");
    // The same journal rendered by `report` gives the same runs.
    const auto again = test::run_cli("report " + dir + "/s.jsonl --format json");
    REQUIRE(again.exit_code == 0);
    CHECK(json::parse(again.out)["runs"] == report["runs"]);
    // The analysis made from the points' summaries is the one the whole records give, points that do not fit their
    // GPUs (DeepSeek-V3 in bf16 on 8 H200s) left out as before.
    const auto fit = test::run_cli(
        "sweep --backend sim --model deepseek-v3 --layers 4 --batch 1,64 --ep 8 "
        "--dtype bf16,fp8 --iters 2 --warmup 0 --quiet --out " +
        dir + "/f.json");
    INFO(fit.err);
    REQUIRE(fit.exit_code == 0);
    const json f = load_json_file(dir + "/f.json");
    const json whole = analyze_sweep(f["runs"], std::nullopt, 0.9);
    for (const char* key : {"golden", "series", "not_fitting", "source"}) {
        INFO(key);
        CHECK(f["sweep"].value(key, json()) == whole.value(key, json()));
    }
    CHECK_FALSE(f["sweep"]["not_fitting"].empty());
    std::filesystem::remove_all(dir);
}

TEST_CASE("modeled points run side by side give the same sweep as one by one; measured ones refuse --jobs",
          "[sweep][cli]") {
    // A modeled point's times cannot be disturbed by a neighbour, so a sim sweep computes --jobs points at once (by
    // default this process's CPUs); the journal, the report and the analysis take them in expansion order.
    std::string dir = test::temp_dir("sweep-jobs");
    const std::string common = "sweep --backend sim --model " + kTinyModel +
                               " --batch 1..64 --ep 1,2 --routing router,zipf:1.2 --iters 2 --warmup 0 --quiet ";
    const auto one = test::run_cli(common + "--jobs 1 --out " + dir + "/one.json");
    const auto three = test::run_cli(common + "--jobs 3 --out " + dir + "/three.json");
    INFO(one.err << three.err);
    REQUIRE(one.exit_code == 0);
    REQUIRE(three.exit_code == 0);
    const json a = load_json_file(dir + "/one.json"), b = load_json_file(dir + "/three.json");
    REQUIRE(a["runs"].size() == 28);
    REQUIRE(b["runs"].size() == 28);
    for (size_t i = 0; i < a["runs"].size(); ++i) {
        json x = a["runs"][i], y = b["runs"][i];
        for (json* r : {&x, &y}) r->erase("sweep_point_s");  // how long each took
        CHECK(x == y);
    }
    for (const char* key : {"golden", "series", "ok", "num_points"}) CHECK(a["sweep"][key] == b["sweep"][key]);
    const auto entries = load_journal(dir + "/three.jsonl", b["sweep"]["fingerprint"].get<std::string>(), nullptr);
    REQUIRE(entries.size() == 28);
    for (size_t i = 0; i < entries.size(); ++i) CHECK(entries[i].point == b["runs"][i]["sweep_point"]);
    // Measured points run one at a time: --jobs 2 on the cpu backend is refused, naming the flag and why.
    const auto cpu = test::run_cli("sweep --backend cpu --model " + kTinyModel +
                                   " --batch 1,2 --jobs 2 --quiet --out " + dir + "/cpu.json");
    CHECK(cpu.exit_code == 2);
    CHECK_THAT(cpu.err, Catch::Contains("--jobs") && Catch::Contains("one at a time"));
    std::filesystem::remove_all(dir);
}
