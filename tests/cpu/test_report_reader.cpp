// SPDX-License-Identifier: Apache-2.0
// The strict report reader shared by `compare` and `report` (issue 14, failures 4 and 5): broken reports are exit 2
// naming the file and the JSON path in both commands; points of different models or backends never match; environment
// differences are warnings; nothing comparable is exit 2; reports written by today's binary (run and sweep, sim and
// cpu) still read, render and compare; CSV cells that a spreadsheet would run as formulas are neutralised.
#include "common/error.hpp"
#include "compare/compare.hpp"
#include "report/formats.hpp"
#include "report/report_reader.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "report_edit.hpp"

using namespace moebench;
using moebench::test::run_cli;

namespace {

const std::string kTiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";

// A report of the real binary (stdout JSON); `args` adds to a short run.
json run_report(const std::string& args) {
    auto r = run_cli("run --json - --warmup 0 --iters 3 " + args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

json sim_report(const std::string& model = kTiny, int batch = 4) {
    static std::map<std::string, json> cache;  // the same command gives the same modeled report
    const std::string key = model + "|" + std::to_string(batch);
    if (!cache.count(key))
        cache[key] = run_report("--backend sim --model " + model + " --batch " + std::to_string(batch));
    return cache[key];
}

json cpu_report() {
    static const json r = run_report("--backend cpu --model " + kTiny + " --batch 2");
    return r;
}

// The cpu report with a quiet step (cv 1%): a copy of it compares as "same", not "inconclusive", however busy the
// machine that ran the test was.
json quiet_cpu_report() {
    json r = cpu_report();
    test::set_step_samples(r["runs"][0], {100.0, 101.0, 102.0});
    return r;
}

std::string write_json(const std::string& dir, const std::string& name, const json& j) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << j.dump(1);
    return path;
}

// Every part must appear in the message; the exit code is 2 and nothing went to stdout.
void expect_exit2(const test::CliResult& r, std::initializer_list<std::string> parts) {
    INFO("stderr: " << r.err << "\nstdout: " << r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    for (const auto& p : parts) CHECK_THAT(r.err, Catch::Contains(p));
}

}  // namespace

TEST_CASE("report reader: a missing or non-numeric field is exit 2 in compare and report, naming file and path",
          "[hardening][report_reader]") {
    const std::string dir = test::temp_dir("reader-broken");
    const json good = sim_report();
    const std::string a = write_json(dir, "A.json", good);

    json no_latency = good;
    no_latency["runs"][0].erase("latency");
    json fast = good;
    fast["runs"][0]["latency"]["step"]["mean_us"] = "fast";
    json null_phase = good;
    null_phase["runs"][0]["latency"]["phases"]["expert_up"]["p95_us"] = nullptr;
    json bad_load = good;
    bad_load["runs"][0]["expert_load"]["per_layer"][0]["tokens_per_expert"][1] = "many";

    struct Case {
        json doc;
        std::vector<std::string> parts;
    };
    const std::vector<Case> cases = {
        {no_latency, {"B.json: runs[0].latency", "required field is missing"}},
        {fast, {"B.json: runs[0].latency.step.mean_us", "must be a number", "\"fast\""}},
        {null_phase, {"B.json: runs[0].latency.phases.expert_up.p95_us", "must be a number", "null"}},
        {bad_load, {"B.json: runs[0].expert_load.per_layer[0].tokens_per_expert[1]", "must be a number"}},
    };
    for (const auto& c : cases) {
        const std::string b = write_json(dir, "B.json", c.doc);
        // Before: compare read 0 us for B and said "faster", exit 0; report wrote blank cells, exit 0.
        auto cmp = run_cli("compare " + a + " " + b);
        expect_exit2(cmp, {"moebench: error:"});
        for (const auto& p : c.parts) CHECK_THAT(cmp.err, Catch::Contains(p));
        CHECK_THAT(cmp.err, !Catch::Contains("faster"));
        for (const char* format : {"csv", "md", "html", "prom", "trace", "json"}) {
            auto rep = run_cli("report " + b + " --format " + format);
            INFO(format);
            expect_exit2(rep, {"moebench: error:"});
            for (const auto& p : c.parts) CHECK_THAT(rep.err, Catch::Contains(p));
        }
        // The library entry point is as strict as the commands.
        CHECK_THAT(
            test::config_error_of([&] { (void)compare_reports(good, c.doc, CompareOptions{}, "A.json", "B.json"); }),
            Catch::Contains(c.parts.front()));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("report reader: compare and report accept the same schemas", "[hardening][report_reader]") {
    const std::string dir = test::temp_dir("reader-schema");
    const json good = sim_report();
    const std::string a = write_json(dir, "A.json", good);
    json other = good;
    other["schema"] = "moebench.report/2";
    json none = good;
    none.erase("schema");
    for (const auto& [doc, part] :
         {std::pair{other, std::string("moebench.report/2")}, {none, std::string("schema")}}) {
        const std::string b = write_json(dir, "B.json", doc);
        // Before: report refused an unknown schema but compare compared it; a missing one passed both.
        expect_exit2(run_cli("compare " + a + " " + b), {"B.json: schema", part});
        expect_exit2(run_cli("report " + b + " --format csv"), {"B.json: schema", part});
    }
    // Not a report at all.
    const std::string arr = write_json(dir, "arr.json", json::array({1, 2}));
    expect_exit2(run_cli("report " + arr), {"arr.json: <root>", "must be an object"});
    std::filesystem::remove_all(dir);
}

TEST_CASE("compare: points of different models never match; exit 2 names the models",
          "[hardening][report_reader][compare]") {
    const std::string dir = test::temp_dir("reader-models");
    const std::string a = write_json(dir, "a.json", sim_report(kTiny));
    const std::string b = write_json(dir, "b.json", sim_report("olmoe-1b-7b"));
    // Before: matched as one point (the axes agree), "faster", exit 0.
    auto r = run_cli("compare " + a + " " + b);
    expect_exit2(r, {"no point", "model tiny-gqa (A) vs olmoe-1b-7b (B)", "different models are never compared"});
    CHECK_THAT(r.err, !Catch::Contains("--match"));  // no flag can make them comparable
    // --match cannot make them match either: the model is always a key.
    expect_exit2(run_cli("compare " + a + " " + b + " --match batch"), {"model tiny-gqa (A) vs olmoe-1b-7b (B)"});
    std::filesystem::remove_all(dir);
}

TEST_CASE("compare: the backend is a match key; modeled against measured only with --allow-modeled, and then said",
          "[hardening][report_reader][compare]") {
    const std::string dir = test::temp_dir("reader-backends");
    const std::string a = write_json(dir, "cpu.json", cpu_report());
    const std::string b = write_json(dir, "sim.json", sim_report(kTiny, 2));
    auto r = run_cli("compare " + a + " " + b);
    expect_exit2(r, {"no point", "backend cpu (A) vs sim (B)", "--match"});
    // The sim profile is a key too (hardware), and the cpu run has none.
    CHECK_THAT(r.err, Catch::Contains("hardware - (A) vs h200-sxm (B)"));

    // --match lets the backend differ, but a model is not a run: before, "faster", exit 0, with warnings only.
    expect_exit2(run_cli("compare " + a + " " + b + " --match batch"),
                 {"measured (A) vs modeled (B)", "batch=2", "--allow-modeled"});
    expect_exit2(run_cli("compare " + b + " " + a + " --match batch"), {"modeled (A) vs measured (B)"});

    auto c = run_cli("compare " + a + " " + b + " --match batch --allow-modeled --format json");
    INFO(c.err);
    REQUIRE(c.exit_code <= 1);
    json cmp = json::parse(c.out);
    CHECK(cmp["counts"]["matched"] == 1);
    CHECK(cmp["counts"]["modeled_vs_measured"] == 1);
    CHECK(cmp["allow_modeled"] == true);
    CHECK(cmp["points"][0]["sources"] == json{{"a", "measured"}, {"b", "modeled"}});
    CHECK_THAT(cmp["points"][0]["note"].get<std::string>(), Catch::Contains("modeled"));
    CHECK(cmp["contrast"]["backend"] == json::array({"cpu", "sim"}));
    CHECK(cmp["match_keys"] == json::array({"model", "batch"}));
    bool warned = false;
    for (const auto& w : cmp["warnings"]) warned = warned || w["field"] == "backend";
    CHECK(warned);
    CHECK_THAT(c.err, Catch::Contains("moebench: warning: backend differs: cpu (A) vs sim (B)"));
    // The text says it next to the verdict and in the summary.
    auto t = run_cli("compare " + a + " " + b + " --match batch --allow-modeled");
    CHECK_THAT(t.out, Catch::Contains("(A measured vs B modeled)"));
    CHECK_THAT(t.out, Catch::Contains("1 compared a model with a measurement (--allow-modeled)"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("compare: environment differences are warnings, and the points are still compared",
          "[hardening][report_reader][compare]") {
    const std::string dir = test::temp_dir("reader-env");
    json base = quiet_cpu_report();
    // The same run as B except for its environment: the numbers are A's, so every verdict is "same".
    json other = base;
    other["tool"]["git_rev"] = "feedfacecafe";
    other["tool"]["build_type"] = "Debug";
    other["environment"]["cpu_model"] = "Some Other CPU";
    other["runs"][0]["backend_info"]["threads"] = 64;
    other["runs"][0]["backend_info"]["dtype"] = "bf16";
    other["config"]["run"]["seed"] = 7;
    const std::string a = write_json(dir, "a.json", base), b = write_json(dir, "b.json", other);
    auto r = run_cli("compare " + a + " " + b + " --format json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json cmp = json::parse(r.out);
    CHECK(cmp["counts"]["matched"] == 1);
    CHECK(cmp["counts"]["same"] == 1);
    std::map<std::string, json> by_field;
    for (const auto& w : cmp["warnings"]) by_field[w["field"]] = w;
    const std::string rev = base["tool"]["git_rev"];
    REQUIRE(by_field.count("tool.git_rev"));
    CHECK(by_field["tool.git_rev"]["a"] == rev);
    CHECK(by_field["tool.git_rev"]["b"] == "feedfacecafe");
    for (const char* f : {"tool.build_type", "environment.cpu_model", "threads", "dtype", "config.run.seed"}) {
        INFO(f);
        CHECK(by_field.count(f) == 1);
    }
    CHECK(by_field["threads"]["b"] == "64");
    for (const char* text :
         {"git revision differs", "build type differs: Release (A) vs Debug (B)", "CPU differs", "thread count differs",
          "dtype differs: fp32 (A) vs bf16 (B)", "run config seed differs: 0 (A) vs 7 (B)"})
        CHECK_THAT(r.err, Catch::Contains(std::string("moebench: warning: ") + text));
    // A report compared with itself has nothing to warn about.
    auto self = run_cli("compare " + a + " " + a + " --format json");
    REQUIRE(self.exit_code == 0);
    CHECK(json::parse(self.out)["warnings"].empty());
    CHECK_THAT(self.err, !Catch::Contains("warning"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("compare: a sweep against a sweep with partly overlapping axes",
          "[hardening][report_reader][compare][sweep]") {
    const std::string dir = test::temp_dir("reader-sweeps");
    const std::string a = dir + "/a.json", b = dir + "/b.json";
    const std::string common = "sweep --backend sim --model " + kTiny + " --quiet --warmup 0 --iters 2 ";
    // A: batch 1,2,4 at context 64. B: batch 2,4,8 at context 64 and 128, and a seed axis A does not have (A's fixed
    // seed 0 comes from its config.run, so A's points meet B's seed-0 points).
    auto ra = run_cli(common + "--batch 1,2,4 --context 64 --out " + a);
    INFO(ra.err);
    REQUIRE(ra.exit_code == 0);
    auto rb = run_cli(common + "--batch 2,4,8 --context 64,128 --set seed=0,5 --out " + b);
    INFO(rb.err);
    REQUIRE(rb.exit_code == 0);
    // A's batch 1 is not in B: missing points fail the gate unless --allow-missing says the grids differ on purpose.
    auto missing = run_cli("compare " + a + " " + b);
    CHECK(missing.exit_code == 1);
    CHECK_THAT(missing.err, Catch::Contains("1 point(s) of A missing from B"));
    auto r = run_cli("compare " + a + " " + b + " --format json --allow-missing");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json cmp = json::parse(r.out);
    CHECK(cmp["counts"]["missing_in_b"] == 1);
    CHECK(cmp["counts"]["matched"] == 2);  // batch 2 and 4 at context 64, seed 0
    CHECK(cmp["counts"]["same"] == 2);     // sim is deterministic
    CHECK(cmp["unmatched_a"].size() == 1);
    CHECK(cmp["unmatched_a"][0].get<std::string>().find("batch=1") != std::string::npos);
    CHECK(cmp["unmatched_b"].size() == 12 - 2);
    for (const auto& p : cmp["points"]) {
        CHECK(p["key"]["context"] == 64);
        CHECK(p["key"]["seed"] == 0);
        CHECK(p["key"]["model"] == "tiny-gqa");
    }
    // Text form: the labels carry the axes that vary.
    auto t = run_cli("compare " + a + " " + b + " --allow-missing");
    CHECK(t.exit_code == 0);
    CHECK_THAT(t.out, Catch::Contains("2 matched: 0 faster, 0 slower, 2 same"));
    // Sweeps that share no point: exit 2, naming the keys that differ.
    const std::string c = dir + "/c.json";
    REQUIRE(run_cli(common + "--batch 8,16 --context 64 --out " + c).exit_code == 0);
    expect_exit2(run_cli("compare " + a + " " + c), {"no point", "batch 1, 2, 4 (A) vs 8, 16 (B)"});
    // A sweep journal reads like its report.
    auto j = run_cli("compare " + a + " " + dir + "/a.jsonl --format json");
    INFO(j.err);
    CHECK(j.exit_code == 0);
    // Today's reports render in every format.
    for (const char* format : {"csv", "md", "html", "prom", "trace", "json"})
        CHECK(run_cli("report " + b + " --format " + format + " -o " + dir + "/view").exit_code == 0);
    std::filesystem::remove_all(dir);
}

TEST_CASE("compare: ambiguous match keys and matched points that never ran are exit 2",
          "[hardening][report_reader][compare]") {
    const std::string dir = test::temp_dir("reader-ambiguous");
    const std::string a = dir + "/a.json";
    REQUIRE(run_cli("sweep --backend sim --model " + kTiny +
                    " --quiet --warmup 0 --iters 2 --batch 2 --context 64,128 --out " + a)
                .exit_code == 0);
    // --match batch: both points of each report are batch=2; which pairs with which would be a guess.
    expect_exit2(run_cli("compare " + a + " " + a + " --match batch"),
                 {"runs[0] and runs[1]", "same point under the match keys", "--match (context)"});
    // Every matched point skipped on one side: nothing compared, the gate must not pass. The skipped records are as a
    // sweep writes them (no model name, no device: those come from the report's point that ran, at another context).
    json skipped = load_json_file(a);
    json ran = skipped["runs"][0];
    ran["axes"]["context"] = 256;
    ran["context"] = 256;
    for (auto& run : skipped["runs"])
        run = json{{"status", "skipped"}, {"skip_reason", "no device"}, {"axes", run["axes"]}};
    skipped["runs"].push_back(ran);
    const std::string s = write_json(dir, "s.json", skipped);
    expect_exit2(run_cli("compare " + a + " " + s), {"no matched point ran in both", "skipped"});
    // ... while report renders the skipped points (with their reason), exit 0.
    auto md = run_cli("report " + s + " --format md");
    CHECK(md.exit_code == 0);
    CHECK_THAT(md.out, Catch::Contains("skipped: no device"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("csv: cells a spreadsheet would run as formulas are neutralised; numbers are not",
          "[hardening][formats][csv]") {
    json doc = sim_report();
    json& run = doc["runs"][0];
    run["model"] = "=HYPERLINK(\"http://x\",\"y\")";
    run["axes"]["routing"] = "+cmd|' /C calc'!A0";
    run["axes"]["mode"] = "@SUM(1+1)";
    run["axes"]["backend"] = "\tsim";
    run["axes"]["capacity_factor"] = -1.5;  // a negative number stays a number
    run["axes"]["soft_topn"] = "-2";        // ... also where the column holds text
    run["axes"]["zz_note"] = "-1+2";        // not a number: neutralised (in extra_axes: "zz_note=-1+2" starts with z)
    run["axes"]["layers"] = "-1+2";
    std::string csv = render_report(read_report(doc, "r.json").doc, "csv");
    std::stringstream ss(csv);
    std::string header, row;
    std::getline(ss, header);
    std::getline(ss, row);
    INFO(row);
    CHECK_THAT(row,
               Catch::Contains(",\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\","));  // quoted (comma), then neutralised
    CHECK_THAT(row, Catch::Contains(",'\tsim,'@SUM(1+1),"));
    CHECK_THAT(row, Catch::Contains(",'+cmd|' /C calc'!A0,"));
    CHECK_THAT(row, Catch::Contains(",-1.5,-2,'-1+2,zz_note=-1+2,"));
    // No cell of any row starts with a formula character unless it is a plain number.
    std::string line;
    while (std::getline(ss, line))
        for (char c : {'=', '+', '@'}) CHECK(line.find(std::string(",") + c) == std::string::npos);
    // The real numbers of the row are untouched (step mean on every row).
    CHECK_THAT(row, Catch::Contains(fmt::format("{}", doc["runs"][0]["latency"]["step"]["mean_us"].get<double>())));
}

TEST_CASE("report reader: today's reports read whole, with the fields compare uses", "[hardening][report_reader]") {
    const json sim = sim_report();
    ReadReport r = read_report(sim, "sim.json");
    REQUIRE(r.runs.size() == 1);
    const ReadRun& run = r.runs[0];
    CHECK(run.ok());
    CHECK(run.model == "tiny-gqa");
    CHECK(run.hardware == "h200-sxm");
    CHECK(run.timing_source == "modeled");
    CHECK(run.step.mean_us == sim["runs"][0]["latency"]["step"]["mean_us"].get<double>());
    CHECK(run.measured_iterations == 0);  // the sim measures nothing: its steps are modeled
    CHECK(run.num_samples == sim["runs"][0]["iterations"]["modeled"].get<int64_t>());
    CHECK(run.phases.count("expert_up") == 1);
    CHECK(r.environment.at("tool.git_rev") == sim["tool"]["git_rev"].get<std::string>());
    CHECK(run_key_value(r, run, "capacity_factor") == 0);  // 0.0 in the file: numbers compare by value
    CHECK(run_key_value(r, run, "seed") == 0);             // not an axis: from the record
    CHECK(run_key_value(r, run, "nosuch").is_null());

    const json cpu = quiet_cpu_report();
    ReadReport c = read_report(cpu, "cpu.json");
    CHECK(c.runs[0].hardware.empty());  // the cpu machine is the environment, not a key
    CHECK(c.runs[0].dtype == "fp32");
    CHECK_FALSE(c.runs[0].threads.empty());
    json same = compare_reports(cpu, cpu, CompareOptions{});
    CHECK(same["counts"]["same"] == 1);
    CHECK(same["warnings"].empty());
}

TEST_CASE("report reader: statistics that cannot be are exit 2 in compare and report, naming path, value and fix",
          "[hardening][report_reader]") {
    const std::string dir = test::temp_dir("reader-implausible");
    json good = cpu_report();
    test::set_step_samples(good["runs"][0], {1446.424, 104.679, 100.969});  // a cold 3-step run: cv 1.41
    const std::string a = write_json(dir, "A.json", good);
    json slow = good;  // B: 2x slower, as it should be caught
    test::scale_times(slow["runs"][0], 2.0);
    const json& st = good["runs"][0]["latency"]["step"];
    const double range = st["max_us"].get<double>() - st["min_us"].get<double>();

    struct Case {
        std::string what;
        json doc;
        std::vector<std::string> parts;
    };
    std::vector<Case> cases;
    auto edit = [&](const std::string& what, const json& base, auto&& f, std::vector<std::string> parts) {
        json d = base;
        f(d["runs"][0]);
        cases.push_back({what, d, std::move(parts)});
    };
    // Before: a stdev of 1e300 (or 100x its own range) made the band swallow the 2x slowdown: "same", exit 0.
    edit("stdev 1e300", slow, [](json& r) { r["latency"]["step"]["stdev_us"] = 1e300; },
         {"B.json: runs[0].latency.step.stdev_us", "1e+300", "3 samples", "unedited"});
    edit("stdev 100x range", slow, [&](json& r) { r["latency"]["step"]["stdev_us"] = 200 * range; },
         {"runs[0].latency.step.stdev_us", "cannot be the standard deviation"});
    // Before: compared as it was.
    edit("mean above max", good, [](json& r) { r["latency"]["step"]["mean_us"] = 5000.0; },
         {"runs[0].latency.step.mean_us", "5000", "outside [min_us, max_us]"});
    edit("p95 above max", good, [](json& r) { r["latency"]["phases"]["expert_up"]["p95_us"] = 1e9; },
         {"runs[0].latency.phases.expert_up.p95_us", "outside [min_us, max_us]"});
    edit("phase stdev", good, [](json& r) { r["latency"]["phases"]["attention"]["stdev_us"] = 1e12; },
         {"runs[0].latency.phases.attention.stdev_us", "cannot be the standard deviation"});
    edit("cv", good, [](json& r) { r["latency"]["step"]["cv"] = 0.01; },
         {"runs[0].latency.step.cv", "stdev_us / mean_us"});
    edit("count", good, [](json& r) { r["latency"]["step"]["count"] = 7; },
         {"runs[0].latency.step.count", "iterations.measured (3)"});
    // step_samples_us: negative, outside the statistics, not one per iteration, absurd (before: the last was rendered
    // as a Prometheus histogram of hundreds of power-of-two buckets).
    edit("negative sample", good, [](json& r) { r["latency"]["step_samples_us"][1] = -5.0; },
         {"runs[0].latency.step_samples_us[1]", "must not be negative"});
    edit("sample outside", good, [](json& r) { r["latency"]["step_samples_us"][2] = 99999.0; },
         {"runs[0].latency.step_samples_us[2]", "outside [min_us, max_us]"});
    edit("samples count", good, [](json& r) { r["latency"]["step_samples_us"].erase(2); },
         {"runs[0].latency.step_samples_us", "2 samples", "iterations.measured (3)"});
    edit("absurd samples", good,
         [](json& r) {
             test::set_step_samples(r, {1e-3, 1e150, 5.0});
         },
         {"runs[0].latency.step.max_us", "not a plausible time"});
    edit("samples vs mean", good,
         [](json& r) {
             r["latency"]["step_samples_us"] = {100.969, 104.679, 104.679};
         },
         {"runs[0].latency.step_samples_us", "latency.step"});
    // Expert load against the model (4 experts).
    edit("short tokens_per_expert", good,
         [](json& r) { r["expert_load"]["per_layer"][0]["tokens_per_expert"].erase(3); },
         {"runs[0].expert_load.per_layer[0].tokens_per_expert", "3 entries", "4 experts"});
    edit("num_assignments", good, [](json& r) { r["expert_load"]["per_layer"][0]["num_assignments"] = 1000; },
         {"runs[0].expert_load.per_layer[0].num_assignments", "1000", "sum of tokens_per_expert"});
    // Source labels against the backend.
    edit("cpu claims modeled", good,
         [](json& r) {
             r["latency"]["source"] = "modeled";
             r["throughput"]["source"] = "modeled";
         },
         {"runs[0].latency.source", "modeled", "backend cpu measures"});
    edit("sim claims measured", sim_report(), [](json& r) { r["latency"]["source"] = "measured"; },
         {"runs[0].latency.source", "measured", "backend sim models"});
    edit("sim counts measured iterations", sim_report(), [](json& r) { r["iterations"]["measured"] = 3; },
         {"runs[0].iterations.measured", "a modeled run measures no step"});
    edit("whole model not extrapolated", good, [](json& r) { r["latency"]["whole_model"]["source"] = "extrapolated"; },
         {"runs[0].latency.whole_model.source", "extrapolated", "false"});

    for (const auto& c : cases) {
        INFO(c.what);
        const std::string b = write_json(dir, "B.json", c.doc);
        auto cmp = run_cli("compare " + a + " " + b);
        expect_exit2(cmp, {"moebench: error:"});
        for (const auto& p : c.parts) CHECK_THAT(cmp.err, Catch::Contains(p));
        expect_exit2(run_cli("report " + b + " --format prom"),
                     {"B.json: " + c.parts.front().substr(c.parts.front().find("runs["))});
    }
    // Non-finite values (only a document built in memory can hold them): the library entry point refuses them too.
    json nan = good;
    nan["runs"][0]["latency"]["step"]["stdev_us"] = std::nan("");
    CHECK_THAT(test::config_error_of([&] { (void)compare_reports(good, nan, CompareOptions{}, "A.json", "B.json"); }),
               Catch::Contains("B.json: runs[0].latency.step.stdev_us: must be a finite number"));
    // The unedited reports read, and a report compared with itself is never refused.
    CHECK(run_cli("compare " + a + " " + a).exit_code != 2);
    CHECK(run_cli("report " + write_json(dir, "sim.json", sim_report()) + " --format prom").exit_code == 0);
    std::filesystem::remove_all(dir);
}

TEST_CASE("report reader: an extrapolated whole model is labelled extrapolated, also in reports written before",
          "[hardening][report_reader]") {
    const std::string dir = test::temp_dir("reader-extrapolated");
    json one_layer = run_report("--backend cpu --model " + kTiny + " --batch 2 --layers 1");
    const json& whole = one_layer["runs"][0]["latency"]["whole_model"];
    CHECK(whole["extrapolated"] == true);
    // Before: "source": "measured".
    CHECK(whole["source"] == "extrapolated");
    CHECK(whole["extrapolated_from"] == "measured");
    // A report of an earlier version said "measured": read back, the views see "extrapolated".
    json old = one_layer;
    old["runs"][0]["latency"]["whole_model"]["source"] = "measured";
    old["runs"][0]["latency"]["whole_model"].erase("extrapolated_from");
    auto r = run_cli("report " + write_json(dir, "old.json", old) + " --format json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json back = json::parse(r.out)["runs"][0]["latency"]["whole_model"];
    CHECK(back["source"] == "extrapolated");
    CHECK(back["extrapolated_from"] == "measured");
    // All layers run: the whole model is the latency's own source.
    CHECK(cpu_report()["runs"][0]["latency"]["whole_model"]["source"] == "measured");
    CHECK(sim_report()["runs"][0]["latency"]["whole_model"]["source"] == "modeled");
    std::filesystem::remove_all(dir);
}
