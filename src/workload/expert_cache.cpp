// SPDX-License-Identifier: Apache-2.0
// The expert-cache policies and their table (expert_cache.hpp says the rules and ties).
#include "workload/expert_cache.hpp"

#include "common/did_you_mean.hpp"
#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

namespace moebench {

bool ExpertCache::prefetch(int32_t) { return false; }

std::vector<int32_t> hottest_experts(const std::vector<int32_t>& accesses, int64_t num_experts, int64_t n) {
    std::vector<int64_t> uses(static_cast<size_t>(num_experts), 0);
    for (int32_t e : accesses) ++uses[static_cast<size_t>(e)];
    std::vector<int32_t> order(static_cast<size_t>(num_experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return uses[static_cast<size_t>(a)] > uses[static_cast<size_t>(b)]; });
    order.resize(static_cast<size_t>(std::min(n, num_experts)));
    return order;
}

namespace {

// Residents as flags over the expert ids (E <= 4096: a scan per eviction is cheaper than any index structure
// at these sizes and cannot go stale).
class ResidentSet {
public:
    explicit ResidentSet(const ExpertCacheInput& in)
        : flags_(static_cast<size_t>(in.num_experts), 0), capacity_(in.capacity) {}
    bool has(int32_t e) const { return flags_[static_cast<size_t>(e)] != 0; }
    bool full() const { return count_ >= capacity_; }
    void add(int32_t e) { flags_[static_cast<size_t>(e)] = 1, ++count_; }
    void remove(int32_t e) { flags_[static_cast<size_t>(e)] = 0, --count_; }
    /// The resident that minimises `key` (ties: the first, i.e. lowest, id).
    template <class Key>
    int32_t argmin(Key key) const {
        int32_t best = -1;
        for (int32_t e = 0; e < static_cast<int32_t>(flags_.size()); ++e)
            if (flags_[static_cast<size_t>(e)] && (best < 0 || key(e) < key(best))) best = e;
        return best;
    }

private:
    std::vector<char> flags_;
    int64_t capacity_ = 0, count_ = 0;
};

// Never evicts: the N most used experts of the layer; a miss streams through a fetch buffer.
class StaticHotCache final : public ExpertCache {
public:
    explicit StaticHotCache(const ExpertCacheInput& in) : set_(in) {
        for (int32_t e : hottest_experts(in.accesses, in.num_experts, in.capacity)) set_.add(e);
    }
    bool access(int32_t e) override { return set_.has(e); }
    bool resident(int32_t e) const override { return set_.has(e); }

private:
    ResidentSet set_;
};

// Least recently used, or (lfu) least used so far with the least recent first among equals. The starting
// residents count as used, the hottest most recently.
class RecencyCache final : public ExpertCache {
public:
    RecencyCache(const ExpertCacheInput& in, bool by_frequency)
        : set_(in),
          last_(static_cast<size_t>(in.num_experts), std::numeric_limits<int64_t>::min()),
          uses_(static_cast<size_t>(in.num_experts), 0),
          by_frequency_(by_frequency) {
        const std::vector<int32_t> hot = hottest_experts(in.accesses, in.num_experts, in.capacity);
        for (size_t i = 0; i < hot.size(); ++i) {
            set_.add(hot[i]);
            last_[static_cast<size_t>(hot[i])] = -static_cast<int64_t>(i) - 1;
        }
    }
    bool access(int32_t e) override {
        ++uses_[static_cast<size_t>(e)];
        const bool hit = set_.has(e);
        if (!hit) bring_in(e);
        last_[static_cast<size_t>(e)] = ++clock_;
        return hit;
    }
    bool prefetch(int32_t e) override {
        const bool fetched = !set_.has(e);
        if (fetched) bring_in(e);
        last_[static_cast<size_t>(e)] = ++clock_;
        return fetched;
    }
    bool resident(int32_t e) const override { return set_.has(e); }

private:
    void bring_in(int32_t e) {
        if (set_.full()) {
            const int32_t victim =
                by_frequency_ ? set_.argmin([&](int32_t x) {
                    return std::pair(uses_[static_cast<size_t>(x)], last_[static_cast<size_t>(x)]);
                })
                              : set_.argmin([&](int32_t x) { return last_[static_cast<size_t>(x)]; });
            set_.remove(victim);
        }
        set_.add(e);
    }
    ResidentSet set_;
    std::vector<int64_t> last_, uses_;
    int64_t clock_ = 0;
    bool by_frequency_ = false;
};

// Belady with bypass: on a miss, of the residents and the missed expert, the one used again farthest ahead is the
// one not kept. Optimal over every policy that may keep or bypass the expert it fetched (static-hot bypasses).
class OptimalCache final : public ExpertCache {
public:
    explicit OptimalCache(const ExpertCacheInput& in) : set_(in), accesses_(in.accesses) {
        const auto E = static_cast<size_t>(in.num_experts);
        next_of_.assign(E, kNever);
        next_pos_.assign(accesses_.size(), kNever);
        std::vector<int64_t> seen(E, kNever);
        for (size_t i = accesses_.size(); i-- > 0;) {
            const auto e = static_cast<size_t>(accesses_[i]);
            next_pos_[i] = seen[e];
            seen[e] = static_cast<int64_t>(i);
        }
        next_of_ = seen;  // each expert's first use
        for (int32_t e : hottest_experts(accesses_, in.num_experts, in.capacity)) set_.add(e);
    }
    bool access(int32_t e) override {
        MOEBENCH_CHECK(pos_ < accesses_.size() && accesses_[pos_] == e, "optimal cache replayed out of order");
        next_of_[static_cast<size_t>(e)] = next_pos_[pos_++];
        if (set_.has(e)) return true;
        if (!set_.full()) {
            set_.add(e);
            return false;
        }
        // Farthest next use first, then the lowest id: minimise (-next, id).
        const int32_t victim = set_.argmin([&](int32_t x) { return -next_of_[static_cast<size_t>(x)]; });
        const int64_t victim_next = next_of_[static_cast<size_t>(victim)];
        const int64_t own_next = next_of_[static_cast<size_t>(e)];
        if (own_next > victim_next || (own_next == victim_next && e < victim)) return false;  // bypass
        set_.remove(victim);
        set_.add(e);
        return false;
    }
    bool resident(int32_t e) const override { return set_.has(e); }

private:
    static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
    ResidentSet set_;
    std::vector<int32_t> accesses_;
    std::vector<int64_t> next_pos_, next_of_;
    size_t pos_ = 0;
};

std::unique_ptr<ExpertCache> make_static_hot(const ExpertCacheInput& in) {
    return std::make_unique<StaticHotCache>(in);
}
std::unique_ptr<ExpertCache> make_lru(const ExpertCacheInput& in) { return std::make_unique<RecencyCache>(in, false); }
std::unique_ptr<ExpertCache> make_lfu(const ExpertCacheInput& in) { return std::make_unique<RecencyCache>(in, true); }
std::unique_ptr<ExpertCache> make_optimal(const ExpertCacheInput& in) { return std::make_unique<OptimalCache>(in); }

// The one table of policies: a new policy is its cache class and a row here.
const std::vector<OffloadPolicy> kOffloadPolicies = {
    {"static-hot",
     "the N most used experts of the whole replay stay resident, never evicted (an offline profile); a "
     "miss streams through a fetch buffer",
     false, true, make_static_hot},
    {"lru", "least recently used evicted", false, false, make_lru},
    {"lfu", "least used so far evicted (counts kept for evicted experts), ties the least recently used", false, false,
     make_lfu},
    {"prefetch",
     "lru, plus after layer l the experts predicted for layer l+1 from layer l's choice brought in as most "
     "recent (predictor learnt online from the tokens already replayed)",
     true, false, make_lru},
    {"optimal",
     "Belady: of the residents and the missed expert, the one used again farthest ahead is not kept (reads "
     "the future: the bound on misses no policy beats)",
     false, true, make_optimal},
};

}  // namespace

const std::vector<OffloadPolicy>& offload_policies() { return kOffloadPolicies; }

std::string offload_policy_names(const std::string& separator) {
    std::string s;
    for (const OffloadPolicy& p : kOffloadPolicies) s += (s.empty() ? "" : separator) + p.name;
    return s;
}

const OffloadPolicy& offload_policy(const std::string& name, const std::string& field) {
    std::vector<std::string> names;
    for (const OffloadPolicy& p : kOffloadPolicies) {
        if (p.name == name) return p;
        names.push_back(p.name);
    }
    config_error(field, "unknown expert-cache policy", name,
                 did_you_mean(name, names, "use one of: " + offload_policy_names(", ")));
}

}  // namespace moebench
