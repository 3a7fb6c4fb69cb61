#include "emo_trace_records.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <charconv>
#include <cstring>

namespace emo::trace {
namespace {

namespace ef = emo_format;

// The latest time a record may carry: 2^62 ns (146 years of the CUPTI clock, which counts from
// the Unix epoch). With every time in [0, kMaxTimeNs] the sum or difference of any two fits in 64
// bits, which the later steps (spans, gaps, windows widened around a stretch) rely on.
constexpr int64_t kMaxTimeNs = int64_t{1} << 62;

bool InTimeRange(int64_t t) { return t >= 0 && t <= kMaxTimeNs; }

// Appends the record; false (not appended) for damage no writer produces: a time before the
// clock's epoch or past kMaxTimeNs.
template <typename T>
bool Decode(const unsigned char* body, size_t size, std::vector<T>* out) {
  T record;
  ef::GetRecord(body, size, &record);
  if constexpr (requires { record.start_ns; }) {
    if (!InTimeRange(record.start_ns) || !InTimeRange(record.end_ns)) return false;
  }
  if constexpr (requires { record.time_ns; }) {
    if (!InTimeRange(record.time_ns)) return false;
  }
  if constexpr (requires { record.device_ns; }) {
    if (!InTimeRange(record.device_ns)) return false;
  }
  out->push_back(record);
  return true;
}

std::string ToString(const std::map<std::string, std::string>& meta, const char* key, std::string fallback) {
  auto it = meta.find(key);
  return it == meta.end() ? fallback : it->second;
}

// The q-quantile (nearest rank) of `v`; -1 when empty.
TimeNs Quantile(std::vector<TimeNs> v, double q) {
  if (v.empty()) return -1;
  const auto k = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

// The counter (mJ) at `t`, linearly interpolated between the reads around it; false outside
// the reads.
bool EnergyAt(const std::vector<ef::EnergyRecord>& reads, TimeNs t, double* mj) {
  if (reads.empty() || t < reads.front().time_ns || t > reads.back().time_ns) return false;
  auto hi = std::lower_bound(reads.begin(), reads.end(), t,
                             [](const ef::EnergyRecord& r, TimeNs x) { return r.time_ns < x; });
  if (hi->time_ns == t || hi == reads.begin()) {
    *mj = static_cast<double>(hi->energy_mj);
    return true;
  }
  auto lo = hi - 1;
  const double f = static_cast<double>(t - lo->time_ns) / static_cast<double>(hi->time_ns - lo->time_ns);
  *mj = static_cast<double>(lo->energy_mj) + f * (static_cast<double>(hi->energy_mj) - static_cast<double>(lo->energy_mj));
  return true;
}

// The first iterations of a run carry start-up work (CUDA and library initialisation, autotuning,
// allocator growth): never part of the untraced step time or the energy window.
constexpr size_t kStartupIterations = 2;

// The shortest span the clock of the traced iterations is read over (ClockRecords come ~50 ms
// apart): four reads.
constexpr TimeNs kMinClockWindowNs = 200'000'000;

}  // namespace

int64_t MetaInt(const std::map<std::string, std::string>& meta, const std::string& key, int64_t fallback) {
  auto it = meta.find(key);
  if (it == meta.end()) return fallback;
  int64_t v = fallback;
  if (std::from_chars(it->second.data(), it->second.data() + it->second.size(), v).ec != std::errc()) return fallback;
  return v;
}

void EmoRecords::Add(ef::ChunkKind kind, std::string_view payload) {
  const auto* p = reinterpret_cast<const unsigned char*>(payload.data());
  const size_t n = payload.size();
  switch (kind) {
    case ef::ChunkKind::kMeta: {
      size_t at = 0;
      while (at < n) {
        size_t eol = payload.find('\n', at);
        if (eol == std::string_view::npos) eol = n;
        const std::string_view line = payload.substr(at, eol - at);
        const size_t eq = line.find('=');
        if (eq != std::string_view::npos) meta[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
        at = eol + 1;
      }
      return;
    }
    case ef::ChunkKind::kStrings: {
      size_t at = 0;
      while (n - at >= 8) {
        uint32_t id = 0, len = 0;
        std::memcpy(&id, p + at, 4);
        std::memcpy(&len, p + at + 4, 4);
        if (n - at - 8 < len) {
          ++skipped;
          return;
        }
        strings[id] = std::string(payload.substr(at + 8, len));
        at += 8 + len;
      }
      return;
    }
    case ef::ChunkKind::kRecords: {
      size_t at = 0;
      while (n - at >= sizeof(ef::RecordHeader)) {
        ef::RecordHeader h;
        std::memcpy(&h, p + at, sizeof(h));
        at += sizeof(h);
        if (n - at < h.size) {
          ++skipped;
          return;
        }
        const unsigned char* body = p + at;
        at += h.size;
        ++total_records;
        bool kept = true;
        switch (static_cast<ef::RecordType>(h.type)) {
          case ef::RecordType::kApi: kept = Decode(body, h.size, &api); break;
          case ef::RecordType::kKernel: kept = Decode(body, h.size, &kernels); break;
          case ef::RecordType::kMemcpy: kept = Decode(body, h.size, &memcpys); break;
          case ef::RecordType::kMemset: kept = Decode(body, h.size, &memsets); break;
          case ef::RecordType::kSync: kept = Decode(body, h.size, &syncs); break;
          case ef::RecordType::kCudaEvent: kept = Decode(body, h.size, &events); break;
          case ef::RecordType::kExternalCorr: kept = Decode(body, h.size, &external); break;
          case ef::RecordType::kRange: kept = Decode(body, h.size, &ranges); break;
          case ef::RecordType::kIteration: kept = Decode(body, h.size, &iterations); break;
          case ef::RecordType::kEnergy: kept = Decode(body, h.size, &energy); break;
          case ef::RecordType::kPower: kept = Decode(body, h.size, &power); break;
          case ef::RecordType::kDropped: kept = Decode(body, h.size, &dropped); break;
          case ef::RecordType::kGpu: kept = Decode(body, h.size, &gpus); break;
          case ef::RecordType::kClock: kept = Decode(body, h.size, &clocks); break;
          default: kept = false; break;
        }
        if (!kept) ++skipped;
      }
      return;
    }
    case ef::ChunkKind::kEnd: return;
  }
  ++skipped;
}

// The median host time of the iterations marked, and how many there are.
std::pair<TimeNs, int64_t> StepOf(const std::vector<emo_format::IterationRecord>& its, const std::vector<bool>& marked) {
  std::vector<TimeNs> ns;
  for (size_t i = 0; i < its.size(); ++i) {
    if (marked[i]) ns.push_back(its[i].end_ns - its[i].start_ns);
  }
  return {Quantile(ns, 0.5), static_cast<int64_t>(ns.size())};
}

// Each run of consecutive default-clock iterations (`between`: one guard re-timing) against at
// most `neighbours` of the plan's iterations (`inside`) on each side of it, up to the runs before
// and after: the median over runs of (the plan's median step there / the run's median step), and
// the number of runs with at least two such neighbours. A pace that drifts over tens of
// iterations, as a CPU-bound loop's does, cancels in each pair.
std::pair<double, int64_t> PairedInForceOverDefault(const std::vector<ef::IterationRecord>& its,
                                                    const std::vector<bool>& inside, const std::vector<bool>& between,
                                                    size_t neighbours) {
  auto step = [&its](size_t i) { return its[i].end_ns - its[i].start_ns; };
  std::vector<double> ratios;
  for (size_t i = 0; i < its.size();) {
    if (!between[i]) {
      ++i;
      continue;
    }
    std::vector<TimeNs> run, plan;
    size_t end = i;
    while (end < its.size() && between[end]) run.push_back(step(end++));
    size_t before = 0, after = 0;
    for (size_t j = i; j-- > 0 && before < neighbours && !between[j];) {
      if (!inside[j]) continue;
      plan.push_back(step(j));
      ++before;
    }
    for (size_t j = end; j < its.size() && after < neighbours && !between[j]; ++j) {
      if (!inside[j]) continue;
      plan.push_back(step(j));
      ++after;
    }
    const TimeNs default_ns = Quantile(run, 0.5);
    if (plan.size() >= 2 && default_ns > 0) {
      ratios.push_back(static_cast<double>(Quantile(plan, 0.5)) / static_cast<double>(default_ns));
    }
    i = end;
  }
  // The median proper (the middle two averaged): a run has only a few re-timings.
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  const double median = n == 0 ? 0.0 : 0.5 * (ratios[(n - 1) / 2] + ratios[n / 2]);
  return {median, static_cast<int64_t>(n)};
}

// GPU `device`'s SM clock over [from, to] (host time).
ClockStats ClockOver(const EmoRecords& r, uint32_t device, TimeNs from, TimeNs to) {
  ClockStats c;
  std::vector<double> mhz;
  int64_t with_reasons = 0, capped = 0;
  for (const auto& k : r.clocks) {
    if (k.gpu != device || k.time_ns < from || k.time_ns > to || k.sm_mhz == 0) continue;
    mhz.push_back(k.sm_mhz);
    if (k.reasons == ef::kNone) continue;
    ++with_reasons;
    capped += (k.reasons & (ef::kClockReasonSwPowerCap | ef::kClockReasonHwPowerBrake)) != 0 ? 1 : 0;
  }
  if (mhz.empty()) return c;
  c.samples = static_cast<int64_t>(mhz.size());
  std::sort(mhz.begin(), mhz.end());
  c.median_mhz = mhz[mhz.size() / 2];
  c.min_mhz = mhz.front();
  c.max_mhz = mhz.back();
  if (with_reasons > 0) c.power_capped_share = static_cast<double>(capped) / static_cast<double>(with_reasons);
  return c;
}

// The longest run of consecutive usable iterations that abut in time (a left-out iteration of
// another loop, or the hand-over from launch-period to anchor iterations, leaves a stretch of time
// that belongs to no counted iteration) and lie within [from, to]: {first, count}.
std::pair<size_t, size_t> LongestAbuttingRun(const std::vector<emo_format::IterationRecord>& its,
                                             const std::vector<bool>& usable, TimeNs from, TimeNs to) {
  auto in = [&](size_t i) { return usable[i] && its[i].start_ns >= from && its[i].end_ns <= to; };
  size_t best_first = 0, best_n = 0;
  for (size_t i = 0; i < its.size();) {
    if (!in(i)) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < its.size() && in(j) && its[j].start_ns == its[j - 1].end_ns) ++j;
    if (j - i > best_n) {
      best_first = i;
      best_n = j - i;
    }
    i = j;
  }
  return {best_first, best_n};
}

// Each GPU's energy per iteration over the longest abutting run of usable iterations that its
// counter reads bracket (a run's first iterations can start before the monitor's first read of a
// GPU it has just met). `traced` spans the traced iterations (the clock their durations ran at),
// empty when none.
std::vector<GpuEnergy> GpuEnergies(const EmoRecords& r, const std::vector<emo_format::IterationRecord>& its,
                                   const std::vector<bool>& usable, std::pair<TimeNs, TimeNs> traced) {
  std::vector<GpuEnergy> out;
  // The longest run regardless of reads, for a GPU whose reads bracket none.
  auto any = [&] {
    return LongestAbuttingRun(its, usable, std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max());
  };

  std::vector<uint32_t> devices;
  for (const auto& g : r.gpus) devices.push_back(g.device);
  for (const auto& e : r.energy) {
    if (std::find(devices.begin(), devices.end(), e.gpu) == devices.end()) devices.push_back(e.gpu);
  }
  std::sort(devices.begin(), devices.end());
  for (uint32_t d : devices) {
    GpuEnergy g;
    g.device = static_cast<int32_t>(d);
    for (const auto& x : r.gpus) {
      auto s = x.device == d ? r.strings.find(x.name) : r.strings.end();
      if (s != r.strings.end()) g.name = s->second;
    }
    std::vector<ef::EnergyRecord> reads;
    for (const auto& e : r.energy) {
      if (e.gpu == d) reads.push_back(e);
    }
    std::sort(reads.begin(), reads.end(), [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
    g.counter_reads = static_cast<int64_t>(reads.size());
    std::vector<TimeNs> changes, periods;
    for (size_t i = 1; i < reads.size(); ++i) {
      if (reads[i].energy_mj != reads[i - 1].energy_mj) changes.push_back(reads[i].time_ns);
    }
    for (size_t i = 1; i < changes.size(); ++i) periods.push_back(changes[i] - changes[i - 1]);
    g.counter_period_ns = std::max<TimeNs>(0, Quantile(periods, 0.5));
    std::vector<double> idle;
    const TimeNs first_start = its.empty() ? 0 : its.front().start_ns;
    for (const auto& p : r.power) {
      if (p.gpu != d) continue;
      ++g.power_samples;
      if (!its.empty() && p.time_ns < first_start) idle.push_back(p.power_mw * 1e-3);
    }
    if (!idle.empty()) {
      std::nth_element(idle.begin(), idle.begin() + static_cast<ptrdiff_t>(idle.size() / 2), idle.end());
      g.idle_power_w = idle[idle.size() / 2];
    }
    // Without reads around any of them, the window still says which iterations it would be.
    std::pair<size_t, size_t> run =
        reads.empty() ? any() : LongestAbuttingRun(its, usable, reads.front().time_ns, reads.back().time_ns);
    if (run.second == 0) run = any();
    const auto [best_first, best_n] = run;
    double e0 = 0, e1 = 0;
    if (best_n > 0) {
      g.window_start = its[best_first].start_ns;
      g.window_end = its[best_first + best_n - 1].end_ns;
      g.iterations = static_cast<int64_t>(best_n);
      if (g.window_end > g.window_start && EnergyAt(reads, g.window_start, &e0) && EnergyAt(reads, g.window_end, &e1)) {
        g.energy_j = (e1 - e0) * 1e-3;
        const double seconds = static_cast<double>(g.window_end - g.window_start) * 1e-9;
        g.busy_power_w = g.energy_j / seconds;
        g.energy_per_iteration_j = g.energy_j / static_cast<double>(best_n);
        // Each end of the window is known to within one counter update.
        const double update_j = g.busy_power_w * static_cast<double>(g.counter_period_ns) * 1e-9;
        g.uncertainty_per_iteration_j = 2.0 * update_j / static_cast<double>(best_n);
      } else {
        g.energy_j = g.energy_per_iteration_j = g.busy_power_w = -1;  // the reads do not cover the window
      }
    }
    if (best_n > 0) g.clock = ClockOver(r, d, g.window_start, g.window_end);
    if (traced.second > traced.first) {
      // A window of a few short iterations can fall between two reads (~50 ms apart): it is taken
      // over at least kMinClockWindowNs around its middle, still well inside the ~1 s the power
      // limiter averages over, so the GPU is in the same state.
      const TimeNs widen = std::max<TimeNs>(0, kMinClockWindowNs - (traced.second - traced.first)) / 2;
      g.traced_clock = ClockOver(r, d, traced.first - widen, traced.second + widen);
    }
    out.push_back(g);
  }
  return out;
}

// A meta list "a:b:c,a:b:c" (or "a,b,c") of integers, one vector per entry; empty when absent.
std::vector<std::vector<int64_t>> MetaLists(const std::map<std::string, std::string>& meta, const std::string& key) {
  std::vector<std::vector<int64_t>> out;
  const auto it = meta.find(key);
  if (it == meta.end()) return out;
  std::istringstream entries(it->second);
  for (std::string entry; std::getline(entries, entry, ',');) {
    std::vector<int64_t> fields;
    std::istringstream parts(entry);
    for (std::string part; std::getline(parts, part, ':');) fields.push_back(std::strtoll(part.c_str(), nullptr, 10));
    out.push_back(std::move(fields));
  }
  return out;
}

RunMeasurement MeasureRun(const EmoRecords& r) {
  RunMeasurement m;
  m.mode = ToString(r.meta, "config.mode", "trace");
  m.iteration_source = ToString(r.meta, "iteration.source", r.iterations.empty() ? "none" : "");
  m.iteration_anchor = ToString(r.meta, "iteration.anchor", "");
  m.host = ToString(r.meta, "host", "");
  m.pid = MetaInt(r.meta, "pid", -1);
  // Both clocks count from the Unix epoch; a value outside the records' range (damage) counts as
  // unknown, so that the offset and any time shifted by it stay within 64 bits.
  auto meta_time = [&r](const char* key) {
    const int64_t t = MetaInt(r.meta, key, 0);
    return InTimeRange(t) ? t : 0;
  };
  m.clock_realtime_offset_ns = meta_time("clock.realtime_ns") - meta_time("clock.cupti_ns");
  m.complete = r.complete;
  m.end_note = r.end_note;
  m.end_reason = ToString(r.meta, "end.reason", "");
  m.session = ToString(r.meta, "session.begin", "cuda_init");
  m.cupti_detaches = MetaInt(r.meta, "cupti.detaches", 0);
  m.callbacks_non_launch = MetaInt(r.meta, "callbacks.non_launch", -1);
  m.callbacks_launch_off = MetaInt(r.meta, "callbacks.launch_off", -1);
  m.callbacks_launch_off_iterations = MetaInt(r.meta, "callbacks.launch_off_iterations", -1);
  uint64_t dropped = 0;
  for (const auto& d : r.dropped) dropped = d.dropped > UINT64_MAX - dropped ? UINT64_MAX : dropped + d.dropped;
  m.dropped_records = static_cast<int64_t>(std::min<uint64_t>(dropped, std::numeric_limits<int64_t>::max()));
  for (const auto& [key, value] : r.meta) {
    if (key.rfind("run.", 0) == 0) m.policy_run[key.substr(4)] = value;
  }
  for (const auto& f : MetaLists(r.meta, "run.switch_times_ns")) {
    // Iteration start -1: not timed.
    if (f.size() == 3 && f[0] >= 0 && InTimeRange(f[1]) && (f[2] == -1 || InTimeRange(f[2]))) {
      m.switch_times.push_back({f[0], f[1], f[2]});
    }
  }
  for (const auto& f : MetaLists(r.meta, "run.pack_first_calls")) {
    if (f.size() == 1) m.pack_first_calls.push_back(f[0]);
  }

  auto its = r.iterations;
  std::sort(its.begin(), its.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  if (m.iteration_source.empty() && !its.empty()) {
    m.iteration_source = its.front().source == static_cast<uint32_t>(ef::IterationSource::kNvtx) ? "nvtx" : "launch_period";
  }
  // The launch-period finder may report a short-lived loop first (the layers of the first
  // step) before the step loop supersedes it; iterations of one loop share their period
  // (`launches`). Keep the loop of the traced window, or else the one that took most time.
  if (m.iteration_source == "launch_period" && !its.empty()) {
    // Summed in double: exact for any real run (< 2^53 ns, 104 days), and a damaged file's
    // spans (each fits in int64) cannot overflow the sum.
    std::map<uint32_t, double> time_of;
    uint32_t loop = 0;
    bool from_window = false;
    for (const auto& it : its) {
      time_of[it.launches] += static_cast<double>(it.end_ns - it.start_ns);
      if (it.traced != 0) {
        loop = it.launches;  // the last window's
        from_window = true;
      }
    }
    if (!from_window) {
      loop = time_of.begin()->first;
      for (const auto& [launches, ns] : time_of) {
        if (ns > time_of[loop]) loop = launches;
      }
    }
    std::erase_if(its, [&](const auto& it) { return it.launches != loop; });
  }
  m.iterations = static_cast<int64_t>(its.size());
  // Usable untraced iterations: past start-up, after the traced window, and not the first after
  // it (it pays for the flush of the window's buffers).
  // The trace is the last window (meta window.*); iterations traced in an earlier window are
  // neither the trace's nor untraced.
  const int64_t first = MetaInt(r.meta, "window.first_iteration", -1);
  int64_t last = MetaInt(r.meta, "window.last_iteration", -1);
  if (last < 0) {  // no window meta: the traced iterations say where it was
    for (const auto& it : its) {
      if (it.traced != 0) last = std::max(last, static_cast<int64_t>(it.index));
    }
  }
  auto in_last_window = [&](const emo_format::IterationRecord& it) {
    const auto i = static_cast<int64_t>(it.index);
    return it.traced != 0 && (first < 0 || last < first || (i >= first && i <= last));
  };
  std::vector<bool> usable(its.size(), false);
  std::vector<TimeNs> traced, untraced;
  for (size_t i = 0; i < its.size(); ++i) {
    const TimeNs ns = its[i].end_ns - its[i].start_ns;
    m.iteration_ns.push_back(ns);
    m.iteration_traced.push_back(its[i].traced != 0);
    if (its[i].traced != 0) {
      if (in_last_window(its[i])) traced.push_back(ns);
      continue;
    }
    // The tracer records from the start until its window has been traced (docs/runtime.md): only
    // iterations after the window ran untraced. Without a window (monitor mode, or no loop), all
    // past start-up did.
    const bool after_window = last < 0 || static_cast<int64_t>(its[i].index) > last + 1;
    usable[i] = i >= kStartupIterations && !(i > 0 && its[i - 1].traced != 0) && after_window;
    if (usable[i]) untraced.push_back(ns);
  }
  m.traced_iterations = static_cast<int64_t>(traced.size());
  m.untraced_iterations = static_cast<int64_t>(untraced.size());
  m.traced_step_ns = Quantile(traced, 0.5);
  m.untraced_step_ns = Quantile(untraced, 0.5);
  m.untraced_step_p10_ns = Quantile(untraced, 0.1);
  m.untraced_step_p90_ns = Quantile(untraced, 0.9);
  if (static_cast<int64_t>(untraced.size()) >= RunMeasurement::kDriftMinIterations) {
    const auto third = static_cast<ptrdiff_t>(untraced.size() / 3);
    m.untraced_first_third_ns = Quantile(std::vector<TimeNs>(untraced.begin(), untraced.begin() + third), 0.5);
    m.untraced_last_third_ns = Quantile(std::vector<TimeNs>(untraced.end() - third, untraced.end()), 0.5);
  }

  std::pair<TimeNs, TimeNs> traced_span{0, 0};
  for (const auto& it : its) {
    if (!in_last_window(it)) continue;
    const bool first_one = traced_span.second <= traced_span.first;
    traced_span = {first_one ? it.start_ns : std::min(traced_span.first, it.start_ns),
                   first_one ? it.end_ns : std::max(traced_span.second, it.end_ns)};
  }
  m.gpus = GpuEnergies(r, its, usable, traced_span);

  // `emo run`: the same measures before the plan took over and while it held (meta
  // run.plan_started_ns, run.plan_stopped_ns on the trace's clock).
  const int64_t started = MetaInt(r.meta, "run.plan_started_ns", -1);
  if (started > 0) {
    const int64_t stopped = MetaInt(r.meta, "run.plan_stopped_ns", -1);
    std::vector<bool> before(its.size(), false), under(its.size(), false);
    for (size_t i = 0; i < its.size(); ++i) {
      before[i] = usable[i] && its[i].end_ns <= started;
      under[i] = usable[i] && its[i].start_ns >= started && (stopped < 0 || its[i].end_ns <= stopped);
    }
    m.plan = RunMeasurement::PlanSplit{StepOf(its, before),
                                       StepOf(its, under),
                                       GpuEnergies(r, its, before, traced_span),
                                       GpuEnergies(r, its, under, traced_span),
                                       started,
                                       stopped};
    // "from:to,from:to" (to -1: open to the end).
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (const auto& f : MetaLists(r.meta, "run.plan_spans_ns")) {
      if (f.size() == 2) spans.push_back({f[0], f[1] < 0 ? std::numeric_limits<int64_t>::max() : f[1]});
    }
    if (!spans.empty()) {
      std::vector<bool> inside(its.size(), false), between(its.size(), false);
      for (size_t i = 0; i < its.size(); ++i) {
        if (!usable[i]) continue;
        bool in = false, touches = false;
        for (const auto& [from, to] : spans) {
          in = in || (its[i].start_ns >= from && its[i].end_ns <= to);
          touches = touches || (its[i].start_ns < to && its[i].end_ns > from);
        }
        inside[i] = in;
        between[i] = !touches && its[i].start_ns >= started && (stopped < 0 || its[i].end_ns <= stopped);
      }
      m.plan->in_force_step = StepOf(its, inside);
      m.plan->interleaved_default_step = StepOf(its, between);
      m.plan->paired_in_force_over_default =
          PairedInForceOverDefault(its, inside, between, RunMeasurement::PlanSplit::kPairedNeighbours);
    }
  }
  return m;
}

}  // namespace emo::trace
