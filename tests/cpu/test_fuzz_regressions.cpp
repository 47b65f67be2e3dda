// SPDX-License-Identifier: Apache-2.0
// Fuzz findings stay fixed: every reproducer in tests/data/fuzz-regressions/<reader>/ replays through the reader the
// fuzz target used (fuzz/readers.hpp) and must end in an exit-2 error (ConfigError / UnsupportedError). Each replay
// runs in a child process with a memory and time limit, so a crash, a hang or an allocation bomb fails this test
// instead of taking the test binary (or the machine) down. Plus checks that the readers reach the library at all.
#include <catch2/catch.hpp>
#include "test_paths.hpp"

#include "cli_helpers.hpp"
#include "fuzz/readers.hpp"
#include "report_edit.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <typeinfo>

namespace fs = std::filesystem;
using namespace moebench;

namespace {

const fs::path kRegressions = fs::path(MOEBENCH_TEST_DATA) / "fuzz-regressions";
constexpr unsigned kReplayTimeoutS = 20;  // a reader takes milliseconds; a hang costs the suite this much
constexpr long long kReplayExtraAddressSpaceBytes = 4LL << 30;

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string demangled(const char* name) {
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string out = status == 0 && d ? d : name;
    std::free(d);
    return out;
}

struct Outcome {
    enum Kind { returned, expected_error, other_exception, died } kind = died;
    std::string detail;
};

// What the replay ended in, one word first: "expected: ...", "exception <type>: ...", "returned".
Outcome::Kind run_and_describe(const fuzz::Reader& reader, const std::string& bytes, std::string& detail) {
    try {
        fuzz::replay(reader, bytes);
        detail = "returned normally (a reproducer should be refused with a ConfigError)";
        return Outcome::returned;
    } catch (const std::exception& e) {
        if (fuzz::is_expected_error(e)) {
            detail = std::string("expected error: ") + e.what();
            return Outcome::expected_error;
        }
        detail = "unexpected exception " + demangled(typeid(e).name()) + ": " + e.what();
        return Outcome::other_exception;
    } catch (...) {
        detail = "unexpected non-standard exception";
        return Outcome::other_exception;
    }
}

// The replay in a child: address space capped at what it holds now + 4 GiB (with ASan the shadow is already mapped,
// so the cap still leaves it room) and killed after a minute.
Outcome replay_in_child(const fuzz::Reader& reader, const std::string& bytes) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        long long vm_pages = 0;
        std::ifstream("/proc/self/statm") >> vm_pages;
        const rlim_t cap = static_cast<rlim_t>(vm_pages * ::sysconf(_SC_PAGESIZE) + kReplayExtraAddressSpaceBytes);
        const rlimit lim{cap, cap};
        ::setrlimit(RLIMIT_AS, &lim);
        ::alarm(kReplayTimeoutS);
        std::string detail;
        const Outcome::Kind kind = run_and_describe(reader, bytes, detail);
        (void)!::write(fds[1], detail.data(), detail.size());
        ::_exit(static_cast<int>(kind));
    }
    ::close(fds[1]);
    std::string detail;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) detail.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    Outcome o;
    if (WIFEXITED(status) && WEXITSTATUS(status) <= Outcome::other_exception) {
        o.kind = static_cast<Outcome::Kind>(WEXITSTATUS(status));
        o.detail = detail;
    } else if (WIFSIGNALED(status)) {
        o.detail = WTERMSIG(status) == SIGALRM ? "hung: killed after " + std::to_string(kReplayTimeoutS) + " s"
                                               : std::string("died of signal ") + strsignal(WTERMSIG(status));
    } else {
        o.detail = "exited with status " + std::to_string(status);
    }
    return o;
}

std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

Outcome replay_here(const std::string& reader, const std::string& bytes) {
    const fuzz::Reader* r = fuzz::find_reader(reader);
    REQUIRE(r != nullptr);
    Outcome o;
    o.kind = run_and_describe(*r, bytes, o.detail);
    return o;
}

// Scratch folders of this process and its replay children under one test folder, removed at exit (a child's
// _exit skips the clean-up of its own).
void use_test_scratch() { ::setenv("MOEBENCH_FUZZ_TMPDIR", test::temp_dir("fuzz-scratch").c_str(), 0); }

}  // namespace

#define CHECK_REPLAY(reader, bytes, expected_kind)     \
    do {                                               \
        const Outcome o_ = replay_here(reader, bytes); \
        INFO((reader) << ": " << o_.detail);           \
        CHECK(o_.kind == (expected_kind));             \
    } while (false)

TEST_CASE("fuzz regressions: every folder names a reader and holds reproducers", "[fuzz]") {
    if (!fs::exists(kRegressions)) return;
    for (const auto& e : fs::directory_iterator(kRegressions)) {
        if (!e.is_directory()) continue;
        INFO("folder " << e.path().filename().string() << " (readers are listed in fuzz/readers.hpp)");
        CHECK(fuzz::find_reader(e.path().filename().string()) != nullptr);
    }
}

TEST_CASE("fuzz regressions: each reproducer ends in an exit-2 error", "[fuzz][hardening]") {
    use_test_scratch();
    if (!fs::exists(kRegressions)) return;
    for (const auto& dir : fs::directory_iterator(kRegressions)) {
        const fuzz::Reader* reader = dir.is_directory() ? fuzz::find_reader(dir.path().filename().string()) : nullptr;
        if (!reader) continue;
        for (const auto& file : files_in(dir.path())) {
            const Outcome o = replay_in_child(*reader, slurp(file));
            INFO(fs::relative(file, kRegressions).string() << ": " << o.detail);
            CHECK(o.kind == Outcome::expected_error);
        }
    }
}

TEST_CASE("fuzz readers: shipped inputs are read without error", "[fuzz]") {
    use_test_scratch();
    const fs::path root = fs::path(MOEBENCH_TEST_DATA).parent_path().parent_path();
    CHECK_REPLAY("model_json", slurp(root / "configs/models/mixtral-8x7b.json"), Outcome::returned);
    CHECK_REPLAY("hf_config", slurp(root / "tests/data/hf-configs/qwen3-30b-a3b.json"), Outcome::returned);
    CHECK_REPLAY("hardware", slurp(root / "configs/hardware/h200-sxm.json"), Outcome::returned);
    CHECK_REPLAY("run_config", slurp(root / "configs/runs/default.json"), Outcome::returned);
    CHECK_REPLAY("sweep_config", slurp(root / "configs/sweeps/tiny-smoke.json"), Outcome::returned);
    CHECK_REPLAY("routing_spec", "hot:4:0.5", Outcome::returned);
    CHECK_REPLAY("trace_text", "0:0.75 1:0.25 | 2:0.5 3:0.5\n1:0.6 2:0.4 | 3:0.6 0:0.4\n", Outcome::returned);
    std::ifstream jsonl(root / "tests/data/traces/mixtral-8x7b-gsm8k.jsonl");
    std::string line, records;
    for (int i = 0; i < 200 && std::getline(jsonl, line); ++i) records += line + "\n";
    CHECK_REPLAY("trace_jsonl", records, Outcome::returned);
    CHECK_REPLAY("npy", slurp(root / "tests/data/engine-dumps/vllm_r3_routing_u8.npy"), Outcome::returned);
}

TEST_CASE("fuzz readers: traces, tensors, reports and journals moebench wrote are read without error", "[fuzz]") {
    use_test_scratch();
    const std::string dir = test::temp_dir("fuzz-readers");
    // A trace on the model the routing_spec and trace readers use (olmoe-1b-7b: 64 experts, top-8).
    const ModelConfig olmoe = load_model("olmoe-1b-7b");
    auto workload = make_workload("zipf:1.2", olmoe, 3, "--routing");
    write_trace(dir + "/t.safetensors", generate_trace(*workload, olmoe, {0, 1, 2}, 50));
    const std::string trace = slurp(dir + "/t.safetensors");
    CHECK_REPLAY("trace_safetensors", trace, Outcome::returned);
    CHECK_REPLAY("safetensors", trace, Outcome::returned);

    // A fresh run report of the tiny model, and a journal of it.
    const auto run = test::run_cli("run --model " + std::string(MOEBENCH_TEST_DATA) +
                                   "/models/tiny-gqa.json --backend cpu --warmup 1 --iters 3 --out " + dir + "/r.json");
    REQUIRE(run.exit_code == 0);
    const std::string report = slurp(dir + "/r.json");
    CHECK_REPLAY("report", report, Outcome::returned);
    // Against itself, with quiet steps: "same", no regression (a noisy cpu run would be "inconclusive": exit 1).
    json quiet = json::parse(report);
    test::set_step_samples(quiet["runs"][0], {100.0, 101.0, 102.0});
    CHECK_REPLAY("compare", quiet.dump(), Outcome::returned);
    const json record = json::parse(report)["runs"][0];
    const json point = {{"batch", record["batch"]}};
    append_journal(dir + "/j.jsonl", fuzz::journal_fingerprint(), JournalEntry{point_key(point), point, record});
    CHECK_REPLAY("journal", slurp(dir + "/j.jsonl"), Outcome::returned);
}

TEST_CASE("fuzz readers: broken inputs end in a ConfigError", "[fuzz]") {
    use_test_scratch();
    for (const auto& r : fuzz::readers()) {
        INFO(r.name);
        CHECK_REPLAY(r.name, "{\"\xff\n", Outcome::expected_error);
    }
    // A journal line of another sweep (other fingerprint), and two reports that share no point.
    const json line = {{"journal", kJournalSchema},
                       {"fingerprint", "0123456789abcdef"},
                       {"key", "{}"},
                       {"point", json::object()},
                       {"record", {{"status", "ok"}}}};
    CHECK_REPLAY("journal", line.dump() + "\n", Outcome::expected_error);
    CHECK_REPLAY("compare", "{\"schema\": \"moebench.report/1\", \"runs\": []}\n---\n{}", Outcome::expected_error);
}
