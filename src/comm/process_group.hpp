// SPDX-License-Identifier: Apache-2.0
// This process's place in a job started by a launcher (mpirun, srun): detected from the launcher's environment,
// joined once at start-up, left at exit. Without a launcher moebench is one process and nothing here is needed.
#pragma once
#include "comm/communicator.hpp"

#include <string>

namespace moebench {

/// The launcher's world size from its environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE, SLURM_STEP_NUM_TASKS);
/// 1 when no launcher started this process.
int64_t launcher_world_size();

/// Joins the job when a launcher started this process (MPI_Init_thread); a no-op otherwise. Throws ConfigError
/// when a launcher started several processes but this build has no MPI (the fix: rebuild with libopenmpi-dev).
void join_process_group(int* argc, char*** argv);

/// The job's communicator; nullptr in a single process.
Communicator* process_group();

/// Leaves the job (MPI_Finalize) after every rank got here; a no-op without one.
void leave_process_group();

/// Whether this process writes reports and prints summaries: a single process, or rank 0 of a job.
bool writes_outputs();
/// "rank R of N (host): " in a job, "" in a single process: the start of every error line.
std::string rank_prefix();

/// Whether this build can run as several processes (MPI compiled in), and with what.
bool mpi_built();
std::string mpi_library();

}  // namespace moebench
