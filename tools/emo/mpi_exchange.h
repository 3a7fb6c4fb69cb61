// `emo analyze --mpi`: the job's processes as an analysis::JobExchange over MPI (Debian's Open
// MPI). Only built where CMake finds MPI; elsewhere StartMpi says so.
#pragma once

#include <memory>
#include <string>

#include "emo/analysis/job_exchange.h"

namespace emo::cli {

// MPI_Init (MPI_Finalize when the exchange is destroyed); nullptr with `error` when this emo was
// built without MPI.
std::unique_ptr<analysis::JobExchange> StartMpi(std::string* error);

}  // namespace emo::cli
