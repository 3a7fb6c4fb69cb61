// The ranks of a job analysed by several processes (emo analyze --mpi): each process reads and
// analyses its share of the traces, and the joint replay exchanges only what crosses ranks, the
// collectives' arrival times, plus the per-rank results the report gathers. The analysis code
// sees this interface; tools/emo/mpi_exchange.cc implements it over MPI, and a job analysed in
// one process needs none (nullptr).
//
// The traces are shared out in input order, round robin: trace i is process i % processes()'s.
// So a result gathered from every process (AllGather, in process order) is put back in input
// order with Interleave, and the output is the one process's run's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace emo::analysis {

class JobExchange {
 public:
  virtual ~JobExchange() = default;
  virtual size_t processes() const = 0;
  virtual size_t process() const = 0;  // this one, in [0, processes())

  enum class Reduce { kMax, kSum };
  // `v` (the same length in every process) becomes the element-wise max or sum over all of them.
  virtual void AllReduce(std::vector<int64_t>& v, Reduce op) = 0;
  // Every process's `mine`, in process order.
  virtual std::vector<std::string> AllGather(const std::string& mine) = 0;

  // The input indices (of `n` inputs) this process takes.
  std::vector<size_t> Mine(size_t n) const {
    std::vector<size_t> out;
    for (size_t i = process(); i < n; i += processes()) out.push_back(i);
    return out;
  }
  // Lists gathered in process order (each the process's items in its Mine() order) put back in
  // input order.
  template <typename T>
  static std::vector<T> Interleave(std::vector<std::vector<T>> per_process) {
    std::vector<T> out;
    const size_t p = per_process.size();
    for (size_t k = 0;; ++k) {
      for (size_t q = 0; q < p; ++q) {
        if (k >= per_process[q].size()) return out;
        out.push_back(std::move(per_process[q][k]));
      }
    }
  }
};

// Every process's list (`mine`, in its Mine() order), all of them in input order; `mine` itself
// without an exchange. Items travel as JSON (`to_json(item)`, `from_json(json)`).
template <typename T, typename ToJson, typename FromJson>
std::vector<T> GatherInOrder(JobExchange* x, std::vector<T> mine, ToJson to_json, FromJson from_json) {
  if (x == nullptr) return mine;
  nlohmann::json list = nlohmann::json::array();
  for (const T& item : mine) list.push_back(to_json(item));
  std::vector<std::vector<T>> all;
  for (const std::string& text : x->AllGather(list.dump())) {
    all.emplace_back();
    for (auto& item : nlohmann::json::parse(text)) all.back().push_back(from_json(std::move(item)));
  }
  return JobExchange::Interleave(std::move(all));
}
// The same for items nlohmann converts itself.
template <typename T>
std::vector<T> GatherInOrder(JobExchange* x, std::vector<T> mine) {
  return GatherInOrder(
      x, std::move(mine), [](const T& item) { return nlohmann::json(item); },
      [](const nlohmann::json& j) { return j.get<T>(); });
}

}  // namespace emo::analysis
