// SPDX-License-Identifier: Apache-2.0
#include "model/placement.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/read_file.hpp"
#include "config/file_kind.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moebench {

namespace {

// ranks_of_expert from experts_on_rank.
void index_replicas(ExpertPlacement& p) {
    p.ranks_of_expert.assign(static_cast<size_t>(p.num_experts), {});
    for (int64_t r = 0; r < p.num_ranks; ++r)
        for (int32_t e : p.experts_on_rank[static_cast<size_t>(r)])
            p.ranks_of_expert[static_cast<size_t>(e)].push_back(static_cast<int32_t>(r));
}

}  // namespace

int64_t ExpertPlacement::local_index(int64_t rank, int32_t expert) const {
    const auto& held = experts_on_rank[static_cast<size_t>(rank)];
    const auto it = std::lower_bound(held.begin(), held.end(), expert);
    return it != held.end() && *it == expert ? it - held.begin() : -1;
}

int64_t ExpertPlacement::dest_rank(int32_t expert, int64_t src_rank, int64_t token) const {
    const auto& ranks = ranks_of_expert[static_cast<size_t>(expert)];
    if (ranks.size() == 1) return ranks.front();
    if (std::binary_search(ranks.begin(), ranks.end(), static_cast<int32_t>(src_rank))) return src_rank;
    return ranks[static_cast<size_t>(token % static_cast<int64_t>(ranks.size()))];
}

const ExpertPlacement& ExpertPlacement::of_layer(int64_t layer) const {
    if (layer >= 0 && layer < static_cast<int64_t>(by_layer.size()) &&
        !by_layer[static_cast<size_t>(layer)].experts_on_rank.empty())
        return by_layer[static_cast<size_t>(layer)];
    return *this;
}

int64_t ExpertPlacement::max_experts_per_rank() const {
    size_t m = 0;
    for (const auto& held : experts_on_rank) m = std::max(m, held.size());
    return static_cast<int64_t>(m);
}

int64_t contiguous_rank(int64_t expert, int64_t num_experts, int64_t num_ranks) {
    MOEBENCH_CHECK(num_ranks >= 1 && num_ranks <= num_experts && expert >= 0 && expert < num_experts,
                   "contiguous rank of expert {} of {} on {} ranks", expert, num_experts, num_ranks);
    const int64_t per = num_experts / num_ranks, longer = num_experts % num_ranks;  // ranks [0, longer) hold per + 1
    const int64_t in_longer = longer * (per + 1);
    return expert < in_longer ? expert / (per + 1) : longer + (expert - in_longer) / per;
}

ExpertPlacement contiguous_placement(int64_t num_experts, int64_t num_ranks) {
    MOEBENCH_CHECK(num_ranks >= 1 && num_ranks <= num_experts, "contiguous placement: {} ranks for {} experts",
                   num_ranks, num_experts);
    ExpertPlacement p;
    p.num_experts = num_experts;
    p.num_ranks = num_ranks;
    p.experts_on_rank.resize(static_cast<size_t>(num_ranks));
    for (int64_t e = 0; e < num_experts; ++e)
        p.experts_on_rank[static_cast<size_t>(contiguous_rank(e, num_experts, num_ranks))].push_back(
            static_cast<int32_t>(e));
    index_replicas(p);
    return p;
}

ExpertPlacement placement_from_json(const json& doc, int64_t num_experts, int64_t num_ranks, const std::string& where) {
    const auto bad = [&](const std::string& field, const std::string& what, const std::string& value) {
        config_error(where + ": " + field, what, value,
                     fmt::format("write it with `moebench place {} T {} N {} FILE`", flag_of("trace"), flag_of("ep"),
                                 flag_of("out")));
    };
    if (!doc.is_object() || doc.value("schema", json()) != json(kPlacementSchema))
        bad("schema", std::string("is not ") + kPlacementSchema,
            doc.is_object() ? json_brief(doc.value("schema", json())) : json_brief(doc));
    const auto int_field = [&](const char* key) {
        if (!doc.contains(key) || !doc[key].is_number_integer())
            bad(key, "must be a whole number", json_brief(doc.value(key, json())));
        return doc[key].get<int64_t>();
    };
    if (int_field("num_experts") != num_experts)
        bad("num_experts", fmt::format("differs from the model's {} experts", num_experts),
            std::to_string(int_field("num_experts")));
    if (int_field("num_ranks") != num_ranks)
        bad("num_ranks", fmt::format("differs from the run's {} {}", flag_of("ep"), num_ranks),
            std::to_string(int_field("num_ranks")));
    const json& on = doc.value("experts_on_rank", json());
    if (!on.is_array() || static_cast<int64_t>(on.size()) != num_ranks)
        bad("experts_on_rank", fmt::format("must be a list of {} lists of expert ids", num_ranks), json_brief(on));
    ExpertPlacement p;
    p.num_experts = num_experts;
    p.num_ranks = num_ranks;
    p.source = where;
    p.experts_on_rank.resize(static_cast<size_t>(num_ranks));
    for (int64_t r = 0; r < num_ranks; ++r) {
        const json& ids = on[static_cast<size_t>(r)];
        const std::string field = fmt::format("experts_on_rank[{}]", r);
        if (!ids.is_array()) bad(field, "must be a list of expert ids", json_brief(ids));
        auto& held = p.experts_on_rank[static_cast<size_t>(r)];
        for (const json& id : ids) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= num_experts)
                bad(field, fmt::format("holds an id outside [0, {})", num_experts), json_brief(id));
            held.push_back(id.get<int32_t>());
        }
        std::sort(held.begin(), held.end());
        if (std::adjacent_find(held.begin(), held.end()) != held.end())
            bad(field, "names an expert twice", json_brief(ids));
    }
    index_replicas(p);
    for (int64_t e = 0; e < num_experts; ++e)
        if (p.ranks_of_expert[static_cast<size_t>(e)].empty())
            bad("experts_on_rank", "leaves an expert on no rank", std::to_string(e));
    return p;
}

json placement_to_json(const ExpertPlacement& p) {
    return {{"schema", kPlacementSchema},
            {"num_experts", p.num_experts},
            {"num_ranks", p.num_ranks},
            {"experts_on_rank", p.experts_on_rank}};
}

ExpertPlacement load_placement(const std::string& path, int64_t num_experts, int64_t num_ranks) {
    if (path.empty()) return contiguous_placement(num_experts, num_ranks);
    const json doc = load_json_file(path, kMaxConfigBytes);
    refuse_other_file_kind(doc, flag_of("placement") + " " + path, {FileKind::placement});
    return placement_from_json(doc, num_experts, num_ranks, path);
}

}  // namespace moebench
