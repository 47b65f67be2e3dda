// SPDX-License-Identifier: Apache-2.0
// What the robustness tests (tests/cpu/test_robust_*.cpp, one file per reader or input they attack) share: the
// contract of a refused input, running the binary under a memory cap, sweep journals and quick sim sweeps, JSON
// files in and out, and mutation fuzzing of a reader.
#pragma once
#include "cli_helpers.hpp"
#include "test_paths.hpp"

#include "common/error.hpp"
#include "common/sanitizers.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace moebench::test {

// ---- the contract of a refused input ---------------------------------------------------------------------------
// Four strengths, each as the cases that use it were written; the error line is looked for anywhere in stderr
// except by expect_refused_one_line (`run` and `bench` may print the OpenBLAS re-exec note first).

/// Exit 2, "moebench: error: " and each needle in stderr.
inline void expect_exit2(const CliResult& r, const std::vector<std::string>& needles) {
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("moebench: error: "));
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
}

/// Runs `moebench <args>`; then as expect_exit2 above.
inline void expect_exit2(const std::string& args, const std::vector<std::string>& needles) {
    const auto r = run_cli(args);
    INFO("moebench " << args);
    expect_exit2(r, needles);
}

/// Exit 2 and "moebench: error: " with each needle; never an internal error.
inline void expect_refused(const std::string& args, const std::vector<std::string>& needles) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("moebench: error: "));
    CHECK_THAT(r.err, !Catch::Contains("internal error"));
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
}

/// Exit 2, one "moebench: error: " line naming each needle, never a crash or an internal error, and a bounded
/// message (never the input echoed whole).
inline void expect_refused_bounded(const std::string& args, const std::vector<std::string>& needles) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstdout: " << r.out.substr(0, 2000) << "\nstderr: " << r.err.substr(0, 2000));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("moebench: error: "));
    CHECK_THAT(r.err, !Catch::Contains("internal error") && !Catch::Contains("out of host memory"));
    CHECK(r.err.size() < 2000);  // a bounded message, never the input echoed whole
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
}

/// Exit 2 and stderr exactly one line "moebench: error: <field>: ..." naming each needle: never a crash, a stack
/// trace or an internal error.
inline void expect_refused_one_line(const std::string& args, const std::vector<std::string>& needles) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("moebench: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
    CHECK_THAT(r.err,
               !Catch::Contains("internal error") && !Catch::Contains("terminate") && !Catch::Contains("Segmentation"));
}

/// As expect_refused_one_line, but naming any one of `any_of` is enough (own schema vs Hugging Face key).
inline void expect_refused_any(const std::string& args, const std::vector<std::string>& any_of) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("moebench: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    bool named = false;
    for (const auto& n : any_of) named = named || r.err.find(n) != std::string::npos;
    CHECK(named);
}

/// Printable UTF-8 (newlines allowed): what an error message may hold, never raw bytes of the input.
inline bool is_printable_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '\n') continue;
        if (c < 0x20 || c == 0x7f) return false;
        if (c >= 0x80) {
            size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
            if (len == 0 || i + len > s.size()) return false;
            for (size_t k = 1; k < len; ++k)
                if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
            i += len - 1;
        }
    }
    return true;
}

// ---- running the binary under limits and watching it -------------------------------------------------------------

/// `<prefix> moebench <args>` through bash (args hold no single quote), stopped after 120 s.
inline CliResult run_prefixed(const std::string& prefix, const std::string& args) {
    const std::string dir = temp_dir("prefixed");
    // timeout: a hang fails the test (exit 124) instead of stalling the suite.
    const std::string cmd = prefix + " timeout 120 " + std::string(MOEBENCH_BIN) + " " + args + " >" + dir + "/out 2>" +
                            dir + "/err </dev/null";
    const int status = std::system(("bash -c '" + cmd + "'").c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_text(dir + "/out");
    r.err = read_text(dir + "/err");
    return r;
}

/// Under a virtual-memory cap (ulimit -v, KiB): an input that makes the binary allocate gigabytes fails with
/// bad_alloc ("out of host memory") there, instead of being refused by name. (Below about 1 GB an OpenBLAS worker
/// cannot map its buffer and retries forever; moebench ends without joining it: see test_robust_run_flags.cpp.)
/// Under ASan, whose shadow needs terabytes of address space, the cap is ASan's own: no single allocation and no
/// resident set beyond it.
inline CliResult run_capped(const std::string& args, int64_t cap_kib) {
    if (kAddressSanitizer) {
        const std::string mb = std::to_string(cap_kib / 1024);
        const char* asan = std::getenv("ASAN_OPTIONS");
        return run_prefixed("ASAN_OPTIONS=" + std::string(asan ? asan : "") + ":max_allocation_size_mb=" + mb +
                                ":hard_rss_limit_mb=" + mb + " exec",
                            args);
    }
    return run_prefixed("ulimit -v " + std::to_string(cap_kib) + "; exec", args);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Waits for the process to end; SIGKILLs it (and returns false) after `limit`.
inline bool wait_exit(pid_t pid, int* status, std::chrono::seconds limit) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < limit) {
        if (::waitpid(pid, status, WNOHANG) == pid) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, status, 0);
    return false;
}

// ---- sweeps and their journals ---------------------------------------------------------------------------------

/// The journal's records; a torn last line (allowed right after a kill) is left out.
inline std::vector<nlohmann::json> journal_lines(const std::string& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        try {
            out.push_back(nlohmann::json::parse(line));
        } catch (const nlohmann::json::parse_error&) {
            // a torn last line is allowed right after a kill
        }
    }
    return out;
}

/// One journal line of fingerprint "f" with the key `key_json` (JSON text: a string, or anything wrong).
inline std::string journal_line(const std::string& key_json) {
    return R"({"journal":"moebench.sweep-journal/1","fingerprint":"f","key":)" + key_json +
           R"(,"point":{"batch":1},"record":{"status":"ok"}})";
}

/// A quick sweep of the sim backend (modeled: milliseconds a point) over `batches` into `out` (journal: .jsonl).
inline std::string sim_sweep(const std::string& model, const std::string& batches, const std::string& out,
                             const std::string& extra = "") {
    return "sweep --backend sim --model " + model + " --quiet --warmup 0 --iters 2 --context 64 --batch " + batches +
           " --out " + out + " " + extra;
}

// ---- files in and out ------------------------------------------------------------------------------------------

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

/// Writes `j` (indented) to `path` and returns the path.
inline std::string write_json(const std::string& path, const nlohmann::json& j) {
    std::ofstream(path) << j.dump(2);
    return path;
}

/// Writes `j` (indented) to a file `name` in a fresh temporary folder and returns its path.
inline std::string write_temp_json(const std::string& name, const nlohmann::json& j) {
    return write_temp(name, j.dump(2));
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// ---- mutation fuzzing of a reader ------------------------------------------------------------------------------

/// One random edit: flip a byte, delete a span, duplicate a span, truncate, or splice a token that tends to
/// break a type ("-1", "1e300", "null", "[]", "\"x\"", a huge integer, invalid UTF-8).
inline std::string mutate(std::string s, std::mt19937_64& rng) {
    static const char* tokens[] = {
        "-1",  "0",     "1e300", "null",     "[]",          "{}",     "\"x\"", "99999999999999999999",
        "4.5", "1e400", "true",  "\xff\xfe", "\"\\u0000\"", "1e-300", "-0"};
    if (s.empty()) return "{";
    auto pos = [&](size_t n) { return static_cast<size_t>(rng() % (n + 1)); };
    switch (rng() % 6) {
        case 0: s[pos(s.size() - 1)] = static_cast<char>(rng() & 0xff); break;
        case 1: {
            size_t a = pos(s.size());
            s.erase(a, rng() % 16);
            break;
        }
        case 2: {
            size_t a = pos(s.size());
            s.insert(a, s.substr(a, rng() % 24));
            break;
        }
        case 3: s.resize(pos(s.size())); break;
        default: {
            // Replace a number-ish run (digits) with a token: hits value checks rather than the JSON lexer.
            size_t a = pos(s.size() - 1);
            size_t d = s.find_first_of("0123456789", a);
            if (d == std::string::npos) d = a;
            size_t e = s.find_first_not_of("0123456789.", d);
            if (e == std::string::npos) e = s.size();
            s.replace(d, std::max<size_t>(e - d, 1), tokens[rng() % (sizeof tokens / sizeof *tokens)]);
        }
    }
    return s;
}

/// Runs `load` on `rounds` mutations of `seed_text`; counts loads and ConfigErrors; any other exception fails.
inline void fuzz_file(const std::string& seed_text, const std::string& path, int rounds, uint64_t seed,
                      const std::function<void(const std::string&)>& load) {
    std::mt19937_64 rng(seed);
    int ok = 0, refused = 0;
    for (int i = 0; i < rounds; ++i) {
        std::string text = seed_text;
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; ++e) text = mutate(text, rng);
        write_bytes(path, text);
        try {
            load(path);
            ++ok;
        } catch (const ConfigError& e) {
            ++refused;
            // One line, and printable: a message that echoes raw garbage bytes is not a clear message.
            std::string msg = e.what();
            INFO("round " << i << ": " << msg);
            CHECK(msg.find('\n') == std::string::npos);
        } catch (const std::exception& e) {
            FAIL("round " << i << ": not a ConfigError: " << e.what() << "\ninput: " << text.substr(0, 400));
        }
    }
    INFO("ok " << ok << " refused " << refused);
    CHECK(ok + refused == rounds);
    CHECK(refused > 0);  // the mutations do break things, so the test is not vacuous
}

}  // namespace moebench::test
