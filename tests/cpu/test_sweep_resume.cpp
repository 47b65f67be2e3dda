// SPDX-License-Identifier: Apache-2.0
// End to end: `moebench sweep` on a tiny model is SIGKILLed mid-sweep once its journal holds a point, then resumed;
// no finished point may be lost or run twice, and the final report must hold every point once.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include "test_paths.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli_helpers.hpp"

namespace {

using nlohmann::json;

std::vector<json> journal_lines(const std::string& path) {
    std::vector<json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        try {
            out.push_back(json::parse(line));
        } catch (const json::parse_error&) {
            // a torn last line is allowed right after a kill
        }
    }
    return out;
}

}  // namespace

TEST_CASE("sweep killed with SIGKILL mid-sweep resumes without losing or repeating points", "[sweep_resume][cli]") {
    const std::string dir = moebench::test::temp_dir("resume");
    const std::string model = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";
    const std::string out = dir + "/sweep.json", journal = dir + "/sweep.jsonl";
    // 12 points; min_time keeps each point >= 40 ms so the kill lands mid-sweep.
    const std::vector<std::string> args = {
        MOEBENCH_BIN, "sweep",           "--model", model,   "--backend", "cpu",   "--batch",
        "1..8",       "--context",       "0,16,32", "--set", "warmup=1",  "--set", "iters=3",
        "--set",      "min_time_s=0.04", "--out",   out,     "--journal", journal, "--quiet"};
    const size_t kPoints = 12;

    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::freopen("/dev/null", "w", stderr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    // Wait for the first finished point, then kill at once.
    auto t0 = std::chrono::steady_clock::now();
    size_t seen = 0;
    int status = 0;
    bool exited = false;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
        seen = journal_lines(journal).size();
        if (seen >= 1) break;
        if (::waitpid(pid, &status, WNOHANG) == pid) {
            exited = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    REQUIRE_FALSE(exited);  // the sweep must not have ended (or failed) before its first point
    REQUIRE(seen >= 1);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK_FALSE(std::filesystem::exists(out));  // killed before the final report

    std::vector<json> before = journal_lines(journal);
    REQUIRE(before.size() >= 1);
    REQUIRE(before.size() < kPoints);  // the kill really was mid-sweep
    std::set<std::string> keys_before;
    for (const auto& j : before) keys_before.insert(j.at("key").get<std::string>());
    CHECK(keys_before.size() == before.size());

    // The journal of the killed sweep can already be rendered: one point per finished line.
    auto partial = moebench::test::run_cli("report " + journal + " --format json");
    REQUIRE(partial.exit_code == 0);
    CHECK(json::parse(partial.out)["runs"].size() == before.size());

    // Resume: the finished points are reused, the rest run, the report holds every point exactly once.
    std::string cmd;
    for (size_t i = 1; i < args.size(); ++i) cmd += "'" + args[i] + "' ";
    auto r = moebench::test::run_cli(cmd + "--resume");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<json> after = journal_lines(journal);
    std::set<std::string> keys_after;
    for (const auto& j : after) keys_after.insert(j.at("key").get<std::string>());
    CHECK(after.size() == kPoints);  // nothing repeated
    CHECK(keys_after.size() == kPoints);
    for (const auto& k : keys_before) CHECK(keys_after.count(k) == 1);
    // The journal lines written before the kill are untouched.
    for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == before[i]);

    json report = json::parse(moebench::test::read_text(out));
    REQUIRE(report["runs"].size() == kPoints);
    CHECK(report["sweep"]["resumed"] == before.size());
    CHECK(report["sweep"]["ok"] == kPoints);
    std::set<std::string> report_keys;
    for (const auto& run : report["runs"]) {
        CHECK(run["status"] == "ok");
        report_keys.insert(run["sweep_point"].dump());
    }
    CHECK(report_keys.size() == kPoints);
    std::filesystem::remove_all(dir);
}
