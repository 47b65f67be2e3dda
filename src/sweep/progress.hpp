// SPDX-License-Identifier: Apache-2.0
// Sweep progress on stderr: a redrawn bar with ETA on a terminal, one line per point otherwise, nothing when quiet.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace moebench {

enum class ProgressMode { bar, lines, quiet };

/// bar when stderr is a terminal, else lines; quiet wins.
ProgressMode progress_mode_for_stderr(bool quiet);

/// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

class Progress {
public:
    /// `total`: points to run in this invocation (resumed points excluded); `done_before`: resumed points.
    Progress(ProgressMode mode, size_t total, size_t done_before, std::FILE* out = stderr);
    /// A point starts (bar mode redraws with its label).
    void start(size_t index, const std::string& label);
    /// A point ends: `outcome` is a short text ("ok 1234 tok/s p95 5.1 ms", "skipped: ...").
    void finish(size_t index, const std::string& label, const std::string& outcome, double point_s);
    /// A free-form message (bar mode clears the bar first).
    void note(const std::string& text);
    /// Ends the bar line.
    void close();
    /// Mean seconds per finished point in this invocation (0 before the first).
    double mean_point_s() const { return finished_ ? sum_point_s_ / static_cast<double>(finished_) : 0.0; }

private:
    void draw(const std::string& label);
    ProgressMode mode_;
    size_t total_, done_before_, finished_ = 0;
    double sum_point_s_ = 0;
    std::FILE* out_;
    std::chrono::steady_clock::time_point t0_;
    bool bar_drawn_ = false;
};

}  // namespace moebench
