// SPDX-License-Identifier: Apache-2.0
#include "common/did_you_mean.hpp"

#include "common/text_list.hpp"

#include <algorithm>
#include <cctype>
#include <tuple>

namespace moebench {

namespace {

std::string lower(const std::string& s) {
    std::string l = s;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return l;
}

// Optimal string alignment distance: insertions, deletions, substitutions and transpositions of neighbours, one each.
size_t edit_distance(const std::string& a, const std::string& b) {
    const size_t n = a.size(), m = b.size();
    std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
    for (size_t i = 0; i <= n; ++i) d[i][0] = i;
    for (size_t j = 0; j <= m; ++j) d[0][j] = j;
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= m; ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[n][m];
}

}  // namespace

std::vector<std::string> near_names(const std::string& given, const std::vector<std::string>& candidates,
                                    size_t max_names) {
    // Names are short (a model's, a field's); a long string is no near miss of any, and would make the table large.
    constexpr size_t kMaxChars = 128;
    const std::string g = lower(given);
    if (g.empty() || g.size() > kMaxChars) return {};
    const size_t max_typos = std::max<size_t>(1, g.size() / 4);
    // (rank, distance, name), best first: the same name in another case alone; then the names `given` begins
    // (h200 -> h200-sxm before b200); then by distance.
    std::vector<std::tuple<int, size_t, std::string>> scored;
    for (const std::string& c : candidates) {
        const std::string l = lower(c);
        if (l.size() > kMaxChars || c == given) continue;  // the name itself is no suggestion
        if (l == g) return {c};
        const size_t dist = edit_distance(g, l);
        const bool part = g.size() >= 3 && l.find(g) != std::string::npos;
        if (dist <= max_typos || part) scored.emplace_back(l.rfind(g, 0) == 0 ? 0 : 1, dist, c);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<std::string> names;
    for (const auto& [rank, dist, name] : scored)
        if (names.size() < max_names && std::find(names.begin(), names.end(), name) == names.end())
            names.push_back(name);
    return names;
}

std::string did_you_mean(const std::string& given, const std::vector<std::string>& candidates,
                         const std::string& rest) {
    const std::vector<std::string> near = near_names(given, candidates);
    if (near.empty()) return rest;
    return "did you mean " + or_list(near) + "? Otherwise " + rest;
}

}  // namespace moebench
