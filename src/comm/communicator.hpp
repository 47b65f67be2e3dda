// SPDX-License-Identifier: Apache-2.0
// The processes of one expert-parallel job and the collectives moebench uses between them. MPI (and, for GPU
// buffers, NCCL) are the engines; this interface only names what the engine, backends and harness need.
#pragma once
#include "comm/rank_deadline.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moebench {

class Communicator {
public:
    virtual ~Communicator() = default;
    /// "mpi" (host buffers) or "nccl" (device buffers), for the report.
    virtual std::string name() const = 0;
    /// The library and version that carries the bytes, e.g. "Open MPI v4.1.4".
    virtual std::string library() const = 0;
    virtual int64_t rank() const = 0;
    virtual int64_t world_size() const = 0;
    /// Rank among the processes on this host (which GPU a rank takes), and the host's name.
    virtual int64_t local_rank() const = 0;
    virtual std::string host_name() const = 0;

    /// All-to-all-v of bytes: send_bytes[r] bytes (contiguous in rank order in `send`) go to rank r, and
    /// recv_bytes[r] bytes arrive from rank r (contiguous in rank order in `recv`). Both count lists have world_size
    /// entries; the receiver must know its counts (exchange_counts below).
    virtual void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                           const std::vector<int64_t>& recv_bytes) = 0;
    /// One int64 to every rank, one from every rank: out[r] = what rank r sent to this rank.
    virtual std::vector<int64_t> exchange_counts(const std::vector<int64_t>& to_each_rank) = 0;
    /// Every rank's `mine`, in rank order, at rank `root` (empty elsewhere).
    virtual std::vector<std::string> gather(const std::string& mine, int64_t root) = 0;
    /// Rank `root`'s `bytes` bytes at `data` on every rank.
    virtual void broadcast_bytes(void* data, int64_t bytes, int64_t root) = 0;
    /// Rank `root`'s value on every rank.
    bool broadcast(bool value, int64_t root) {
        unsigned char v = value ? 1 : 0;
        broadcast_bytes(&v, 1, root);
        return v != 0;
    }
    virtual void barrier() = 0;
    /// How long each collective above may wait for the other ranks before this rank ends the job, naming the rank it
    /// waited on and what it was doing (comm_context()). Every collective and wait of a job keeps it.
    virtual RankDeadline& rank_deadline() = 0;
    /// Ends every process of the job with `exit_code` (MPI_Abort), after `why` is written to stderr (and after a
    /// moment for the other ranks that are ending too to write theirs).
    [[noreturn]] virtual void abort(int exit_code, std::string_view why) = 0;
};

/// Rank `root`'s string on every rank (its size first, then its bytes).
inline std::string broadcast_string(Communicator& comm, std::string s, int64_t root) {
    int64_t size = static_cast<int64_t>(s.size());
    comm.broadcast_bytes(&size, sizeof(size), root);
    s.resize(static_cast<size_t>(size));
    comm.broadcast_bytes(s.data(), size, root);
    return s;
}

}  // namespace moebench
