// SPDX-License-Identifier: Apache-2.0
// NCCL between the GPUs of an expert-parallel job (device buffers): all-to-all-v as grouped ncclSend/ncclRecv,
// the unique id broadcast over the job's MPI communicator, and no hang when a peer fails: the wait for each
// collective polls ncclCommGetAsyncError and aborts the communicator (ncclCommAbort) on an error or past the rank
// deadline, then the whole job (MPI_Abort). Built with CUDA, NCCL and MPI only (comm/ in CMakeLists.txt); the cuda
// backend's expert-parallel path uses it (GPU issue).
#pragma once
#include "comm/communicator.hpp"

#include <memory>

namespace moebench {

/// Joins the NCCL communicator of every rank of `host_comm` on the current CUDA device (the caller selected the
/// device of its local rank). The collectives that are not all-to-all (gathers, broadcasts) go through host_comm.
/// How long one collective may take before the job is ended (a peer that died never answers) is host_comm's rank
/// deadline (--rank-timeout), as for every other collective of the job.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host_comm);

}  // namespace moebench
