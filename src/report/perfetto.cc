#include "emo/report/perfetto.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "emo/analysis/iterations.h"
#include "emo/analysis/slack.h"
#include "emo/base/file.h"

namespace emo::report {
namespace {

using analysis::PathCategory;
using analysis::TraceAnalysis;
using graph::NodeKind;

// JSON string escaping for names (kernel names carry quotes, backslashes, angle brackets).
void AppendEscaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
}

// Microseconds with the nanosecond fraction, exact (no floating point on the way).
void AppendUs(std::string& out, TimeNs ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

// The events of the file under construction. Every process and track gets a fresh id, so pids
// and tids never collide across ranks (a rank's own pid/tid numbers may repeat in another file).
class Writer {
 public:
  explicit Writer(TimeNs origin) : origin_(origin) { out_.reserve(1 << 20); }

  int64_t NewId() { return next_id_++; }
  uint64_t NewFlowId() { return next_flow_++; }

  void ProcessName(int64_t pid, std::string_view name) { Metadata("process_name", pid, pid, name); }
  void ThreadName(int64_t pid, int64_t tid, std::string_view name) { Metadata("thread_name", pid, tid, name); }

  // A complete ("X") slice; `args` is the inside of the args object ("" for none).
  void Slice(int64_t pid, int64_t tid, std::string_view name, std::string_view cat, TimeNs start, TimeNs end,
             std::string_view args) {
    Begin();
    out_ += R"({"ph":"X","name":")";
    AppendEscaped(out_, name);
    fmt::format_to(std::back_inserter(out_), R"(","cat":"{}","pid":{},"tid":{},"ts":)", cat, pid, tid);
    AppendUs(out_, start - origin_);
    out_ += ",\"dur\":";
    AppendUs(out_, std::max<TimeNs>(0, end - start));
    if (!args.empty()) {
      out_ += ",\"args\":{";
      out_ += args;
      out_ += '}';
    }
    out_ += '}';
  }

  // A sample of the process-scoped counter "<name> <key>".
  void Counter(int64_t pid, std::string_view name, std::string_view key, TimeNs time, double value) {
    Begin();
    fmt::format_to(std::back_inserter(out_), R"({{"ph":"C","name":"{}","pid":{},"tid":{},"ts":)", name, pid, pid);
    AppendUs(out_, time - origin_);
    fmt::format_to(std::back_inserter(out_), R"(,"args":{{"{}":{:.3f}}}}})", key, value);
  }

  // One end of a flow (ph "s" or "f"); both bind to the slice enclosing `time` on their track.
  void Flow(char ph, uint64_t id, int64_t pid, int64_t tid, TimeNs time) {
    Begin();
    fmt::format_to(std::back_inserter(out_), R"({{"ph":"{}","id":{},"name":"critical path","cat":"critical_path",)"
                   R"("pid":{},"tid":{},"ts":)", ph, id, pid, tid);
    AppendUs(out_, time - origin_);
    out_ += ph == 'f' ? R"(,"bp":"e"})" : "}";
  }

  std::string Finish(const nlohmann::json& other_data) {
    std::string head = "{\"otherData\":" + other_data.dump() + ",\"traceEvents\":[\n";
    out_ += "\n]}\n";
    return head + out_;
  }

 private:
  void Begin() {
    if (!first_) out_ += ",\n";
    first_ = false;
  }
  void Metadata(std::string_view what, int64_t pid, int64_t tid, std::string_view name) {
    Begin();
    fmt::format_to(std::back_inserter(out_), R"({{"ph":"M","name":"{}","pid":{},"tid":{},"args":{{"name":")", what,
                   pid, tid);
    AppendEscaped(out_, name);
    out_ += "\"}}";
  }

  TimeNs origin_;
  std::string out_;
  bool first_ = true;
  int64_t next_id_ = 1;
  uint64_t next_flow_ = 1;
};

// A track of slices that must not overlap (graph nodes keep their exact times): a slice that
// overlaps the ones before it goes to the first lane where it fits, a track of its own. Lanes
// are created, and named, on first use; slices must come in start order.
class LaneTrack {
 public:
  LaneTrack(int64_t pid, std::string name) : pid_(pid), name_(std::move(name)) {}
  int64_t pid() const { return pid_; }

  // The tid of the lane that takes [start, end).
  int64_t Place(Writer& w, TimeNs start, TimeNs end) {
    for (size_t k = 0; k < lane_end_.size(); ++k) {
      if (lane_end_[k] <= start) {
        lane_end_[k] = std::max(start, end);
        return tids_[k];
      }
    }
    const int64_t tid = w.NewId();
    w.ThreadName(pid_, tid, tids_.empty() ? name_ : fmt::format("{} (overlap lane {})", name_, tids_.size() + 1));
    tids_.push_back(tid);
    lane_end_.push_back(std::max(start, end));
    return tid;
  }

 private:
  int64_t pid_;
  std::string name_;
  std::vector<int64_t> tids_;
  std::vector<TimeNs> lane_end_;
};

bool IsRecordedRange(trace::CpuKind k) { return k == trace::CpuKind::kOp || k == trace::CpuKind::kAnnotation; }

// One rank, prepared: its recorded CPU ranges mapped onto the timeline and its iteration bounds.
struct RankView {
  const TraceAnalysis* a = nullptr;
  std::vector<uint32_t> ranges;             // CpuEventIds of the mapped operators and annotations
  std::vector<TimeNs> range_start, range_end;  // on the timeline, parallel to `ranges`
  size_t left_out = 0;                      // recorded ranges of threads without graph nodes
  TimeNs first_start = 0;                   // iteration bounds on the timeline
  std::vector<TimeNs> iteration_ends;
  TimeNs earliest = 0;                      // the earliest time written for the rank
};

RankView Prepare(const TraceAnalysis& a) {
  RankView r;
  r.a = &a;
  const auto& g = *a.graph;
  const auto& t = *a.trace;
  const auto& s = a.timeline;
  const auto thread_nodes = analysis::CpuNodesByThread(g);
  for (uint32_t i = 0; i < t.cpu.size(); ++i) {
    if (!IsRecordedRange(t.cpu.kind[i])) continue;
    const auto& nodes = thread_nodes[t.cpu.thread[i].value()];
    if (nodes.empty()) {
      ++r.left_out;
      continue;
    }
    r.ranges.push_back(i);
    r.range_start.push_back(analysis::MapOnThread(g, nodes, s, t.cpu.start[i], analysis::InNode::kScale));
    r.range_end.push_back(analysis::MapOnThread(g, nodes, s, t.cpu.end[i], analysis::InNode::kScale));
  }
  r.first_start = analysis::FirstIterationStart(g, a.iterations, s);
  r.iteration_ends = analysis::IterationEnds(g, a.iterations, s);
  r.earliest = r.first_start;
  for (TimeNs x : s.start) r.earliest = std::min(r.earliest, x);
  for (TimeNs x : r.range_start) r.earliest = std::min(r.earliest, x);
  return r;
}

std::string RankLabel(const TraceAnalysis& a, size_t index) {
  return fmt::format("rank {}", a.trace->meta.rank >= 0 ? a.trace->meta.rank : static_cast<int64_t>(index));
}

std::string TimelineLabel(const TraceAnalysis& a) {
  if (!a.corrected()) return "traced timeline";
  return fmt::format("corrected timeline (profiler overhead removed: CPU time x{:.3f}, confidence {})",
                     a.overhead.cpu_scale, a.overhead.confidence);
}

std::string ThreadLabel(const trace::ThreadInfo& th) {
  return th.name.empty() ? fmt::format("thread {}", th.tid) : th.name;  // Kineto's names hold the tid
}

std::string_view CategoryName(PathCategory c) {
  switch (c) {
    case PathCategory::kGpuCompute: return "gpu";
    case PathCategory::kCommunication: return "comm";
    case PathCategory::kCpu: return "cpu";
    default: return "launch";
  }
}

// The device a stream's ops count for (GpuSlackWindows puts unknown devices on 0).
int32_t DeviceOf(const trace::StreamInfo& st) { return std::max(0, st.device); }

// Recorded CPU operators and annotations of every thread on their own tracks. The profiler
// nests them and the mapping keeps their order; a range that would still stick out of the
// range it starts in (an unmatched pair in the trace) is cut at that range's end, since a
// Chrome-JSON track must nest.
void WriteCpuRanges(Writer& w, const RankView& r, int64_t pid) {
  const auto& t = *r.a->trace;
  std::vector<int64_t> tid(t.threads.size(), 0);
  std::vector<std::vector<TimeNs>> open(t.threads.size());  // ends of the enclosing ranges
  for (size_t k = 0; k < r.ranges.size(); ++k) {
    const uint32_t i = r.ranges[k];
    const uint32_t th = t.cpu.thread[i].value();
    if (tid[th] == 0) {
      tid[th] = w.NewId();
      w.ThreadName(pid, tid[th], ThreadLabel(t.threads[th]) + " operators");
    }
    auto& stack = open[th];
    const TimeNs start = r.range_start[k];
    while (!stack.empty() && stack.back() <= start) stack.pop_back();
    TimeNs end = std::max(start, r.range_end[k]);
    if (!stack.empty()) end = std::min(end, stack.back());
    stack.push_back(end);
    w.Slice(pid, tid[th], t.Name(t.cpu.name[i]), t.cpu.kind[i] == trace::CpuKind::kOp ? "cpu_op" : "user_annotation",
            start, end, "");
  }
}

// Per device: the smallest slack among the analysed ops running, sampled where it changes.
// While the device is idle the last value holds (idle time costs nothing at any clock).
void WriteSlackCounters(Writer& w, const TraceAnalysis& a, const std::map<int32_t, int64_t>& device_pid) {
  const auto& n = a.graph->nodes();
  const auto& t = *a.trace;
  const auto& s = a.timeline;
  struct Ev {
    TimeNs time;
    bool starts;
    TimeNs slack;
  };
  std::map<int32_t, std::vector<Ev>> per_device;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp || !a.window[v]) continue;
    auto& evs = per_device[DeviceOf(t.streams[n.resource[v]])];
    evs.push_back({s.start[v], true, a.slack.slack[v]});
    evs.push_back({s.end[v], false, a.slack.slack[v]});
  }
  for (auto& [device, evs] : per_device) {
    // Ends before starts at one time: back-to-back ops do not overlap.
    std::sort(evs.begin(), evs.end(), [](const Ev& x, const Ev& y) {
      return x.time != y.time ? x.time < y.time : x.starts < y.starts;
    });
    std::multiset<TimeNs> running;
    TimeNs last = -1;
    for (size_t i = 0; i < evs.size();) {
      const TimeNs time = evs[i].time;
      for (; i < evs.size() && evs[i].time == time; ++i) {
        if (evs[i].starts) {
          running.insert(evs[i].slack);
        } else {
          running.erase(running.find(evs[i].slack));
        }
      }
      if (running.empty() || *running.begin() == last) continue;
      last = *running.begin();
      w.Counter(device_pid.at(device), "slack", "min_running_op_us", time, NsToUs(last));
    }
  }
}

// Writes one rank; returns its entry of otherData.ranks.
nlohmann::json WriteRank(Writer& w, const RankView& r, size_t index, const PerfettoOptions& options) {
  const TraceAnalysis& a = *r.a;
  const auto& g = *a.graph;
  const auto& t = *a.trace;
  const auto& n = g.nodes();
  const auto& s = a.timeline;
  const std::string label = RankLabel(a, index);
  const std::string file = std::filesystem::path(t.meta.source_path).filename().string();
  const std::string timeline = TimelineLabel(a);

  const int64_t cpu_pid = w.NewId();
  w.ProcessName(cpu_pid, fmt::format("{} CPU, {}, {}", label, file, timeline));
  std::map<int32_t, int64_t> device_pid;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] == NodeKind::kGpuOp) device_pid.try_emplace(DeviceOf(t.streams[n.resource[v]]), 0);
  }
  for (const auto& gs : a.gpus) device_pid.try_emplace(gs.device, 0);
  for (auto& [device, pid] : device_pid) {
    pid = w.NewId();
    w.ProcessName(pid, fmt::format("{} GPU {}, {}, {}", label, device, file, timeline));
  }

  std::vector<uint8_t> on_path(n.size(), 0), on_steady_path(n.size(), 0);
  for (auto v : a.window_path.nodes) on_path[v.value()] = 1;
  for (auto v : a.steady_path.nodes) on_steady_path[v.value()] = 1;
  std::string args;

  // Iterations: from the previous iteration's end (the first: its annotation start) to its end.
  LaneTrack iterations(cpu_pid, "iterations");
  const auto& cp = a.steady_path;
  for (size_t i = 0; i < a.iterations.iterations.size(); ++i) {
    const TimeNs start = i == 0 ? r.first_start : r.iteration_ends[i - 1];
    const TimeNs end = std::max(start, r.iteration_ends[i]);
    const bool steady = i == a.steady;
    args = fmt::format(R"("index":{},"time_us":{:.3f})", i, NsToUs(a.timeline_times[i]));
    if (steady) {
      args += fmt::format(R"(,"steady":1,"critical_path_us":{:.3f})", NsToUs(cp.total()));
      for (auto c : {PathCategory::kGpuCompute, PathCategory::kCommunication, PathCategory::kCpu,
                     PathCategory::kLaunch}) {
        args += fmt::format(R"(,"critical_path_{}_pct":{:.1f})", CategoryName(c), 100.0 * cp.Share(c));
      }
    }
    w.Slice(cpu_pid, iterations.Place(w, start, end), a.iterations.iterations[i].name,
            steady ? "iteration,steady" : "iteration", start, end, args);
  }

  // The critical path of the analysed iterations on a track of its own (its nodes overlap
  // where a launch or a sync joins a thread and a stream: those spill into a second lane).
  std::vector<uint32_t> path;
  for (auto v : a.window_path.nodes) path.push_back(v.value());
  std::vector<uint32_t> by_start = path;
  std::stable_sort(by_start.begin(), by_start.end(), [&](uint32_t x, uint32_t y) { return s.start[x] < s.start[y]; });
  auto node_name = [&](uint32_t v) -> std::string_view {
    switch (n.kind[v]) {
      case NodeKind::kGpuOp: return t.Name(t.gpu.name[n.ref[v]]);
      case NodeKind::kApiCall: return t.Name(t.cpu.name[n.ref[v]]);
      default: return "CPU work";
    }
  };
  LaneTrack path_track(cpu_pid, "critical path");
  for (uint32_t v : by_start) {
    args = fmt::format(R"("node":{},"category":"{}")", v, CategoryName(analysis::CategoryOf(g, graph::NodeId(v))));
    w.Slice(cpu_pid, path_track.Place(w, s.start[v], s.end[v]), node_name(v), "critical_path", s.start[v], s.end[v],
            args);
  }

  // Graph nodes on their thread or stream tracks, in start order (lanes need it).
  std::vector<LaneTrack> thread_tracks, stream_tracks;
  for (const auto& th : t.threads) thread_tracks.emplace_back(cpu_pid, ThreadLabel(th) + " API calls, CPU work");
  for (const auto& st : t.streams) {
    auto it = device_pid.find(DeviceOf(st));
    stream_tracks.emplace_back(it == device_pid.end() ? 0 : it->second, fmt::format("stream {}", st.stream));
  }
  std::vector<uint32_t> order(n.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return s.start[x] != s.start[y] ? s.start[x] < s.start[y] : s.end[x] > s.end[y];
  });
  std::vector<int64_t> node_pid(n.size()), node_tid(n.size());
  std::string cat;
  for (uint32_t v : order) {
    const NodeKind kind = n.kind[v];
    LaneTrack& track = kind == NodeKind::kGpuOp ? stream_tracks[n.resource[v]] : thread_tracks[n.resource[v]];
    cat = kind == NodeKind::kGpuOp ? "gpu_op" : kind == NodeKind::kApiCall ? "cuda_api" : "cpu_work";
    if (on_path[v]) {
      cat += ",critical";
    } else if (a.window[v] && a.slack.slack[v] < options.near_critical_slack_ns) {
      cat += ",near_critical";
    }
    node_pid[v] = track.pid();
    node_tid[v] = track.Place(w, s.start[v], s.end[v]);
    args = fmt::format(R"("node":{},"iteration":{},"critical":{})", v, a.iterations.node_iteration[v],
                       static_cast<int>(on_path[v]));
    if (on_steady_path[v]) args += R"(,"steady_path":1)";
    if (a.window[v]) args += fmt::format(R"(,"slack_us":{:.3f})", NsToUs(a.slack.slack[v]));
    w.Slice(node_pid[v], node_tid[v], node_name(v), cat, s.start[v], s.end[v], args);
  }

  WriteCpuRanges(w, r, cpu_pid);

  // GPU slack windows (every running op has slack above the analysis' threshold).
  for (const auto& gs : a.gpus) {
    LaneTrack windows(device_pid.at(gs.device), "slack windows");
    for (const auto& win : gs.windows) {
      w.Slice(windows.pid(), windows.Place(w, win.start, win.end), "slack window", "slack_window", win.start, win.end,
              "");
    }
  }
  WriteSlackCounters(w, a, device_pid);

  // Flows along the critical path: each binds to the slice of its node (the middle of it).
  for (size_t i = 1; i < path.size(); ++i) {
    const uint32_t u = path[i - 1], v = path[i];
    const uint64_t id = w.NewFlowId();
    w.Flow('s', id, node_pid[u], node_tid[u], s.start[u] + (s.end[u] - s.start[u]) / 2);
    w.Flow('f', id, node_pid[v], node_tid[v], s.start[v] + (s.end[v] - s.start[v]) / 2);
  }

  const auto& o = a.overhead;
  nlohmann::json j = {{"rank", a.trace->meta.rank},
                      {"label", label},
                      {"source", t.meta.source_path},
                      {"pid", cpu_pid},
                      {"timeline", a.corrected() ? "corrected" : "traced"},
                      {"correction", analysis::OverheadSourceName(o.source)},
                      {"cpu_scale", o.cpu_scale},
                      {"steady_iteration", a.iterations.iterations[a.steady].name},
                      {"iteration_time_us", NsToUs(a.timeline_ns())},
                      {"critical_path_nodes", path.size()},
                      {"cpu_ranges_left_out", r.left_out}};
  if (a.corrected()) {
    j["confidence"] = o.confidence;
    j["note"] = o.note;
  }
  return j;
}

}  // namespace

std::string PerfettoJson(std::span<const analysis::TraceAnalysis> ranks, const PerfettoOptions& options) {
  std::vector<RankView> views;
  TimeNs origin = INT64_MAX;
  for (const auto& a : ranks) {
    views.push_back(Prepare(a));
    origin = std::min(origin, views.back().earliest);
  }
  if (views.empty()) origin = 0;
  Writer w(origin);
  nlohmann::json meta = nlohmann::json::array();
  for (size_t k = 0; k < views.size(); ++k) meta.push_back(WriteRank(w, views[k], k, options));
  std::string timeline = "none";
  for (const auto& a : ranks) {
    const std::string one = a.corrected() ? "corrected" : "traced";
    timeline = timeline == "none" || timeline == one ? one : "per rank";
  }
  return w.Finish({{"generator", "emo analyze --perfetto"},
                   {"timeline", timeline},
                   {"time_base", "ts: microseconds after origin_ns, on each rank's analysis timeline"},
                   {"origin_ns", origin},
                   {"ranks", meta}});
}

Status WritePerfetto(std::span<const analysis::TraceAnalysis> ranks, const std::string& path,
                     const PerfettoOptions& options) {
  return WriteFile(path, PerfettoJson(ranks, options));
}

}  // namespace emo::report
