// SPDX-License-Identifier: Apache-2.0
// The report's key names (docs/report-schema.md) that the writer (harness, metrics), the readers (report_reader,
// compare, sweep) and every view (terminal, CSV, Markdown, HTML, Chrome trace, Prometheus) share: one spelling each.
// Keys used in one place only stay literals there.
#pragma once

namespace moebench::keys {

inline constexpr const char* kRuns = "runs";
inline constexpr const char* kStatus = "status";
inline constexpr const char* kAxes = "axes";
inline constexpr const char* kBackendInfo = "backend_info";
inline constexpr const char* kIterations = "iterations";
inline constexpr const char* kLatency = "latency";
inline constexpr const char* kStep = "step";
inline constexpr const char* kPhases = "phases";
inline constexpr const char* kPerLayer = "per_layer";
inline constexpr const char* kWholeModel = "whole_model";
inline constexpr const char* kStepUs = "step_us";
inline constexpr const char* kMeanUs = "mean_us";
inline constexpr const char* kP50Us = "p50_us";
inline constexpr const char* kP95Us = "p95_us";
inline constexpr const char* kP99Us = "p99_us";
inline constexpr const char* kLowConfidence = "low_confidence";
inline constexpr const char* kConditions = "conditions";
inline constexpr const char* kThroughput = "throughput";
inline constexpr const char* kTokensPerS = "tokens_per_s";
inline constexpr const char* kExpertLoad = "expert_load";
inline constexpr const char* kMaxOverMean = "max_over_mean";
inline constexpr const char* kRoofline = "roofline";
inline constexpr const char* kMoeBlock = "moe_block";
inline constexpr const char* kFloorUs = "floor_us";
inline constexpr const char* kRatioToFloor = "ratio_to_floor";

}  // namespace moebench::keys
