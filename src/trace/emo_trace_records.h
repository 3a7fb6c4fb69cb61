// The records of one EMO trace file, decoded from its chunks (private to src/trace): the
// reader's first pass, before they become a Trace, and the input of MeasureRun.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "emo/trace/emo_format.h"
#include "emo/trace/trace.h"

namespace emo::trace {

struct EmoRecords {
  std::map<std::string, std::string> meta;
  std::unordered_map<uint32_t, std::string> strings;
  std::vector<emo_format::ApiRecord> api;
  std::vector<emo_format::KernelRecord> kernels;
  std::vector<emo_format::MemcpyRecord> memcpys;
  std::vector<emo_format::MemsetRecord> memsets;
  std::vector<emo_format::SyncRecord> syncs;
  std::vector<emo_format::CudaEventRecord> events;
  std::vector<emo_format::ExternalCorrRecord> external;
  std::vector<emo_format::RangeRecord> ranges;
  std::vector<emo_format::IterationRecord> iterations;
  std::vector<emo_format::EnergyRecord> energy;
  std::vector<emo_format::PowerRecord> power;
  std::vector<emo_format::DroppedRecord> dropped;
  std::vector<emo_format::GpuRecord> gpus;
  std::vector<emo_format::ClockRecord> clocks;
  uint64_t total_records = 0;
  uint64_t skipped = 0;    // unknown record types, sizes past the payload, time spans past 64 bits
  bool complete = false;   // the end chunk was read
  std::string end_note;    // where and why reading stopped, "" for a whole file

  // Decodes one chunk's payload (already inflated).
  void Add(emo_format::ChunkKind kind, std::string_view payload);
};

// The integer meta value of `key` (emo_format.h's meta chunk), `fallback` when absent or not an
// integer.
int64_t MetaInt(const std::map<std::string, std::string>& meta, const std::string& key, int64_t fallback);

// What the tracer measured: host time per iteration inside and outside the traced window, and
// each GPU's energy over the untraced iterations (emo/trace/trace.h RunMeasurement).
RunMeasurement MeasureRun(const EmoRecords& r);

}  // namespace emo::trace
