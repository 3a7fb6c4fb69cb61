// Every column and fact of a Trace as text (names resolved), to compare two Traces in one
// comparison: the piecewise Kineto reader against the whole one (tests/trace/
// kineto_piecewise_test.cc, fuzz/kineto_json_piecewise_fuzzer.cc).
#pragma once

#include <map>
#include <string>

#include "emo/trace/trace.h"

namespace emo::trace {

inline std::string Fingerprint(const Trace& t) {
  std::string s;
  auto add = [&s](auto... v) {
    ((s += std::to_string(v), s += ','), ...);
    s += '\n';
  };
  const TraceMeta& m = t.meta;
  s += m.source_path + m.format + m.backend + m.first_dropped_gpu_op + "\n";
  for (const auto& d : m.device_names) s += d + ";";
  add(m.rank, m.world_size, m.cuda_runtime_version, m.cuda_driver_version, m.cupti_version, m.record_shapes,
      m.with_stack, m.has_cuda_sync, m.rocm, m.base_time_ns, m.raw_events);
  for (const auto& th : t.threads) add(th.pid, th.tid), s += th.name + "\n";
  for (const auto& st : t.streams) add(st.device, st.stream);
  const auto& c = t.cpu;
  for (size_t i = 0; i < c.size(); ++i) {
    s += t.Name(c.name[i]);
    add(c.thread[i].value(), static_cast<int>(c.kind[i]), c.start[i], c.end[i], c.correlation[i], c.external_id[i],
        c.cbid[i]);
  }
  const auto& g = t.gpu;
  for (size_t i = 0; i < g.size(); ++i) {
    s += t.Name(g.name[i]);
    const LaunchConfig& l = g.launch[i];
    add(static_cast<int>(g.kind[i]), g.stream[i].value(), g.start[i], g.end[i], g.correlation[i], g.external_id[i],
        l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.registers_per_thread, l.shared_memory,
        g.bytes[i], g.graph_id[i], g.collective[i].valid() ? g.collective[i].value() : -1);
  }
  const auto& y = t.syncs;
  for (size_t i = 0; i < y.size(); ++i) {
    add(static_cast<int>(y.kind[i]), y.device[i], y.stream[i], y.start[i], y.end[i], y.correlation[i],
        y.wait_on_stream[i], y.wait_on_record_corr[i], y.event_id[i]);
  }
  const auto& e = t.cuda_events;
  for (size_t i = 0; i < e.size(); ++i) {
    add(e.event_id[i], e.device[i], e.stream[i], e.correlation[i], e.start[i], e.end[i]);
  }
  for (const auto& a : t.gpu_annotations) s += t.Name(a.name), add(a.stream.value(), a.start, a.end);
  for (const auto& k : t.collectives) {
    s += k.name + k.process_group + k.pg_ranks + k.dtype;
    add(k.group_size, k.seq, k.in_nelems, k.out_nelems, k.src_rank, k.dst_rank);
  }
  // The operators' work, in External id order (the map has none).
  std::map<int64_t, OpWork> work(t.op_work.begin(), t.op_work.end());
  for (const auto& [id, w] : work) add(id, w.flops, static_cast<int>(w.precision));
  for (const auto& r : t.diagnostics.Rows()) s += std::string(r.name), add(r.count);
  return s;
}

}  // namespace emo::trace
