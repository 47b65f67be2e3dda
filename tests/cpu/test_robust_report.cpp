// SPDX-License-Identifier: Apache-2.0
// Robustness of the report and sweep journal readers (report, compare, sweep --resume): a field of the wrong type,
// a corrupt, nested, torn or doubled journal line, two sweeps' lines in one journal, a --match that matches nothing
// are refused naming the file and line (exit 2), never a JSON exception or a silent merge; each failed before its
// fix.
#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/json_util.hpp"
#include "sweep/journal.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::expect_exit2;
using moebench::test::expect_refused;
using moebench::test::is_printable_utf8;
using moebench::test::journal_line;
using moebench::test::journal_lines;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::sim_sweep;
using moebench::test::temp_dir;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";

}  // namespace

TEST_CASE("corrupt sweep journal lines are ConfigErrors, not json exceptions", "[robust][sweep]") {
    const std::string dir = temp_dir("qa-journal");
    // A key that is a number (json type_error 302 before) and a line of invalid UTF-8 (type_error 316 before).
    for (const std::string& bad : {journal_line("5"), std::string("\x8e\xff\x01 garbage")}) {
        const std::string path = dir + "/j.jsonl";
        std::ofstream(path, std::ios::binary | std::ios::trunc) << journal_line("\"{\\\"batch\\\":2}\"") << "\n"
                                                                << bad << "\n"
                                                                << journal_line("\"{\\\"batch\\\":4}\"") << "\n";
        std::string msg = config_error_of([&] { (void)load_journal(path, "f", nullptr); });
        INFO(msg);
        CHECK_THAT(msg, Catch::Contains(path + ":2"));
        CHECK(is_printable_utf8(msg));
        expect_refused("report " + path, {path + ":2"});
    }
    fs::remove_all(dir);
}

TEST_CASE("compare refuses when nothing matches or --match names no axis", "[robust][compare]") {
    const std::string dir = temp_dir("qa-compare");
    const std::string a = dir + "/a.json", b = dir + "/b.json";
    REQUIRE(run_cli("run --model " + kTiny + " --batch 2 --iters 2 --warmup 0 --out " + a).exit_code == 0);
    REQUIRE(run_cli("run --model " + kTiny + " --batch 4 --iters 2 --warmup 0 --out " + b).exit_code == 0);
    // Before: 0 matched points -> exit 0, so a CI gate passed without comparing anything.
    expect_refused("compare " + a + " " + b + " --match batch", {"no point", "--match"});
    // Before: an unknown axis was accepted silently.
    expect_refused("compare " + a + " " + b + " --match nosuchaxis", {"--match", "nosuchaxis", "batch"});
    // A report against itself is compared (exit 0 "same", or exit 1 "inconclusive" when its cpu steps were noisy).
    CHECK(run_cli("compare " + a + " " + a).exit_code != 2);
    fs::remove_all(dir);
}

TEST_CASE("a report with a field of the wrong type is a ConfigError in report and compare", "[robust][report]") {
    const std::string dir = temp_dir("qa-report");
    const std::string good = dir + "/good.json", bad = dir + "/bad.json";
    REQUIRE(run_cli("run --model " + kTiny + " --iters 2 --warmup 0 --out " + good).exit_code == 0);
    json r = load_json_file(good);
    REQUIRE(r["runs"][0]["expert_load"]["per_layer"][0].contains("max_over_mean"));
    r["runs"][0]["expert_load"]["per_layer"][0]["max_over_mean"] = json::object();
    std::ofstream(bad) << r.dump();
    // Before: "moebench: internal error: [json.exception.type_error.302] ...", exit 1.
    expect_refused("report " + bad + " --format md", {bad, "unexpected type"});
    expect_refused("report " + bad + " --format html -o " + dir + "/r.html", {bad, "unexpected type"});
    CHECK(!fs::exists(dir + "/r.html"));
    fs::remove_all(dir);
}

TEST_CASE("--resume refuses a journal whose reused record is corrupt, naming the line's field",
          "[robust][sweep_resume][cli]") {
    const std::string dir = temp_dir("corrupt");
    const std::string out = dir + "/s.json", journal = dir + "/s.jsonl";
    const std::string base = "sweep --model " + kTiny + " --backend cpu --set warmup=0 --set iters=1 --quiet --out " +
                             out + " --journal " + journal;
    REQUIRE(run_cli(base + " --batch 1,2").exit_code == 0);
    // A hand-edited journal: the first point's step mean becomes text. Before, it went into the report and the
    // golden-point analysis unchecked (a JSON type error, exit 1, after the sweep).
    std::vector<json> lines = journal_lines(journal);
    REQUIRE(lines.size() == 2);
    lines[0]["record"]["latency"]["step"]["mean_us"] = "fast";
    {
        std::ofstream o(journal);
        for (const json& l : lines) o << l.dump() << "\n";
    }
    auto r = run_cli(base + " --batch 1,2,4 --resume");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("latency.step.mean_us") != std::string::npos);
    CHECK(r.err.find("s.jsonl") != std::string::npos);
}

TEST_CASE("a deeply nested --set value or journal line never reaches the JSON parser's recursion",
          "[robust][sweep_resume][cli]") {
    const std::string dir = temp_dir("deepset");
    // 30000 levels: as deep as one command-line argument can be (128 KiB).
    const std::string value = moebench::test::write_temp("deep.txt", std::string(30000, '[') + std::string(30000, ']'));
    // As a --set value it is text (not JSON), so the field's own check refuses it.
    auto r = run_cli("sweep --model " + kTiny + " --backend cpu --batch 1 --quiet --out " + dir +
                     "/s.json --set \"iters=$(cat " + value + ")\"");
    INFO(r.err.substr(0, 300));
    CHECK(r.exit_code == 2);
    // As a journal line: exit 2 naming the line.
    const std::string journal = dir + "/j.jsonl";
    std::ofstream(journal) << std::string(100000, '[') << std::string(100000, ']') << "\n";
    r = run_cli("sweep --model " + kTiny + " --backend cpu --batch 1 --quiet --out " + dir + "/s2.json --journal " +
                journal + " --resume");
    INFO(r.err.substr(0, 300));
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("nested too deeply") != std::string::npos);
}

TEST_CASE("a journal with a point twice, two sweeps' lines or no point is refused by every reader",
          "[robust][journal][cli]") {
    const std::string dir = temp_dir("journal-readers");
    const std::string a = dir + "/a.json", b = dir + "/b.json";
    REQUIRE(run_cli(sim_sweep(kTiny, "1,2", a)).exit_code == 0);
    REQUIRE(run_cli(sim_sweep(kTiny, "1,2,4", b, "--set seed=3")).exit_code == 0);
    const std::string ja = dir + "/a.jsonl", jb = dir + "/b.jsonl";
    const auto lines_a = journal_lines(ja);
    REQUIRE(lines_a.size() == 2);

    // A point twice with another result (a rerun's line appended). Before: the later line won, silently.
    const std::string dup = dir + "/dup.jsonl";
    {
        json again = lines_a[0];
        again["record"]["sweep_point_s"] = 99.0;
        std::ofstream(dup) << read_text(ja) << again.dump() << "\n";
    }
    // Two sweeps' journals joined. Before: `report` and `compare` merged them into one report.
    const std::string joined = dir + "/joined.jsonl";
    std::ofstream(joined) << read_text(ja) << read_text(jb);
    // No finished point. Before: an empty report, exit 0.
    const std::string empty = dir + "/empty.jsonl";
    std::ofstream{empty};

    for (const std::string& reader : {std::string("report "), std::string("compare " + a + " ")}) {
        INFO(reader);
        expect_exit2(run_cli(reader + dup), {dup + ":3", "again", "line 1", "keep one of lines 1 and 3"});
        expect_exit2(run_cli(reader + joined), {joined + ":3", "two sweeps", "line 1"});
        expect_exit2(run_cli(reader + empty), {empty, "no finished point"});
    }
    // The point twice, exactly: still refused (the file was appended to itself).
    const std::string twice = dir + "/twice.jsonl";
    std::ofstream(twice) << read_text(ja) << read_text(ja);
    expect_exit2(run_cli("report " + twice), {twice + ":3", "again"});

    // sweep --resume reads its journal the same way.
    fs::copy_file(dup, ja, fs::copy_options::overwrite_existing);
    expect_exit2(run_cli(sim_sweep(kTiny, "1,2", a, "--resume")), {ja + ":3", "again"});
    // An empty journal (a sweep that finished no point) has nothing to reuse: --resume starts afresh.
    fs::copy_file(empty, ja, fs::copy_options::overwrite_existing);
    auto fresh = run_cli(sim_sweep(kTiny, "1,2", a, "--resume"));
    INFO(fresh.err);
    CHECK(fresh.exit_code == 0);
    CHECK(journal_lines(ja).size() == 2);
}

TEST_CASE("a torn journal tail is cut off in place, so the file keeps its identity", "[robust][journal]") {
    const std::string dir = temp_dir("torn-in-place");
    const std::string path = dir + "/j.jsonl";
    moebench::append_journal(path, "f1", moebench::JournalEntry{"{\"batch\":1}", {{"batch", 1}}, {{"status", "ok"}}});
    {
        std::ofstream(path, std::ios::app)
            << R"({"journal":"moebench.sweep-journal/1","fingerprint":"f1","key":"{\"ba)";
    }
    struct stat before {
    }, after{};
    REQUIRE(::stat(path.c_str(), &before) == 0);
    bool repaired = false;
    CHECK(moebench::load_journal(path, "f1", &repaired).size() == 1);
    CHECK(repaired);
    REQUIRE(::stat(path.c_str(), &after) == 0);
    CHECK(after.st_ino == before.st_ino);  // the sweep's lock (a flock on this inode) still holds the journal
    CHECK(journal_lines(path).size() == 1);
    CHECK(read_text(path).back() == '\n');
}
