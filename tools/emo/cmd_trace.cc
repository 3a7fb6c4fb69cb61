// emo trace / emo monitor: run an unmodified program under EMO's CUPTI tracer; trace a window of
// its iterations (trace) or only time them and measure each GPU's energy (monitor).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/base/text.h"
#include "emo/report/run_report.h"
#include "emo/runtime/launch.h"
#include "emo/trace/reader.h"

namespace emo::cli {
namespace {

struct TraceArgs {
  runtime::LaunchOptions launch;
  std::string json;
};

// Runs the program, then reads and reports every file its processes wrote. The exit code is the
// program's when it failed, 1 when it ran but nothing was traced, 0 otherwise.
int RunTraced(const char* command, TraceArgs args, bool keep_files) {
  std::string temp_dir;
  if (!keep_files) {
    // monitor: the files are only a channel from the program's processes to here.
    std::string dir = (std::filesystem::temp_directory_path() / "emo_monitor_XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) return Fail(command, IoError("cannot create a temporary folder"));
    temp_dir = dir;
    args.launch.output = temp_dir + "/%r.emotrace";
  }
  fmt::print(stderr, "emo {}: running {} ...\n", command, args.launch.command[0]);
  auto run = runtime::RunUnderTracer(args.launch);
  if (!run.ok()) return Fail(command, run.status());
  const std::string how = run->signal != 0 ? fmt::format("was ended by signal {}", run->signal)
                                           : fmt::format("exited with {}", run->exit_code);
  fmt::print(stderr, "emo {}: {} {}; {} written\n", command, args.launch.command[0], how,
             Plural(run->files.size(), "trace"));
  std::vector<std::pair<std::string, trace::Trace>> read;
  for (const auto& file : run->files) {
    auto t = trace::ReadTrace(file);
    if (!t.ok()) {
      fmt::print(stderr, "emo {}: {}\n", command, t.status().message());
      continue;
    }
    read.emplace_back(file, std::move(*t));
  }
  // A job's launcher (torchrun, a pipeline driver) can initialize CUDA without running any GPU
  // work; its trace is empty. When another process of the job did run GPU work, it is dropped.
  auto idle = [](const trace::Trace& t) {
    return t.gpu.size() == 0 && t.meta.run && t.meta.run->complete && t.meta.run->iterations == 0;
  };
  const bool some_work = std::any_of(read.begin(), read.end(), [&](const auto& r) { return !idle(r.second); });
  nlohmann::json no_gpu_work = nlohmann::json::array();
  std::vector<std::string> kept;
  nlohmann::json traces = nlohmann::json::array();
  for (const auto& [file, t] : read) {
    if (some_work && idle(t)) {
      fmt::print(stderr, "emo {}: pid {} on {} initialized CUDA but ran no GPU work; its trace is dropped\n", command,
                 t.meta.run->pid, t.meta.run->host);
      no_gpu_work.push_back({{"pid", t.meta.run->pid}, {"host", t.meta.run->host}});
      std::error_code ec;
      std::filesystem::remove(file, ec);
      continue;
    }
    kept.push_back(file);
    const std::string shown = keep_files ? file : fmt::format("pid {}", t.meta.run ? t.meta.run->pid : -1);
    if (args.json != "-") fmt::print("{}", report::RunText(shown, t));
    auto j = report::RunToJson(keep_files ? file : "", t);
    if (!keep_files) j.erase("path");
    traces.push_back(std::move(j));
  }
  if (!temp_dir.empty()) std::filesystem::remove_all(temp_dir);
  if (args.json != "-" && keep_files && !kept.empty()) fmt::print("next: emo analyze {}\n", kept.front());
  nlohmann::json out = {{"command", args.launch.command},
                        {"exit_code", run->exit_code},
                        {"mode", args.launch.mode},
                        {"injection_library", run->injection_library},
                        {"traces", traces},
                        {"processes_without_gpu_work", no_gpu_work}};
  Status st = WriteJson(args.json, out);
  if (!st.ok()) return Fail(command, st);
  if (run->exit_code != 0) return run->exit_code;
  if (run->files.empty()) {
    fmt::print(stderr,
               "emo {}: the program wrote no trace: it never initialized CUDA (the driver loads EMO's tracer when a "
               "program initializes CUDA), or the tracer could not start (its `emo trace:` line above says why)\n",
               command);
    return 1;
  }
  return 0;
}

void AddLaunchFlags(CLI::App* cmd, TraceArgs& args) {
  cmd->add_option("--nvtx-iteration", args.launch.nvtx_regex,
                  "NVTX ranges whose names match this regex mark iterations (default: the tracer's, "
                  "ProfilerStep#N, step, iter); without them iterations are the period of the kernel-launch sequence")
      ->check(ValidRegex());
  cmd->add_option("--json", args.json, "Write the run's summary as JSON to this file ('-' = stdout)");
  cmd->add_option("command", args.launch.command, "The program and its arguments, after `--`")->required();
}

}  // namespace

void SetupTrace(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TraceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "trace",
      "Run a CUDA program unmodified under EMO's CUPTI tracer: after --warmup iterations it traces --iterations of "
      "them (kernels, copies, API calls, stream waits, CUDA graphs, NVTX ranges), and outside that window it only "
      "times iterations and reads each GPU's energy counter, so one run gives the trace, the untraced step time and "
      "the energy per iteration. Each process writes its own file (child processes too: one per rank). "
      "Example: emo trace -o run_%r.emotrace -- python train.py");
  cmd->add_option("-o,--output", args->launch.output,
                  "Trace file of each process: %r = rank (RANK) or pid<PID>, %p = pid, %h = host");
  cmd->add_option("--warmup", args->launch.warmup, "Iterations run untraced before the traced window")
      ->check(CLI::Range(0, 1'000'000));
  cmd->add_option("--iterations", args->launch.iterations, "Iterations traced")->check(CLI::Range(1, 100'000));
  cmd->add_option("--buffer-mib", args->launch.buffer_mib,
                  "Activity buffer pool per process, MiB: memory is bounded; when it is full, records are dropped "
                  "and counted")
      ->check(CLI::Range(8, 65536));
  AddLaunchFlags(cmd, *args);
  cmd->callback([args, &exit_code] { exit_code = RunTraced("trace", *args, /*keep_files=*/true); });
}

void SetupMonitor(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TraceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "monitor",
      "Run a CUDA program unmodified and measure it, without tracing it: time per iteration and, per GPU, energy "
      "per iteration (NVML energy counter, with the uncertainty of its ~100 ms updates), busy and idle power. "
      "Example: emo monitor --json run.json -- python train.py");
  args->launch.mode = "monitor";
  AddLaunchFlags(cmd, *args);
  cmd->callback([args, &exit_code] { exit_code = RunTraced("monitor", *args, /*keep_files=*/false); });
}

}  // namespace emo::cli
