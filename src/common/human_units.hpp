// SPDX-License-Identifier: Apache-2.0
// Numbers as a person reads them in a table or a sentence ("46.70 B", "87.00 GiB", "1.23 TFLOP", "12.3 ms", "27.6%"):
// plan's document (its explanation and refusals) and its terminal view print them alike.
#pragma once
#include <string>

namespace moebench {

std::string human_count(double v);     // "46.70 B", "1.234 T", "512"
std::string human_bytes(double v);     // binary units: "87.00 GiB", "512 B"
std::string human_flops(double v);     // "1.23 TFLOP", "12 FLOP"
std::string human_time_us(double us);  // "1.20 s", "3.40 ms", "56.7 µs"
std::string percent(double fraction);  // "27.6%"

}  // namespace moebench
