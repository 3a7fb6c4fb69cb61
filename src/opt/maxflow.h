// Internal: maximum flow / minimum cut on real capacities (FIFO push-relabel with the gap
// heuristic and global relabelling), reused across min-cut iterations. Infinite capacities
// must be given as a finite bound larger than the sum of the finite ones; a flow reaching that
// bound means no finite cut exists.
#pragma once

#include <cstdint>
#include <vector>

namespace emo::opt {

class MaxFlow {
 public:
  void Reset(uint32_t num_nodes);
  // Adds u→v with capacity `cap` (and its residual twin); returns the arc index.
  uint32_t AddArc(uint32_t u, uint32_t v, double cap);
  // The value of a maximum s→t flow (phase one of push-relabel: a maximum preflow).
  double Run(uint32_t s, uint32_t t);
  // After Run: side[v] = 1 for the nodes that cannot reach t in the residual graph — the
  // source side of the minimum cut closest to t.
  void SourceSide(uint32_t t, std::vector<char>& side);

  void set_epsilon(double eps) { eps_ = eps; }

 private:
  void GlobalRelabel(uint32_t t);
  void Push(uint32_t a, double amount);

  uint32_t n_ = 0;
  std::vector<uint32_t> first_, next_, to_;  // adjacency lists (arc index lists)
  std::vector<double> cap_;                  // residual capacity per arc
  std::vector<double> excess_;
  std::vector<uint32_t> height_, count_, current_;
  std::vector<uint32_t> queue_;
  std::vector<char> active_;
  uint32_t s_ = 0, t_ = 0;
  double eps_ = 1e-12;
};

}  // namespace emo::opt
