#include "mpi_exchange.h"

#ifdef EMO_HAVE_MPI
#include <mpi.h>

#include <limits>
#include <stdexcept>
#endif

namespace emo::cli {

#ifdef EMO_HAVE_MPI
namespace {

// Every MPI call here runs under MPI_ERRORS_ARE_FATAL (MPI_COMM_WORLD's default): a failure
// ends the job with MPI's own message.
class MpiExchange final : public analysis::JobExchange {
 public:
  MpiExchange() {
    MPI_Init(nullptr, nullptr);
    int size = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_ = static_cast<size_t>(size);
    rank_ = static_cast<size_t>(rank);
  }
  ~MpiExchange() override { MPI_Finalize(); }
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;

  size_t processes() const override { return size_; }
  size_t process() const override { return rank_; }

  void AllReduce(std::vector<int64_t>& v, Reduce op) override {
    MPI_Allreduce(MPI_IN_PLACE, v.data(), Count(v.size()), MPI_INT64_T, op == Reduce::kMax ? MPI_MAX : MPI_SUM,
                  MPI_COMM_WORLD);
  }

  std::vector<std::string> AllGather(const std::string& mine) override {
    const int n = Count(mine.size());
    std::vector<int> sizes(size_), offsets(size_);
    MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
    size_t total = 0;
    for (size_t q = 0; q < size_; ++q) {
      offsets[q] = Count(total);
      total += static_cast<size_t>(sizes[q]);
    }
    std::string all(total, '\0');
    MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (size_t q = 0; q < size_; ++q) {
      out.push_back(all.substr(static_cast<size_t>(offsets[q]), static_cast<size_t>(sizes[q])));
    }
    return out;
  }

 private:
  // MPI counts are int: a larger exchange (2 GiB of results) is a bug, not a job to cut up.
  static int Count(size_t n) {
    if (n > static_cast<size_t>(std::numeric_limits<int>::max())) throw std::length_error("MPI exchange over 2 GiB");
    return static_cast<int>(n);
  }
  size_t size_ = 1, rank_ = 0;
};

}  // namespace

std::unique_ptr<analysis::JobExchange> StartMpi(std::string* /*error*/) { return std::make_unique<MpiExchange>(); }
#else
std::unique_ptr<analysis::JobExchange> StartMpi(std::string* error) {
  *error = "--mpi: this emo was built without MPI (install Debian's libopenmpi-dev and openmpi-bin, then rebuild)";
  return nullptr;
}
#endif

}  // namespace emo::cli
