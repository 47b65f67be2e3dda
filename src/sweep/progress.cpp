// SPDX-License-Identifier: Apache-2.0
// Sweep progress output; the ETA is the mean time of the points finished so far times the points left.
#include "sweep/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace moebench {

ProgressMode progress_mode_for_stderr(bool quiet) {
    if (quiet) return ProgressMode::quiet;
    return ::isatty(2) ? ProgressMode::bar : ProgressMode::lines;
}

std::string format_duration(double seconds) {
    if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
    auto s = static_cast<int64_t>(std::llround(seconds));
    if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
    if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
    return fmt::format("{}s", s);
}

Progress::Progress(ProgressMode mode, size_t total, size_t done_before, std::FILE* out)
    : mode_(mode), total_(total), done_before_(done_before), out_(out), t0_(std::chrono::steady_clock::now()) {}

void Progress::draw(const std::string& label) {
    const int kWidth = 30;
    size_t all = total_ + done_before_, done = finished_ + done_before_;
    int filled = all ? static_cast<int>(kWidth * done / all) : kWidth;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::string eta = finished_ ? format_duration(mean_point_s() * static_cast<double>(total_ - finished_)) : "?";
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::string line =
        fmt::format("[{}] {}/{} {} | {} elapsed, ETA {}", bar, done, all, label, format_duration(elapsed), eta);
    if (line.size() > 150) line = line.substr(0, 147) + "...";
    fmt::print(out_, "\r\033[2K{}", line);
    std::fflush(out_);
    bar_drawn_ = true;
}

void Progress::start(size_t index, const std::string& label) {
    if (mode_ == ProgressMode::bar) draw(label);
}

void Progress::finish(size_t index, const std::string& label, const std::string& outcome, double point_s) {
    ++finished_;
    sum_point_s_ += point_s;
    if (mode_ == ProgressMode::lines) {
        size_t all = total_ + done_before_;
        std::string eta = format_duration(mean_point_s() * static_cast<double>(total_ - finished_));
        fmt::print(out_, "[{}/{}] {}: {} ({:.1f} s, ETA {})\n", finished_ + done_before_, all, label, outcome, point_s,
                   eta);
        std::fflush(out_);
    } else if (mode_ == ProgressMode::bar) {
        draw(label + ": " + outcome);
    }
}

void Progress::note(const std::string& text) {
    if (mode_ == ProgressMode::quiet) return;
    if (mode_ == ProgressMode::bar && bar_drawn_) fmt::print(out_, "\r\033[2K");
    fmt::print(out_, "{}\n", text);
    bar_drawn_ = false;
    std::fflush(out_);
}

void Progress::close() {
    if (mode_ == ProgressMode::bar && bar_drawn_) {
        fmt::print(out_, "\n");
        std::fflush(out_);
        bar_drawn_ = false;
    }
}

}  // namespace moebench
