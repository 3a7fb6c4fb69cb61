#include "emo/report/perfetto.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emo/base/file.h"

namespace emo::report {
namespace {

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
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
}

std::string Us(TimeNs ns) { return fmt::format("{}.{:03}", ns / 1000, std::abs(ns % 1000)); }

}  // namespace

Status WritePerfetto(const analysis::TraceAnalysis& a, const std::string& path) {
  const auto& g = *a.graph;
  const auto& t = *a.trace;
  const auto& n = g.nodes();
  std::vector<bool> critical(n.size(), false);
  for (auto v : a.window_path.nodes) critical[v.value()] = true;
  TimeNs origin = INT64_MAX;
  for (TimeNs s : n.start) origin = std::min(origin, s);

  std::string out;
  out.reserve(n.size() * 160 + 1024);
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"emo analyze\",\"source\":\"";
  AppendEscaped(out, t.meta.source_path);
  out += "\"},\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  // Track names.
  for (const auto& th : t.threads) {
    sep();
    out += fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"thread {}"}}}})",
                       th.pid, th.tid, th.tid);
  }
  for (const auto& st : t.streams) {
    sep();
    out += fmt::format(R"({{"ph":"M","name":"process_name","pid":"GPU {}","args":{{"name":"GPU {}"}}}})",
                       st.device, st.device);
    sep();
    out += fmt::format(R"({{"ph":"M","name":"thread_name","pid":"GPU {}","tid":{},"args":{{"name":"stream {}"}}}})",
                       st.device, st.stream, st.stream);
  }
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] == graph::NodeKind::kCpuInterval) continue;
    sep();
    const bool gpu = n.kind[v] == graph::NodeKind::kGpuOp;
    std::string_view name = gpu ? t.Name(t.gpu.name[n.ref[v]]) : t.Name(t.cpu.name[n.ref[v]]);
    out += R"({"ph":"X","name":")";
    AppendEscaped(out, name);
    out += fmt::format(R"(","cat":"{}",)", critical[v] ? "critical" : (gpu ? "gpu_op" : "cuda_api"));
    if (gpu) {
      const auto& st = t.streams[n.resource[v]];
      out += fmt::format(R"("pid":"GPU {}","tid":{},)", st.device, st.stream);
    } else {
      const auto& th = t.threads[n.resource[v]];
      out += fmt::format(R"("pid":{},"tid":{},)", th.pid, th.tid);
    }
    out += fmt::format(R"("ts":{},"dur":{},"args":{{"slack_us":{:.3f},"critical":{},"iteration":{}}}}})",
                       Us(n.start[v] - origin), Us(n.end[v] - n.start[v]), NsToUs(a.slack.slack[v]),
                       critical[v] ? 1 : 0, a.iterations.node_iteration[v]);
  }
  // Slack counter per GPU: at each op start, the smallest slack among the ops then running.
  std::vector<std::vector<uint32_t>> per_device;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != graph::NodeKind::kGpuOp || !a.window[v]) continue;
    auto dev = static_cast<size_t>(std::max(0, t.streams[n.resource[v]].device));
    if (per_device.size() <= dev) per_device.resize(dev + 1);
    per_device[dev].push_back(v);
  }
  for (size_t dev = 0; dev < per_device.size(); ++dev) {
    auto& ops = per_device[dev];
    std::sort(ops.begin(), ops.end(), [&](uint32_t x, uint32_t y) { return n.start[x] < n.start[y]; });
    for (uint32_t v : ops) {
      sep();
      out += fmt::format(R"({{"ph":"C","name":"slack_us","pid":"GPU {}","ts":{},"args":{{"slack_us":{:.3f}}}}})",
                         dev, Us(n.start[v] - origin), NsToUs(a.slack.slack[v]));
    }
  }
  out += "\n]}\n";
  return WriteFile(path, out);
}

}  // namespace emo::report
