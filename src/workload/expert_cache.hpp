// SPDX-License-Identifier: Apache-2.0
// Expert offload: one MoE layer's cache of N resident experts on the device (the rest in host memory), and the
// policies that decide which experts stay. A policy is one row of the policy table (name, description, factory):
// `moebench offload`, the sim's `--resident-experts N --offload-policy P` and docs/offload.md read it.
//
// Every policy starts from the same N resident experts: the layer's N most used experts over the access sequence
// (ties: lowest id), as a server that loaded a profile's hot experts at start; with N >= E every expert is resident
// and every access hits. Ties: LRU has none (one access at a time); LFU evicts the least used so far, ties the least
// recently used; optimal (Belady) drops, among the residents and the missed expert, the one whose next use is
// farthest (an expert never used again is farthest; among those the lowest id: any choice gives the same hits).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moebench {

/// What a policy may know of one layer when it is made.
struct ExpertCacheInput {
    int64_t num_experts = 0;
    int64_t capacity = 0;           // N resident experts (<= num_experts)
    std::vector<int32_t> accesses;  // the layer's expert accesses in replay order (static-hot, optimal read it)
};

/// One layer's resident set. access() is called once per expert access in replay order.
class ExpertCache {
public:
    virtual ~ExpertCache() = default;
    /// The next access, to `expert`: true on a hit. On a miss the policy decides what it keeps (the missed expert
    /// was fetched either way).
    virtual bool access(int32_t expert) = 0;
    /// Brings `expert` in ahead of its use, as the most recently used (policies that prefetch); true when it was
    /// not resident, i.e. it was fetched.
    virtual bool prefetch(int32_t expert);
    virtual bool resident(int32_t expert) const = 0;
};

/// One row of the policy table.
struct OffloadPolicy {
    std::string name;
    std::string description;
    bool prefetches = false;  // the replay asks it to prefetch layer l+1's predicted experts after layer l
    bool offline = false;     // reads the whole access sequence ahead (not an online policy)
    std::unique_ptr<ExpertCache> (*make)(const ExpertCacheInput& in) = nullptr;
};

const std::vector<OffloadPolicy>& offload_policies();
/// The row named `name`; ConfigError naming `field` with the closest name ("did you mean") and the list otherwise.
const OffloadPolicy& offload_policy(const std::string& name, const std::string& field);
/// "static-hot | lru | lfu | prefetch | optimal": for help texts.
std::string offload_policy_names(const std::string& separator = " | ");

/// The N most used experts of `accesses` over `num_experts`, most used first (ties: lowest id): every policy's
/// starting residents, and static-hot's for good.
std::vector<int32_t> hottest_experts(const std::vector<int32_t>& accesses, int64_t num_experts, int64_t n);

}  // namespace moebench
