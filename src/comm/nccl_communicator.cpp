// SPDX-License-Identifier: Apache-2.0
#include "comm/nccl_communicator.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>

namespace moebench {

namespace {

void check_nccl(ncclResult_t rc, const char* what) {
    if (rc != ncclSuccess && rc != ncclInProgress)
        throw Error(fmt::format("{} failed: {}", what, ncclGetErrorString(rc)));
}

void check_cuda(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess) throw Error(fmt::format("{} failed: {}", what, cudaGetErrorString(rc)));
}

class NcclCommunicator final : public Communicator {
public:
    explicit NcclCommunicator(Communicator& host) : host_(host) {
        ncclUniqueId id;
        if (host.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
        host.broadcast_bytes(&id, sizeof(id), 0);
        check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
        check_nccl(ncclCommInitRank(&comm_, static_cast<int>(host.world_size()), id, static_cast<int>(host.rank())),
                   "ncclCommInitRank");
    }
    ~NcclCommunicator() override {
        if (comm_) ncclCommDestroy(comm_);
        if (stream_) cudaStreamDestroy(stream_);
    }
    std::string name() const override { return "nccl"; }
    std::string library() const override {
        int v = 0;
        ncclGetVersion(&v);
        return fmt::format("NCCL {}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
    }
    int64_t rank() const override { return host_.rank(); }
    int64_t world_size() const override { return host_.world_size(); }
    int64_t local_rank() const override { return host_.local_rank(); }
    std::string host_name() const override { return host_.host_name(); }

    // Device buffers: one ncclSend and one ncclRecv per peer inside a group (NCCL's all-to-all-v idiom).
    void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override {
        const int64_t n = world_size();
        MOEBENCH_CHECK(static_cast<int64_t>(send_bytes.size()) == n && static_cast<int64_t>(recv_bytes.size()) == n,
                       "nccl alltoallv: {} / {} counts for {} ranks", send_bytes.size(), recv_bytes.size(), n);
        const auto* s = static_cast<const char*>(send);
        auto* r = static_cast<char*>(recv);
        check_nccl(ncclGroupStart(), "ncclGroupStart");
        int64_t so = 0, ro = 0;
        for (int64_t peer = 0; peer < n; ++peer) {
            const auto sb = static_cast<size_t>(send_bytes[static_cast<size_t>(peer)]);
            const auto rb = static_cast<size_t>(recv_bytes[static_cast<size_t>(peer)]);
            if (sb > 0) check_nccl(ncclSend(s + so, sb, ncclUint8, static_cast<int>(peer), comm_, stream_), "ncclSend");
            if (rb > 0) check_nccl(ncclRecv(r + ro, rb, ncclUint8, static_cast<int>(peer), comm_, stream_), "ncclRecv");
            so += static_cast<int64_t>(sb);
            ro += static_cast<int64_t>(rb);
        }
        check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        wait("all-to-all");
    }

    std::vector<int64_t> exchange_counts(const std::vector<int64_t>& to_each_rank) override {
        return host_.exchange_counts(to_each_rank);  // counts live on the host
    }
    std::vector<std::string> gather(const std::string& mine, int64_t root) override { return host_.gather(mine, root); }
    void broadcast_bytes(void* data, int64_t bytes, int64_t root) override { host_.broadcast_bytes(data, bytes, root); }
    void barrier() override { host_.barrier(); }
    RankDeadline& rank_deadline() override { return host_.rank_deadline(); }
    [[noreturn]] void abort(int exit_code, std::string_view why) override {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        host_.abort(exit_code, why);
    }

private:
    // Until the stream is done; an NCCL error or a peer that never answers ends the job instead of hanging it.
    void wait(const char* what) {
        const auto start = std::chrono::steady_clock::now();
        const double timeout_s = rank_deadline().seconds();
        while (true) {
            const cudaError_t q = cudaStreamQuery(stream_);
            if (q == cudaSuccess) return;
            if (q != cudaErrorNotReady) check_cuda(q, what);
            ncclResult_t async = ncclSuccess;
            ncclCommGetAsyncError(comm_, &async);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (async != ncclSuccess && async != ncclInProgress)
                abort(1, fmt::format("rank {}: NCCL {} failed: {}; ending the job\n", rank(), what,
                                     ncclGetErrorString(async)));
            if (s > timeout_s)
                abort(1, fmt::format("rank {}: NCCL {} in {} did not finish in {:g} s (a peer failed or stopped?); "
                                     "ending the job ({})\n",
                                     rank(), what, describe(comm_context()), timeout_s, flag_of("rank_timeout")));
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }

    Communicator& host_;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host_comm) {
    return std::make_unique<NcclCommunicator>(host_comm);
}

}  // namespace moebench
