// SPDX-License-Identifier: Apache-2.0
// Launcher detection, MPI start-up and shutdown, and the MPI communicator (host buffers: the cpu backend's
// all-to-all, the harness's gathers). Compiled without MPI too: then only a single process can run.
#include "comm/process_group.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <memory>

#if MOEBENCH_HAS_MPI
#include <mpi.h>
#endif

namespace moebench {

int64_t launcher_world_size() {
    // Open MPI's mpirun, MPICH/Hydra and PMI-2 launchers, PMIx (srun --mpi=pmix), and the tasks of an srun step
    // (not SLURM_NTASKS: a batch script that runs moebench directly has the allocation's count but one process).
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"}) {
        const char* v = std::getenv(var);
        if (v && *v) {
            char* end = nullptr;
            const long long n = std::strtoll(v, &end, 10);
            if (end && *end == '\0' && n >= 1) return n;
        }
    }
    return 1;
}

bool writes_outputs() { return process_group() == nullptr || process_group()->rank() == 0; }

std::string rank_prefix() {
    const Communicator* c = process_group();
    return c ? fmt::format("rank {} of {} ({}): ", c->rank(), c->world_size(), c->host_name()) : "";
}

#if MOEBENCH_HAS_MPI

namespace {

void check_mpi(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(fmt::format("{} failed: {}", what, std::string(msg, static_cast<size_t>(len))));
}

std::vector<int> int_counts(const std::vector<int64_t>& bytes, const char* what) {
    std::vector<int> out(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] < 0 || bytes[i] > INT_MAX)
            throw UnsupportedError(fmt::format("{}: {} bytes to one rank exceed MPI's int count; use a smaller --batch",
                                               what, bytes[i]));
        out[i] = static_cast<int>(bytes[i]);
    }
    return out;
}

std::vector<int> displacements(const std::vector<int>& counts) {
    std::vector<int> d(counts.size(), 0);
    int64_t at = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        if (at > INT_MAX) throw UnsupportedError("all-to-all: more than 2 GiB in one buffer; use a smaller --batch");
        d[i] = static_cast<int>(at);
        at += counts[i];
    }
    return d;
}

class MpiCommunicator final : public Communicator {
public:
    MpiCommunicator() {
        int r = 0, n = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        rank_ = r;
        size_ = n;
        MPI_Comm local;  // the ranks that share this host's memory: the local rank picks the GPU
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &local);
        int lr = 0;
        MPI_Comm_rank(local, &lr);
        MPI_Comm_free(&local);
        local_rank_ = lr;
        char host[MPI_MAX_PROCESSOR_NAME];
        int len = 0;
        MPI_Get_processor_name(host, &len);
        host_.assign(host, static_cast<size_t>(len));
    }
    std::string name() const override { return "mpi"; }
    std::string library() const override { return mpi_library(); }
    int64_t rank() const override { return rank_; }
    int64_t world_size() const override { return size_; }
    int64_t local_rank() const override { return local_rank_; }
    std::string host_name() const override { return host_; }

    void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override {
        MOEBENCH_CHECK(static_cast<int64_t>(send_bytes.size()) == size_ && static_cast<int64_t>(recv_bytes.size()) == size_,
                       "alltoallv: {} / {} counts for {} ranks", send_bytes.size(), recv_bytes.size(), size_);
        const std::vector<int> sc = int_counts(send_bytes, "all-to-all"), rc = int_counts(recv_bytes, "all-to-all");
        const std::vector<int> sd = displacements(sc), rd = displacements(rc);
        check_mpi(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                                MPI_COMM_WORLD),
                  "MPI_Alltoallv");
    }

    std::vector<int64_t> exchange_counts(const std::vector<int64_t>& to_each_rank) override {
        MOEBENCH_CHECK(static_cast<int64_t>(to_each_rank.size()) == size_, "exchange_counts: {} counts for {} ranks",
                       to_each_rank.size(), size_);
        std::vector<int64_t> from(static_cast<size_t>(size_), 0);
        check_mpi(MPI_Alltoall(to_each_rank.data(), 1, MPI_INT64_T, from.data(), 1, MPI_INT64_T, MPI_COMM_WORLD),
                  "MPI_Alltoall");
        return from;
    }

    std::vector<std::string> gather(const std::string& mine, int64_t root) override {
        const int64_t n = static_cast<int64_t>(mine.size());
        std::vector<int64_t> sizes(static_cast<size_t>(size_), 0);
        check_mpi(MPI_Gather(&n, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, static_cast<int>(root), MPI_COMM_WORLD),
                  "MPI_Gather");
        std::vector<int> counts, displs;
        std::string all;
        if (rank_ == root) {
            counts = int_counts(sizes, "gather");
            displs = displacements(counts);
            int64_t total = 0;
            for (int64_t s : sizes) total += s;
            all.resize(static_cast<size_t>(total));
        }
        check_mpi(MPI_Gatherv(mine.data(), static_cast<int>(n), MPI_BYTE, all.data(), counts.data(), displs.data(),
                              MPI_BYTE, static_cast<int>(root), MPI_COMM_WORLD),
                  "MPI_Gatherv");
        std::vector<std::string> out;
        if (rank_ != root) return out;
        for (int64_t r = 0; r < size_; ++r)
            out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                                     static_cast<size_t>(sizes[static_cast<size_t>(r)])));
        return out;
    }

    void broadcast_bytes(void* data, int64_t bytes, int64_t root) override {
        MOEBENCH_CHECK(bytes >= 0 && bytes <= INT_MAX, "broadcast of {} bytes", bytes);
        check_mpi(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, static_cast<int>(root), MPI_COMM_WORLD), "MPI_Bcast");
    }

    void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

    [[noreturn]] void abort(int exit_code, std::string_view why) override {
        std::cerr << why;
        std::cerr.flush();
        MPI_Abort(MPI_COMM_WORLD, exit_code);
        std::_Exit(exit_code);  // MPI_Abort does not return; if it did, this process still ends
    }

private:
    int64_t rank_ = 0, size_ = 1, local_rank_ = 0;
    std::string host_;
};

std::unique_ptr<MpiCommunicator>& world() {
    static std::unique_ptr<MpiCommunicator> w;
    return w;
}

}  // namespace

bool mpi_built() { return true; }

std::string mpi_library() {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    std::string s(v, static_cast<size_t>(len));
    const size_t cut = s.find_first_of(",\n");  // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
    return cut == std::string::npos ? s : s.substr(0, cut);
}

void join_process_group(int* argc, char*** argv) {
    if (launcher_world_size() <= 1 || world()) return;
    int provided = 0;
    // One thread calls MPI (the engine's); the cpu backend's pool never does.
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed: the launcher started this process but MPI could not join the job");
    world() = std::make_unique<MpiCommunicator>();
}

Communicator* process_group() { return world().get(); }

void leave_process_group() {
    if (!world()) return;
    MPI_Barrier(MPI_COMM_WORLD);
    world().reset();
    MPI_Finalize();
}

#else  // no MPI in this build

bool mpi_built() { return false; }
std::string mpi_library() { return ""; }

void join_process_group(int*, char***) {
    const int64_t n = launcher_world_size();
    if (n > 1)
        throw ConfigError(fmt::format(
            "launcher: a launcher started {} processes, but this moebench was built without MPI; rebuild with MPI "
            "(apt install libopenmpi-dev openmpi-bin, then scripts/setup.sh) or run one process", n));
}

Communicator* process_group() { return nullptr; }
void leave_process_group() {}

#endif

}  // namespace moebench
