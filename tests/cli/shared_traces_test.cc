// Every trace in ../shared through `emo analyze` and `emo optimize` (h200 model, device check
// overridden so that every trace is planned): what EMO writes must be physically possible, or
// EMO must refuse with a clear error. No energy below zero, no saving outside [-100, 100] %, no
// predicted average power above the device's limit (JSON rows, policy and frontier), and a
// critical path that either spans the steady iteration or says where and why it stops.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "emo_run.h"

namespace emo::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kH200LimitW = 700.0;  // devices/h200.json power_limit_w

std::vector<std::string> SharedTraces(const std::string& shared, const std::string& scratch) {
  std::vector<std::string> out;
  for (const char* dir : {"traces/hta", "traces/kineto", "traces/tracelens", "traces/h200", "traces/h200/overhead"}) {
    const fs::path d = fs::path(shared) / dir;
    if (!fs::is_directory(d)) continue;
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      const bool trace = name.ends_with(".json.gz") || name.ends_with(".json");
      if (e.is_regular_file() && trace && name.find("measured") == std::string::npos &&
          name.find("truth") == std::string::npos && name.find("nvml_samples") == std::string::npos) {
        out.push_back(e.path().string());
      }
    }
  }
  // Two ranks of the 8-rank DLRM job (the archive holds all eight).
  const fs::path tar = fs::path(shared) / "traces/param/dlrm_kineto_8ranks_v100.tar.gz";
  if (fs::exists(tar)) {
    fs::create_directories(scratch);
    const std::string cmd = "tar xzf " + tar.string() + " -C " + scratch + " 2>/dev/null";
    if (std::system(cmd.c_str()) == 0) {
      for (const auto& e : fs::recursive_directory_iterator(scratch)) {
        const std::string name = e.path().filename().string();
        if (name.starts_with("worker0_") || name.starts_with("worker7_")) out.push_back(e.path().string());
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Walks a JSON value: every "energy_j"-like number >= 0, every "saving_pct" in [-100, 100],
// every object with energy_j and time_us at or below the power limit.
void CheckPhysics(const json& j, const std::string& where, std::vector<std::string>& problems) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (v.is_number() && k.find("energy_j") != std::string::npos && v.get<double>() < 0) {
        problems.push_back(where + k + " = " + v.dump());
      }
      if (v.is_number() && k.find("saving_pct") != std::string::npos &&
          (v.get<double>() < -100 || v.get<double>() > 100 || std::isnan(v.get<double>()))) {
        problems.push_back(where + k + " = " + v.dump());
      }
      if (k == "saving_range_pct") {
        for (const auto& x : v) {
          if (x.get<double>() < -100 || x.get<double>() > 100) problems.push_back(where + k + " = " + v.dump());
        }
      }
      CheckPhysics(v, where + k + ".", problems);
    }
    if (j.contains("energy_j") && j.contains("time_us") && j["time_us"].get<double>() > 0) {
      const double w = j["energy_j"].get<double>() / (j["time_us"].get<double>() * 1e-6);
      if (w > kH200LimitW) problems.push_back(where + " averages " + std::to_string(w) + " W");
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) CheckPhysics(j[i], where + std::to_string(i) + ".", problems);
  }
}

void CheckFrontier(const std::string& csv, std::vector<std::string>& problems) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    // trace,rank,time_us,energy_j: the last two fields.
    const size_t b = line.rfind(','), a = line.rfind(',', b - 1);
    const double t = std::stod(line.substr(a + 1, b - a - 1)), e = std::stod(line.substr(b + 1));
    if (e < 0 || (t > 0 && e / (t * 1e-6) > kH200LimitW)) problems.push_back("frontier row " + line);
  }
}

// One trace's walk: whether emo refused it, and every problem found (empty: all physical).
struct Walk {
  bool refused = false;
  std::vector<std::string> problems;
};

Walk WalkTrace(const std::string& trace, const std::string& tag) {
  Walk w;
  auto problem = [&](const std::string& p) { w.problems.push_back(p); };
  const std::string j = TempPath(tag + ".json"), pol = TempPath(tag + "_policy.json"), fr = TempPath(tag + ".csv");
  for (const auto& f : {j, pol, fr}) fs::remove(f);
  // The scratch files go on every way out of the walk.
  struct Remover {
    std::vector<std::string> files;
    ~Remover() {
      for (const auto& f : files) fs::remove(f);
    }
  } remover{{j, pol, fr}};
  // A refusal is one clear error line naming the command (and, for analyze, the file), never a crash.
  auto refusal = [&](const EmoRun& r, const std::string& command, bool names_file) {
    w.refused = true;
    if (r.exit_code != 1) problem(command + " exited " + std::to_string(r.exit_code) + ": " + r.out);
    if (r.out.find("emo " + command + ": ") == std::string::npos) problem(command + " refused unclearly: " + r.out);
    if (names_file && r.out.find(trace) == std::string::npos) problem(command + "'s refusal does not name the file: " + r.out);
  };
  const EmoRun a = Emo("analyze " + trace + " --json " + j);
  if (a.exit_code != 0) {
    refusal(a, "analyze", true);
    return w;
  }
  const json analysis = ReadJson(j);
  const auto& cp = analysis["critical_path"];
  const auto& times = analysis["iteration_time_us"];
  const double iteration = times.value("corrected", times.value("replayed", 0.0));
  // Covered time, read as the path's length when the output has no coverage field.
  double explained = cp.value("covered_pct", 100.0 * cp.value("length_us", 0.0) / std::max(iteration, 1e-9));
  for (const auto& gap : cp.value("uncovered", json::array())) {
    if (gap.value("reason", "").empty()) problem("an uncovered stretch without a reason: " + gap.dump());
    explained += 100.0 * gap.value("us", 0.0) / iteration;
  }
  if (std::abs(explained - 100.0) > 1.0) {
    problem("critical path covers " + cp.value("covered_pct", json()).dump() + " % and says why for " +
            cp.value("uncovered", json()).dump() + ": " + std::to_string(explained) + " % explained");
  }

  const EmoRun o = Emo("optimize " + trace + " --device h200 --allow-device-mismatch --json " + j + " --policy " +
                       pol + " --frontier " + fr);
  if (o.exit_code != 0) {
    refusal(o, "optimize", false);
    return w;
  }
  CheckPhysics(ReadJson(j), "", w.problems);
  CheckPhysics(ReadJson(pol), "policy.", w.problems);
  CheckFrontier(ReadText(fr), w.problems);
  return w;
}

// The traces are walked on several threads, each running emo processes (timings in CMakeLists.txt).
TEST(SharedTracesTest, EveryOutputIsPhysicalOrARefusal) {
  EMO_REQUIRE_SHARED();
  const std::string shared = SharedDir();
  const std::string scratch = TempPath("shared_traces");
  const auto traces = SharedTraces(shared, scratch);
  ASSERT_GE(traces.size(), 30u) << "expected the shared traces under " << shared;
  std::vector<Walk> walks(traces.size());
  std::atomic<size_t> next{0};
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < workers; ++t) {
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < traces.size();) walks[i] = WalkTrace(traces[i], "walk" + std::to_string(i));
    });
  }
  for (auto& t : pool) t.join();
  size_t planned = 0, refused = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    (walks[i].refused ? refused : planned) += 1;
    for (const auto& p : walks[i].problems) ADD_FAILURE() << traces[i] << ": " << p;
  }
  EXPECT_GE(planned, 25u) << refused << " refused";
  fs::remove_all(scratch);
}

}  // namespace
}  // namespace emo::testing
