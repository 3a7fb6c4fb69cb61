#include "maxflow.h"

#include <algorithm>
#include <limits>

namespace emo::opt {

namespace {
constexpr uint32_t kNil = std::numeric_limits<uint32_t>::max();
}  // namespace

void MaxFlow::Reset(uint32_t num_nodes) {
  n_ = num_nodes;
  first_.assign(n_, kNil);
  next_.clear();
  to_.clear();
  cap_.clear();
}

uint32_t MaxFlow::AddArc(uint32_t u, uint32_t v, double cap) {
  const uint32_t a = static_cast<uint32_t>(to_.size());
  to_.push_back(v);
  cap_.push_back(cap);
  next_.push_back(first_[u]);
  first_[u] = a;
  to_.push_back(u);
  cap_.push_back(0.0);
  next_.push_back(first_[v]);
  first_[v] = a + 1;
  return a;
}

void MaxFlow::Push(uint32_t a, double amount) {
  const uint32_t v = to_[a], u = to_[a ^ 1u];
  cap_[a] -= amount;
  cap_[a ^ 1u] += amount;
  excess_[u] -= amount;
  excess_[v] += amount;
  if (!active_[v] && v != s_ && v != t_ && height_[v] < n_) {
    active_[v] = 1;
    queue_.push_back(v);
  }
}

void MaxFlow::GlobalRelabel(uint32_t t) {
  // Exact distances to t over residual arcs (reverse BFS); nodes that cannot reach t get n.
  height_.assign(n_, n_);
  count_.assign(2 * static_cast<size_t>(n_) + 1, 0);
  std::vector<uint32_t> bfs{t};
  height_[t] = 0;
  for (size_t h = 0; h < bfs.size(); ++h) {
    const uint32_t v = bfs[h];
    for (uint32_t a = first_[v]; a != kNil; a = next_[a]) {
      const uint32_t u = to_[a];  // arc a is v→u; its twin u→v has residual cap_[a ^ 1]
      if (cap_[a ^ 1u] > eps_ && height_[u] == n_ && u != s_) {
        height_[u] = height_[v] + 1;
        bfs.push_back(u);
      }
    }
  }
  height_[s_] = n_;
  for (uint32_t v = 0; v < n_; ++v) {
    ++count_[height_[v]];
    current_[v] = first_[v];
  }
}

double MaxFlow::Run(uint32_t s, uint32_t t) {
  s_ = s;
  t_ = t;
  excess_.assign(n_, 0.0);
  active_.assign(n_, 0);
  current_.assign(n_, kNil);
  queue_.clear();
  GlobalRelabel(t);
  for (uint32_t a = first_[s]; a != kNil; a = next_[a]) {
    if (a % 2 == 0 && cap_[a] > eps_) {
      excess_[s] += cap_[a];
      Push(a, cap_[a]);
    }
  }
  size_t work = 0;
  const size_t relabel_every = 2 * static_cast<size_t>(n_) + to_.size() / 8;
  for (size_t qh = 0; qh < queue_.size(); ++qh) {
    const uint32_t u = queue_[qh];
    active_[u] = 0;
    if (height_[u] >= n_) continue;
    while (excess_[u] > eps_ && height_[u] < n_) {
      uint32_t& a = current_[u];
      if (a == kNil) {
        // Relabel (with the gap heuristic).
        const uint32_t old = height_[u];
        uint32_t best = 2 * n_;
        for (uint32_t b = first_[u]; b != kNil; b = next_[b]) {
          if (cap_[b] > eps_) best = std::min(best, height_[to_[b]] + 1);
        }
        --count_[old];
        if (count_[old] == 0 && old < n_) {
          for (uint32_t v = 0; v < n_; ++v) {
            if (height_[v] > old && height_[v] < n_) {
              --count_[height_[v]];
              height_[v] = n_;
              ++count_[n_];
            }
          }
          best = n_;
        }
        height_[u] = std::min(best, n_);
        ++count_[height_[u]];
        a = first_[u];
        work += 12;
        continue;
      }
      const uint32_t v = to_[a];
      if (cap_[a] > eps_ && height_[u] == height_[v] + 1) {
        Push(a, std::min(excess_[u], cap_[a]));
      } else {
        a = next_[a];
      }
      ++work;
    }
    if (work > relabel_every) {
      work = 0;
      GlobalRelabel(t);
      // Re-activate nodes with excess that can still reach t.
      for (uint32_t v = 0; v < n_; ++v) {
        if (v != s && v != t && excess_[v] > eps_ && height_[v] < n_ && !active_[v]) {
          active_[v] = 1;
          queue_.push_back(v);
        }
      }
    }
  }
  return excess_[t];
}

void MaxFlow::SourceSide(uint32_t t, std::vector<char>& side) {
  side.assign(n_, 1);
  std::vector<uint32_t> bfs{t};
  side[t] = 0;
  for (size_t h = 0; h < bfs.size(); ++h) {
    const uint32_t v = bfs[h];
    for (uint32_t a = first_[v]; a != kNil; a = next_[a]) {
      const uint32_t u = to_[a];
      if (cap_[a ^ 1u] > eps_ && side[u]) {
        side[u] = 0;
        bfs.push_back(u);
      }
    }
  }
}

}  // namespace emo::opt
