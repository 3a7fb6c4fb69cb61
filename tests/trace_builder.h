// A tiny hand-built trace for unit tests: times in microseconds for readability.
#pragma once

#include <utility>

#include "emo/trace/trace.h"

namespace emo::testing {

class TraceBuilder {
 public:
  TraceBuilder() { t_.meta.source_path = "synthetic"; }
  // A framework operator (cpu_op) on thread `tid`.
  void Op(const char* name, double start_us, double end_us, int64_t tid = 1) {
    Cpu(trace::CpuKind::kOp, name, start_us, end_us, -1, tid);
  }
  int64_t Api(const char* name, double start_us, double end_us, int64_t corr = -1, int64_t tid = 1) {
    Cpu(trace::CpuKind::kRuntime, name, start_us, end_us, corr, tid);
    return corr;
  }
  void Annotation(const char* name, double start_us, double end_us) {
    Cpu(trace::CpuKind::kAnnotation, name, start_us, end_us, -1, 1);
  }
  // A kernel; `external_id` is the launching operator's External id (-1: none).
  void Kernel(const char* name, int64_t stream, double start_us, double end_us, int64_t corr,
              int64_t external_id = -1) {
    auto& g = t_.gpu;
    g.kind.push_back(trace::GpuKind::kKernel);
    g.name.push_back(t_.strings.Intern(name));
    g.stream.push_back(t_.InternStream(0, stream));
    g.start.push_back(Ns(start_us));
    g.end.push_back(Ns(end_us));
    g.correlation.push_back(corr);
    g.external_id.push_back(external_id);
    g.launch.push_back({});
    g.bytes.push_back(0);
    g.graph_id.push_back(-1);
    g.collective.push_back(trace::CollectiveId::Invalid());
  }
  // A cuda_sync record; wait_on_stream / record_corr -1 as CUDA >= 12.9 Kineto leaves them,
  // event_id its wait_on_cuda_event_id (-1: none).
  void Sync(trace::SyncKind kind, int64_t stream, double start_us, double end_us, int64_t corr,
            int64_t wait_on_stream = -1, int64_t record_corr = -1, int64_t event_id = -1) {
    auto& s = t_.syncs;
    s.kind.push_back(kind);
    s.device.push_back(0);
    s.stream.push_back(stream);
    s.start.push_back(Ns(start_us));
    s.end.push_back(Ns(end_us));
    s.correlation.push_back(corr);
    s.wait_on_stream.push_back(wait_on_stream);
    s.wait_on_record_corr.push_back(record_corr);
    s.event_id.push_back(event_id);
  }
  trace::Trace Build() {
    t_.Finalize();
    return std::move(t_);
  }
  static TimeNs Ns(double us) { return static_cast<TimeNs>(us * 1000.0); }

 private:
  void Cpu(trace::CpuKind kind, const char* name, double start_us, double end_us, int64_t corr, int64_t tid) {
    auto& c = t_.cpu;
    c.thread.push_back(t_.InternThread(1, tid));
    c.kind.push_back(kind);
    c.name.push_back(t_.strings.Intern(name));
    c.start.push_back(Ns(start_us));
    c.end.push_back(Ns(end_us));
    c.correlation.push_back(corr);
    c.external_id.push_back(-1);
    c.cbid.push_back(-1);
  }
  trace::Trace t_;
};

}  // namespace emo::testing
