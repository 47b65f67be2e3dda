// SPDX-License-Identifier: Apache-2.0
// How long one collective of a multi-process job may wait for the other ranks (--rank-timeout), and what the job was
// doing when it waited (the step's phase and layer, or a stage of the run), for the message of a rank that gives up.
// A rank stopped (SIGSTOP), hung or disagreeing on the collectives would otherwise hold every other rank forever.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace moebench {

class RankDeadline {
public:
    /// auto: max(kFloorS, kStepFactor x the slowest step so far): a healthy rank never waits for the others longer
    /// than the skew of one step, and a floor keeps the first steps (nothing measured yet) from timing out early.
    static constexpr double kFloorS = 30.0;
    static constexpr double kStepFactor = 5.0;

    /// A fixed deadline in seconds (--rank-timeout SECONDS); 0: auto.
    void set_fixed_s(double seconds) { fixed_s_ = seconds; }
    /// A step (its wall time) finished: auto deadlines follow the slowest one.
    void note_step_s(double seconds) { slowest_step_s_ = std::max(slowest_step_s_, seconds); }
    /// auto: the waits until the next call may last kStepFactor x `seconds` too (0 ends it): the sync after a stage
    /// that is no step, such as preparing the weights, whose length on a slower rank shows up here as a wait.
    void allow_stage_s(double seconds) { stage_s_ = seconds; }

    double seconds() const {
        if (fixed_s_ > 0) return fixed_s_;
        return std::max({kFloorS, kStepFactor * slowest_step_s_, kStepFactor * stage_s_});
    }
    bool fixed() const { return fixed_s_ > 0; }
    double slowest_step_s() const { return slowest_step_s_; }

private:
    double fixed_s_ = 0;
    double slowest_step_s_ = 0;
    double stage_s_ = 0;
};

/// What this process is doing, for a timed-out wait's message: `what` is a phase name (with its model layer, -1 for
/// none) or a stage ("the start-of-run settings check"). One global: only the engine's thread calls MPI.
struct CommContext {
    std::string_view what = "start-up";
    int64_t layer = -1;
};
CommContext& comm_context();
/// "dispatch_a2a (layer 3)", "the stop rule's broadcast".
std::string describe(const CommContext& c);

/// Sets the context for its scope and restores the previous one.
class ScopedCommContext {
public:
    explicit ScopedCommContext(std::string_view what, int64_t layer = -1) : saved_(comm_context()) {
        comm_context() = CommContext{what, layer};
    }
    ~ScopedCommContext() { comm_context() = saved_; }
    ScopedCommContext(const ScopedCommContext&) = delete;
    ScopedCommContext& operator=(const ScopedCommContext&) = delete;

private:
    CommContext saved_;
};

}  // namespace moebench
