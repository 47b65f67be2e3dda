// SPDX-License-Identifier: Apache-2.0
// The files moebench reads and writes, as a user meets them (issue "Trust II"): a journal that cannot be joined by a
// second sweep through a link, mixed with an edited model, or read with a point twice, two sweeps in it or no point;
// a write to stdout that fails is exit 1, not 0; an output that is one of the inputs is refused before it is
// destroyed; a report handed to `run --config` cannot steer where the run writes. Each case failed before its fix.
#include "test_paths.hpp"
#include "cli_helpers.hpp"
#include "error_helpers.hpp"

#include "common/file_identity.hpp"
#include "sweep/journal.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::temp_dir;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";

void expect_exit2(const moebench::test::CliResult& r, const std::vector<std::string>& needles) {
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("moebench: error: "));
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
}

std::vector<json> journal_lines(const std::string& path) {
    std::vector<json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        try {
            out.push_back(json::parse(line));
        } catch (const json::parse_error&) {
            // a torn last line right after a kill
        }
    }
    return out;
}

// A quick sweep of the sim backend (modeled: milliseconds a point) over `batches` into `out` (journal: .jsonl).
std::string sim_sweep(const std::string& model, const std::string& batches, const std::string& out,
                      const std::string& extra = "") {
    return "sweep --backend sim --model " + model + " --quiet --warmup 0 --iters 2 --context 64 --batch " + batches +
           " --out " + out + " " + extra;
}

}  // namespace

// ---- 3. the journal ------------------------------------------------------------------------------------------------

TEST_CASE("file safety: a second sweep reaching a running sweep's journal through a link refuses",
          "[file_safety][journal][cli]") {
    const std::string dir = temp_dir("lock-link");
    const std::string journal = dir + "/sweep.jsonl";
    // 12 points of >= 0.8 s: the first sweep is still running when the second reaches the journal.
    const std::vector<std::string> common = {MOEBENCH_BIN, "sweep", "--model", kTiny, "--backend", "cpu", "--batch",
                                             "1..8", "--context", "0,16,32", "--set", "warmup=1", "--set", "iters=3",
                                             "--set", "min_time_s=0.8", "--set", "max_iters=1000000", "--quiet"};
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--out", dir + "/first.json", "--journal", journal});
    const pid_t first = ::fork();
    REQUIRE(first >= 0);
    if (first == 0) {
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        (void)!::freopen("/dev/null", "w", stderr);
        (void)!::freopen("/dev/null", "w", stdout);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (journal_lines(journal).empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
        REQUIRE(::waitpid(first, &status, WNOHANG) == 0);  // still running
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE_FALSE(journal_lines(journal).empty());

    // A symbolic link and a hard link: other paths, the same file. Before: the lock was on "<path>.lock", so both
    // sweeps appended to one journal (21 lines for 12 keys).
    fs::create_symlink(journal, dir + "/link.jsonl");
    fs::create_hard_link(journal, dir + "/hard.jsonl");
    for (const std::string name : {"link.jsonl", "hard.jsonl"}) {
        std::string cmd;
        for (size_t i = 1; i < common.size(); ++i) cmd += "'" + common[i] + "' ";
        auto r = run_cli(cmd + "--journal " + dir + "/" + name + " --out " + dir + "/" + name + ".json --resume");
        INFO(name);
        REQUIRE(::waitpid(first, &status, WNOHANG) == 0);  // the first one must still be running
        expect_exit2(r, {"--journal: another sweep is running on this journal", "(process " + std::to_string(first) + ")",
                         name});
    }
    ::kill(first, SIGTERM);
    ::waitpid(first, &status, 0);
    std::set<std::string> keys;
    const auto lines = journal_lines(journal);
    for (const auto& j : lines) keys.insert(j.at("key").get<std::string>());
    CHECK(keys.size() == lines.size());  // every point once
    CHECK_FALSE(fs::exists(journal + ".lock"));
}

TEST_CASE("file safety: --resume after the model file was edited refuses, naming the model file",
          "[file_safety][journal][cli]") {
    const std::string dir = temp_dir("edited-model");
    const std::string model = dir + "/model.json";
    fs::copy_file(kTiny, model);
    // The model as an axis (--model) and as a fixed field of the config: both are checked by content.
    const std::string config = dir + "/sweep.json";
    std::ofstream(config) << json{{"model", model}, {"backend", "sim"}, {"context", 64}}.dump();
    const std::vector<std::string> sweeps = {
        sim_sweep(model, "1,2", dir + "/axis.json"),
        "sweep --config " + config + " --quiet --warmup 0 --iters 2 --batch 1,2 --out " + dir + "/fixed.json"};
    for (const auto& s : sweeps) REQUIRE(run_cli(s).exit_code == 0);

    // The same bytes at another path are the same model: a fixed model is matched by content, not by its path.
    const std::string moved = dir + "/moved.json";
    fs::copy_file(model, moved);
    std::ofstream(dir + "/sweep-moved.json") << json{{"model", moved}, {"backend", "sim"}, {"context", 64}}.dump();
    auto same = run_cli("sweep --config " + dir + "/sweep-moved.json --quiet --warmup 0 --iters 2 --batch 1,2,4 --out " +
                        dir + "/fixed.json --resume");
    INFO(same.err);
    REQUIRE(same.exit_code == 0);
    CHECK(json::parse(read_text(dir + "/fixed.json"))["sweep"]["resumed"] == 2);

    // Edit the model (another hidden size): before, --resume mixed both models in one report, exit 0.
    json m = json::parse(read_text(model));
    m["hidden_size"] = m["hidden_size"].get<int>() * 2;
    std::ofstream(model, std::ios::trunc) << m.dump(2);
    for (const auto& s : sweeps) {
        const std::string journal = dir + (s == sweeps[0] ? "/axis.jsonl" : "/fixed.jsonl");
        const size_t before = journal_lines(journal).size();
        expect_exit2(run_cli(s + " --resume"), {journal + ":1", "another model file", "changed"});
        CHECK(journal_lines(journal).size() == before);  // nothing ran
    }
}

TEST_CASE("file safety: a journal with a point twice, two sweeps' lines or no point is refused by every reader",
          "[file_safety][journal][cli]") {
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

TEST_CASE("file safety: a torn journal tail is cut off in place, so the file keeps its identity",
          "[file_safety][journal]") {
    const std::string dir = temp_dir("torn-in-place");
    const std::string path = dir + "/j.jsonl";
    moebench::append_journal(path, "f1", moebench::JournalEntry{"{\"batch\":1}", {{"batch", 1}}, {{"status", "ok"}}});
    { std::ofstream(path, std::ios::app) << R"({"journal":"moebench.sweep-journal/1","fingerprint":"f1","key":"{\"ba)"; }
    struct stat before {}, after {};
    REQUIRE(::stat(path.c_str(), &before) == 0);
    bool repaired = false;
    CHECK(moebench::load_journal(path, "f1", &repaired).size() == 1);
    CHECK(repaired);
    REQUIRE(::stat(path.c_str(), &after) == 0);
    CHECK(after.st_ino == before.st_ino);  // the sweep's lock (a flock on this inode) still holds the journal
    CHECK(journal_lines(path).size() == 1);
    CHECK(read_text(path).back() == '\n');
}

// ---- 4. failed writes to stdout ------------------------------------------------------------------------------------

TEST_CASE("file safety: a command whose stdout is a full device exits 1 with the reason", "[file_safety][stdout][cli]") {
    if (!fs::exists("/dev/full")) {
        WARN("skipped: no /dev/full here");
        return;
    }
    const std::string dir = temp_dir("dev-full");
    const std::string report = dir + "/r.json", trace = dir + "/t.safetensors";
    REQUIRE(run_cli(sim_sweep(kTiny, "1,2", report)).exit_code == 0);
    REQUIRE(run_cli("trace gen --model " + kTiny + " --routing zipf:1.2 --tokens 64 -o " + trace).exit_code == 0);
    // Before: every one of these exited 0 with its output lost.
    for (const std::string& args : std::vector<std::string>{"report " + report + " --format md", "report " + report + " -o -", "report " + report + " --format csv",
          "run --model " + kTiny + " --backend sim --warmup 0 --iters 2 --out " + dir + "/run.json --format csv",
          std::string("plan"), "trace info " + trace, "compare " + report + " " + report + " --format json",
          // the sweep's summary table (not --quiet)
          "sweep --backend sim --model " + kTiny + " --warmup 0 --iters 2 --context 64 --batch 1,2 --out " + dir + "/s.json",
          "devices"}) {
        INFO(args);
        const std::string cmd = std::string(MOEBENCH_BIN) + " " + args + " >/dev/full 2>" + dir + "/err";
        const int status = std::system(cmd.c_str());
        const std::string err = read_text(dir + "/err");
        INFO(err);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 1);
        CHECK_THAT(err, Catch::Contains("moebench: error: writing to stdout failed: No space left on device"));
    }
    // A command with nothing for stdout is not failed by it.
    const std::string quiet = std::string(MOEBENCH_BIN) + " report " + report + " -o " + dir + "/v.md >/dev/full 2>/dev/null";
    CHECK(WEXITSTATUS(std::system(quiet.c_str())) == 0);
}

// ---- 5. an output that is one of the inputs ------------------------------------------------------------------------

TEST_CASE("file safety: an output naming one of the inputs is refused before it is destroyed",
          "[file_safety][same_file][cli]") {
    const std::string dir = temp_dir("same-file");
    const std::string model = dir + "/m.json";
    fs::copy_file(kTiny, model);
    const std::string report = dir + "/r.json", b = dir + "/b.json";
    REQUIRE(run_cli("run --model " + model + " --backend sim --warmup 0 --iters 2 --out " + report).exit_code == 0);
    REQUIRE(run_cli("run --model " + model + " --backend sim --warmup 0 --iters 2 --out " + b).exit_code == 0);
    const std::string recording = dir + "/g.jsonl";
    {
        std::ifstream in(kData + "/traces/mixtral-8x7b-gsm8k.jsonl");
        std::ofstream out(recording);
        std::string line;
        for (int i = 0; i < 40 && std::getline(in, line); ++i) out << line << "\n";
    }
    const std::string trace = dir + "/t.safetensors";
    REQUIRE(run_cli("trace gen --model " + kTiny + " --routing zipf:1.2 --tokens 64 -o " + trace).exit_code == 0);
    const std::string sweep_config = dir + "/s.json";
    std::ofstream(sweep_config) << json{{"model", model}, {"backend", "sim"}, {"warmup", 0}, {"iters", 2}}.dump();
    fs::create_symlink(report, dir + "/link.json");

    struct Case {
        std::string args, input;
        std::vector<std::string> flags;
    };
    // Before: each destroyed its input and exited 0.
    const std::vector<Case> cases = {
        {"trace convert " + recording + " -o " + recording, recording, {"-o", "IN"}},
        {"place --trace " + trace + " --ep 2 -o " + trace, trace, {"-o", "--trace"}},
        {"sweep --config " + sweep_config + " --batch 1 --quiet --out " + sweep_config, sweep_config, {"--out", "--config"}},
        {"run --model " + model + " --backend sim --out " + model, model, {"--out", "--model"}},
        {"run --config " + report + " --out " + report, report, {"--out", "--config"}},
        {"run --config " + report + " --json " + report, report, {"--json", "--config"}},
        {"compare " + report + " " + b + " -o " + report, report, {"-o", "A"}},
        {"compare " + report + " " + b + " -o " + b, b, {"-o", "B"}},
        {"report " + report + " -o " + report, report, {"-o", "REPORT"}},
        {"report " + report + " --format md -o " + dir + "/link.json", report, {"-o", "REPORT"}},  // a link to it
        {"plan --model " + model + " --out " + model, model, {"--out", "--model"}},
        {"sweep --model " + model + " --backend sim --batch 1 --quiet --out " + dir + "/x.json --journal " + model, model,
         {"--journal", "--model"}},
    };
    for (const Case& c : cases) {
        const std::string before = read_text(c.input);
        const auto r = run_cli(c.args);
        INFO(c.args);
        std::vector<std::string> needles = {c.flags[0] + ": is the same file as the input " + c.flags[1],
                                            "give " + c.flags[0] + " another path"};
        expect_exit2(r, needles);
        CHECK(read_text(c.input) == before);
    }
    // The report and the journal of a sweep are two files.
    expect_exit2(run_cli("sweep --model " + model + " --backend sim --batch 1 --quiet --out " + dir + "/y.json --journal " +
                         dir + "/y.json"),
                 {"--journal: is the same file as the report (--out)"});
    CHECK_FALSE(fs::exists(dir + "/y.json"));
}

TEST_CASE("file safety: same_file follows links and tells files apart", "[file_safety][same_file]") {
    const std::string dir = temp_dir("same-file-unit");
    std::ofstream(dir + "/a") << "a";
    std::ofstream(dir + "/b") << "a";
    fs::create_symlink(dir + "/a", dir + "/link");
    fs::create_hard_link(dir + "/a", dir + "/hard");
    CHECK(moebench::same_file(dir + "/a", dir + "/link"));
    CHECK(moebench::same_file(dir + "/hard", dir + "/./a"));
    CHECK_FALSE(moebench::same_file(dir + "/a", dir + "/b"));  // equal bytes, two files
    CHECK_FALSE(moebench::same_file(dir + "/a", dir + "/missing"));
    CHECK_FALSE(moebench::same_file("-", "-"));
    CHECK_FALSE(moebench::same_file("/dev/null", "/dev/null"));  // not a file an output could destroy
}

// ---- 7. a report does not steer writes ---------------------------------------------------------------------------

TEST_CASE("file safety: run --config REPORT takes neither the report's out nor its dump_tensors",
          "[file_safety][run_report][cli]") {
    const std::string dir = temp_dir("report-steers");
    const std::string report = dir + "/r.json";
    REQUIRE(run_cli("run --model " + kTiny + " --backend cpu --warmup 0 --iters 1 --out " + report).exit_code == 0);
    // A report from someone else, naming where to write.
    json doc = json::parse(read_text(report));
    doc["config"]["run"]["dump_tensors"] = dir + "/planted/deep";
    doc["config"]["run"]["out"] = dir + "/planted.json";
    const std::string handed = dir + "/handed.json";
    std::ofstream(handed) << doc.dump(2);
    auto r = run_cli("run --config " + handed + " --json -");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(fs::exists(dir + "/planted"));  // before: created, with moe_layer.safetensors in it
    CHECK_FALSE(fs::exists(dir + "/planted.json"));
    CHECK_THAT(r.err, Catch::Contains("its output paths (out, dump_tensors) are not taken"));
    const json rerun = json::parse(r.out);
    CHECK(rerun["config"]["run"]["dump_tensors"] == "");
    // The caller may still ask for a dump.
    auto asked = run_cli("run --config " + handed + " --json - --dump-tensors " + dir + "/mine");
    INFO(asked.err);
    CHECK(asked.exit_code == 0);
    CHECK(fs::exists(dir + "/mine/moe_layer.safetensors"));
}
