// SPDX-License-Identifier: Apache-2.0
// Runs the built moebench binary from a test and captures exit code, stdout and stderr.
#pragma once
#include <sys/wait.h>
#include "test_paths.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace moebench::test {

struct CliResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

inline std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Every temporary folder the test process made; removed when the process exits.
struct TempDirs {
    std::vector<std::string> dirs;
    ~TempDirs() {
        std::error_code ec;
        for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
};
inline TempDirs& temp_dirs() {
    static TempDirs all;
    return all;
}

/// A fresh temporary folder for one test (removed at process exit).
inline std::string temp_dir(const std::string& tag) {
    auto dir = std::filesystem::temp_directory_path() /
               ("moebench-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
    std::filesystem::create_directories(dir);
    temp_dirs().dirs.push_back(dir.string());
    return dir.string();
}

/// Runs `moebench <args>` (args are passed through the shell as written), with `env` ("VAR=value ...") set.
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
    std::string dir = temp_dir("cli");
    std::string out = dir + "/out", err = dir + "/err";
    std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(MOEBENCH_BIN) + " " + args + " >" + out +
                      " 2>" + err + " </dev/null";
    int status = std::system(cmd.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_text(out);
    r.err = read_text(err);
    std::filesystem::remove_all(dir);
    return r;
}

/// Writes `text` to a file in a temporary folder and returns its path.
inline std::string write_temp(const std::string& name, const std::string& text) {
    std::string path = temp_dir("file") + "/" + name;
    std::ofstream(path) << text;
    return path;
}

}  // namespace moebench::test
