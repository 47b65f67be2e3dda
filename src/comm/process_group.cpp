// SPDX-License-Identifier: Apache-2.0
// Launcher detection, MPI start-up and shutdown, and the MPI communicator (host buffers: the cpu backend's
// all-to-all, the harness's gathers). Compiled without MPI too: then only a single process can run.
#include "comm/process_group.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <thread>
#include <vector>

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
            throw UnsupportedError(fmt::format("{}: {} bytes to one rank exceed MPI's int count; use a smaller {}",
                                               what, bytes[i], flag_of("batch")));
        out[i] = static_cast<int>(bytes[i]);
    }
    return out;
}

std::vector<int> displacements(const std::vector<int>& counts) {
    std::vector<int> d(counts.size(), 0);
    int64_t at = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        if (at > INT_MAX)
            throw UnsupportedError("all-to-all: more than 2 GiB in one buffer; use a smaller " + flag_of("batch"));
        d[i] = static_cast<int>(at);
        at += counts[i];
    }
    return d;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The control channel (a duplicate of the world communicator, so that nothing here can match a collective's
// messages): a rank whose wait timed out asks every other rank where it is (kProbeTag, its collective number), and a
// rank that is waiting too answers (kReplyTag: "<collective number> <call> in <what>") and ends with it.
constexpr int kProbeTag = 1;
constexpr int kReplyTag = 2;
// After writing its message, how long a rank that ends the job waits for the others that end too (every rank refuses
// a differing config; every waiting rank ends with the first that timed out) before MPI_Abort takes them all.
constexpr double kAbortLingerS = 1.0;

std::string ranks_text(const std::vector<int64_t>& ranks) {
    return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
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
        MPI_Comm_dup(MPI_COMM_WORLD, &ctl_);
    }
    ~MpiCommunicator() override {
        if (ctl_ != MPI_COMM_NULL) MPI_Comm_free(&ctl_);
    }
    std::string name() const override { return "mpi"; }
    std::string library() const override { return mpi_library(); }
    int64_t rank() const override { return rank_; }
    int64_t world_size() const override { return size_; }
    int64_t local_rank() const override { return local_rank_; }
    std::string host_name() const override { return host_; }
    RankDeadline& rank_deadline() override { return deadline_; }

    // Every collective is the non-blocking call, then wait(): polled against the rank deadline.
    void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override {
        MOEBENCH_CHECK(
            static_cast<int64_t>(send_bytes.size()) == size_ && static_cast<int64_t>(recv_bytes.size()) == size_,
            "alltoallv: {} / {} counts for {} ranks", send_bytes.size(), recv_bytes.size(), size_);
        const std::vector<int> sc = int_counts(send_bytes, "all-to-all"), rc = int_counts(recv_bytes, "all-to-all");
        const std::vector<int> sd = displacements(sc), rd = displacements(rc);
        MPI_Request req;
        begin("MPI_Ialltoallv");
        check_mpi(MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                                 MPI_COMM_WORLD, &req),
                  op_);
        wait(req);
    }

    std::vector<int64_t> exchange_counts(const std::vector<int64_t>& to_each_rank) override {
        MOEBENCH_CHECK(static_cast<int64_t>(to_each_rank.size()) == size_, "exchange_counts: {} counts for {} ranks",
                       to_each_rank.size(), size_);
        std::vector<int64_t> from(static_cast<size_t>(size_), 0);
        MPI_Request req;
        begin("MPI_Ialltoall");
        check_mpi(MPI_Ialltoall(to_each_rank.data(), 1, MPI_INT64_T, from.data(), 1, MPI_INT64_T, MPI_COMM_WORLD, &req),
                  op_);
        wait(req);
        return from;
    }

    std::vector<std::string> gather(const std::string& mine, int64_t root) override {
        const int64_t n = static_cast<int64_t>(mine.size());
        std::vector<int64_t> sizes(static_cast<size_t>(size_), 0);
        MPI_Request req;
        begin("MPI_Igather");
        check_mpi(
            MPI_Igather(&n, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, static_cast<int>(root), MPI_COMM_WORLD, &req),
            op_);
        wait(req);
        std::vector<int> counts, displs;
        std::string all;
        if (rank_ == root) {
            counts = int_counts(sizes, "gather");
            displs = displacements(counts);
            int64_t total = 0;
            for (int64_t s : sizes) total += s;
            all.resize(static_cast<size_t>(total));
        }
        begin("MPI_Igatherv");
        check_mpi(MPI_Igatherv(mine.data(), static_cast<int>(n), MPI_BYTE, all.data(), counts.data(), displs.data(),
                               MPI_BYTE, static_cast<int>(root), MPI_COMM_WORLD, &req),
                  op_);
        wait(req);
        std::vector<std::string> out;
        if (rank_ != root) return out;
        for (int64_t r = 0; r < size_; ++r)
            out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                                     static_cast<size_t>(sizes[static_cast<size_t>(r)])));
        return out;
    }

    void broadcast_bytes(void* data, int64_t bytes, int64_t root) override {
        MOEBENCH_CHECK(bytes >= 0 && bytes <= INT_MAX, "broadcast of {} bytes", bytes);
        MPI_Request req;
        begin("MPI_Ibcast");
        check_mpi(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, static_cast<int>(root), MPI_COMM_WORLD, &req),
                  op_);
        wait(req);
    }

    void barrier() override {
        MPI_Request req;
        begin("MPI_Ibarrier");
        check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &req), op_);
        wait(req);
    }

    [[noreturn]] void abort(int exit_code, std::string_view why) override {
        std::cerr << why;
        std::cerr.flush();
        // A moment for the ranks that end too to write their line (a barrier of the ranks in abort; a rank that is
        // stopped, computing or already gone never joins it, hence the limit).
        MPI_Request req;
        if (linger_s_ > 0 && ctl_ != MPI_COMM_NULL && MPI_Ibarrier(ctl_, &req) == MPI_SUCCESS) {
            const Clock::time_point t0 = Clock::now();
            int done = 0;
            while (!done && seconds_since(t0) < linger_s_) {
                if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
                answer_probes();
                if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        MPI_Abort(MPI_COMM_WORLD, exit_code);
        std::_Exit(exit_code);  // MPI_Abort does not return; if it did, this process still ends
    }

private:
    void begin(const char* op) {
        ++seq_;
        op_ = op;
    }

    std::string where() const { return fmt::format("{} in {}", op_, describe(comm_context())); }
    std::string prefix() const { return fmt::format("rank {} of {} ({}): ", rank_, size_, host_); }

    // Until `req` completes: MPI_Test, a spin at first (the exchange's own latency is measured), then yields and
    // short sleeps (the other ranks may share this core). Past the deadline, or once another rank timed out, the job
    // ends (time_out).
    void wait(MPI_Request& req) {
        int done = 0;
        check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), op_);
        if (done) return;
        const Clock::time_point start = Clock::now();
        const double limit_s = deadline_.seconds();
        for (uint64_t polls = 1;; ++polls) {
            check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), op_);
            if (done) return;
            const double waited_s = seconds_since(start);
            if (polls % 64 == 0) answer_probes();
            if (ending_with_ >= 0 || waited_s > limit_s) time_out(waited_s, limit_s);
            if (waited_s > 0.05)
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            else if (waited_s > 0.001)
                std::this_thread::yield();
        }
    }

    // Every "where are you?" that arrived gets this rank's collective and what it is doing; a probe means its sender
    // timed out, so this rank ends the job too, with its own view of whom it waits for.
    void answer_probes() {
        while (true) {
            int flag = 0;
            MPI_Status st;
            if (MPI_Iprobe(MPI_ANY_SOURCE, kProbeTag, ctl_, &flag, &st) != MPI_SUCCESS || !flag) return;
            int64_t their_seq = 0;
            MPI_Recv(&their_seq, 1, MPI_INT64_T, st.MPI_SOURCE, kProbeTag, ctl_, MPI_STATUS_IGNORE);
            if (ending_with_ < 0) ending_with_ = st.MPI_SOURCE;
            const std::string& reply = replies_.emplace_back(fmt::format("{} {}", seq_, where()));
            MPI_Request r;
            MPI_Isend(reply.data(), static_cast<int>(reply.size()), MPI_BYTE, st.MPI_SOURCE, kReplyTag, ctl_, &r);
            MPI_Request_free(&r);  // the buffer stays in replies_ until the process ends
        }
    }

    // The wait ran out (or another rank's did): ask every other rank where it is, name the ones this rank waited
    // for, and end the job.
    [[noreturn]] void time_out(double waited_s, double limit_s) {
        const int64_t prober = ending_with_;  // -1: this rank's own deadline ran out
        probe_seq_ = seq_;
        for (int64_t q = 0; q < size_; ++q) {
            if (q == rank_) continue;
            MPI_Request r;
            MPI_Isend(&probe_seq_, 1, MPI_INT64_T, static_cast<int>(q), kProbeTag, ctl_, &r);
            MPI_Request_free(&r);
        }
        struct Answer {
            int64_t seq;
            std::string where;
        };
        std::map<int64_t, Answer> answers;
        const double grace_s = std::clamp(0.25 * limit_s, 0.2, 2.0);
        const Clock::time_point t0 = Clock::now();
        std::string buf;
        while (static_cast<int64_t>(answers.size()) < size_ - 1 && seconds_since(t0) < grace_s) {
            answer_probes();
            int flag = 0;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, kReplyTag, ctl_, &flag, &st);
            if (!flag) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
            }
            int n = 0;
            MPI_Get_count(&st, MPI_BYTE, &n);
            buf.assign(static_cast<size_t>(std::max(n, 0)), '\0');
            MPI_Recv(buf.data(), n, MPI_BYTE, st.MPI_SOURCE, kReplyTag, ctl_, MPI_STATUS_IGNORE);
            const size_t space = buf.find(' ');
            answers[st.MPI_SOURCE] = Answer{std::strtoll(buf.c_str(), nullptr, 10),
                                            space == std::string::npos ? std::string() : buf.substr(space + 1)};
        }
        // Whom this rank waits for: the ranks that did not answer (stopped, hung, computing); else those behind it
        // (still in an earlier collective: waiting for someone themselves); else those ahead of it (a collective
        // that some ranks skipped). A rank in this same collective waits too.
        std::vector<int64_t> silent, behind, ahead;
        std::vector<std::string> details;
        for (int64_t q = 0; q < size_; ++q) {
            if (q == rank_) continue;
            const auto a = answers.find(q);
            if (a == answers.end()) {
                silent.push_back(q);
                details.push_back(fmt::format("rank {} did not answer (stopped, hung, or busy outside MPI)", q));
            } else if (a->second.seq != seq_) {
                (a->second.seq < seq_ ? behind : ahead).push_back(q);
                details.push_back(fmt::format("rank {} is in {} (collective {})", q, a->second.where, a->second.seq));
            }
        }
        const std::vector<int64_t>& named = !silent.empty() ? silent : !behind.empty() ? behind : ahead;
        const std::string whom = named.empty() ? "the other ranks" : ranks_text(named);
        const std::string what =
            fmt::format("waiting for {} in {} ({}, collective {})", whom, describe(comm_context()), op_, seq_);
        constexpr size_t kMaxDetails = 8;  // one line even in a large job
        if (details.size() > kMaxDetails) {
            const size_t more = details.size() - kMaxDetails;
            details.resize(kMaxDetails);
            details.push_back(fmt::format("{} more ranks elsewhere", more));
        }
        const std::string state = details.empty() ? "every rank is in this collective and MPI made no progress"
                                                  : fmt::format("{}", fmt::join(details, "; "));
        const std::string rule =
            deadline_.fixed()
                ? fmt::format("{} {:g} s", flag_of("rank_timeout"), limit_s)
                : fmt::format("{} auto: max({:g} s, {:g} x the slowest step so far, {:.3g} s)", flag_of("rank_timeout"),
                              RankDeadline::kFloorS, RankDeadline::kStepFactor, deadline_.slowest_step_s());
        if (answers.empty()) linger_s_ = 0;  // no other rank is waiting: none will write a line of its own
        if (prober < 0)
            abort(1, fmt::format("{}timed out after {:g} s {}: {}; ending the job ({})\n", prefix(), limit_s, what,
                                 state, rule));
        abort(1, fmt::format("{}rank {} timed out; after {:.1f} s {}: {}; ending the job\n", prefix(), prober, waited_s,
                             what, state));
    }

    int64_t rank_ = 0, size_ = 1, local_rank_ = 0;
    std::string host_;
    MPI_Comm ctl_ = MPI_COMM_NULL;
    RankDeadline deadline_;
    int64_t seq_ = 0;              // collectives begun by this rank (every rank counts the same ones)
    const char* op_ = "MPI_Init";  // the MPI call of the current (or last) collective
    int64_t probe_seq_ = 0;        // the buffer of the probes this rank sends
    int64_t ending_with_ = -1;     // the rank whose probe said it timed out (-1: none)
    std::deque<std::string> replies_;
    double linger_s_ = kAbortLingerS;  // abort(): how long to wait for the other ranks that end too
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
    try {  // rank 0 may still be writing the report: the others wait for it, under the rank deadline
        const ScopedCommContext at_end("the end of the job (every rank waits for the others to finish)");
        world()->barrier();
    } catch (const Error&) {  // an MPI failure at the very end: nothing is left to do but leave
    }
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
            "(apt install libopenmpi-dev openmpi-bin, then scripts/setup.sh) or run one process",
            n));
}

Communicator* process_group() { return nullptr; }
void leave_process_group() {}

#endif

}  // namespace moebench
