// SPDX-License-Identifier: Apache-2.0
// "Did you mean": the names a user probably meant by one that is not there (a short name of a shipped model or
// hardware profile, a run config field, a hardware or model field, a sweep axis). Every "unknown name" message
// that lists what exists puts these first, so that `--model mixtral` says mixtral-8x7b and not only 38 names.
#pragma once
#include <string>
#include <vector>

namespace moebench {

/// The candidates `given` is probably a near miss of, at most `max_names`: the same name in another case (alone),
/// else the names it begins (`h200` of h200-sxm) or is part of (`mixtral` of mixtral-8x7b and mixtral-8x22b; at
/// least 3 characters) and the names a typo away (edit distance, a transposition counting one, up to a quarter of
/// its length and at least 1), names it begins first, then the closest. Empty when none is near.
std::vector<std::string> near_names(const std::string& given, const std::vector<std::string>& candidates,
                                    size_t max_names = 5);

/// The fix of an "unknown name" message: "did you mean A or B? Otherwise " + `rest` when some candidate is near,
/// else `rest` alone ("use one of: ...").
std::string did_you_mean(const std::string& given, const std::vector<std::string>& candidates, const std::string& rest);

}  // namespace moebench
