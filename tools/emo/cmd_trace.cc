// emo trace / emo monitor / emo run: run an unmodified program under EMO's CUPTI tracer; trace a
// window of its iterations (trace), only time them and measure each GPU's energy (monitor), or
// do that while the program's clocks follow a policy (run).
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/base/file.h"
#include "emo/base/text.h"
#include "emo/policy/policy_file.h"
#include "emo/report/run_report.h"
#include "emo/runtime/clock_trigger.h"
#include "emo/runtime/clock_watchdog.h"
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
// A fresh folder under the system's temporary one ("" when it cannot be made).
std::string TempFolder(const char* stem) {
  std::string dir = (std::filesystem::temp_directory_path() / (std::string(stem) + "_XXXXXX")).string();
  return mkdtemp(dir.data()) == nullptr ? std::string() : dir;
}

int RunTraced(const char* command, TraceArgs args, bool keep_files, nlohmann::json extra = nlohmann::json::object()) {
  std::string temp_dir;
  if (!keep_files) {
    // monitor, run: the files are only a channel from the program's processes to here.
    temp_dir = TempFolder("emo_monitor");
    if (temp_dir.empty()) return Fail(command, IoError("cannot create a temporary folder"));
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
  out.update(extra);
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

// --warmup and --iterations: the traced window (`prefix` starts each help text).
void AddWindowFlags(CLI::App* cmd, runtime::LaunchOptions& launch, const std::string& prefix) {
  const std::string iterations = prefix.empty() ? "Iterations" : prefix + "iterations";
  cmd->add_option("--warmup", launch.warmup, iterations + " run untraced before the traced window")
      ->check(CLI::Range(0, 1'000'000));
  cmd->add_option("--iterations", launch.iterations, iterations + " traced")->check(CLI::Range(1, 100'000));
}

struct RunArgs {
  TraceArgs trace;
  std::string policy;
  std::string actuator = "dry-run";
  double guard_pct = 5.0;
  std::string switch_log = "emo_run_switches.jsonl";
  std::string trace_output;  // --trace: also trace a window (trace mode) into these files
  std::string switch_on = "gpu";  // "gpu": wait for the op before the pack where the policy names one
};

// The schedule the injection library follows, from a checked policy.
runtime::ClockSchedule ScheduleOf(const policy::RunPolicy& p, const RunArgs& args) {
  runtime::ClockSchedule s;
  s.actuator = args.actuator;
  if (args.actuator == "dry-run" || args.actuator == "emulate") {
    s.log_path = std::filesystem::absolute(args.switch_log).string();
  }
  s.policy = p.path;
  s.model = p.model_device + " (" + p.model_source + ")";
  s.guard_pct = args.guard_pct;
  for (const auto& g : p.gpus) {
    runtime::ScheduleGpu sg;
    sg.rank = g.rank;
    sg.device = g.device;
    sg.gpu_name = g.gpu_name;
    sg.calls_per_iteration = g.calls_per_iteration;
    sg.deadline_ns = static_cast<int64_t>(g.deadline_us * 1e3);
    sg.baseline_ns = static_cast<int64_t>(g.baseline_time_us * 1e3);
    sg.plan_ns = static_cast<int64_t>(g.iteration_time_us * 1e3);
    if (args.actuator == "emulate") {
      for (const auto& spin : g.spins) sg.spins.push_back({spin.call, spin.ns});
    }
    for (const auto& pack : g.packs) {
      const bool on_gpu = args.switch_on == "gpu" && pack.gpu_switch_call.has_value();
      sg.packs.push_back({pack.first_call, on_gpu ? *pack.gpu_switch_call : pack.switch_call,
                          static_cast<unsigned>(std::lround(pack.clock_mhz)), on_gpu});
    }
    s.gpus.push_back(std::move(sg));
  }
  return s;
}

int RunWithPolicy(RunArgs args) {
  constexpr const char* kCommand = "run";
  auto read = policy::ReadRunPolicy(args.policy);
  if (!read.ok()) {
    Fail(kCommand, read.status());
    return 2;
  }
  const policy::RunPolicy& p = *read;
  if (args.actuator == "emulate") {
    for (const auto& g : p.gpus) {
      if (g.has_emulation) continue;
      Fail(kCommand, InvalidArgument(fmt::format("{} has no emulate section (rank {}, device {}): it was made before "
                                                 "emulation existed; make it again with `emo optimize --policy`",
                                                 p.path, g.rank, g.device)));
      return 2;
    }
  }
  for (const auto& w : p.warnings) fmt::print(stderr, "emo run: policy warning: {}\n", w);
  runtime::ActuatorOptions options;
  options.log_path = std::filesystem::absolute(args.switch_log).string();
  // The GPU model: refused before the program starts when NVML shows no GPU the policy was made
  // for (the injection library checks the GPU each process really uses, too).
  std::string why;
  const std::vector<std::string> names = runtime::ListGpus(options, &why);
  if (!names.empty()) {
    const bool any = std::any_of(p.gpus.begin(), p.gpus.end(), [&](const policy::RunGpu& g) {
      return std::find(names.begin(), names.end(), g.gpu_name) != names.end();
    });
    if (!any) {
      std::string seen;
      for (size_t i = 0; i < names.size(); ++i) seen += fmt::format("{}{} {}", i == 0 ? "" : ", ", i, names[i]);
      Fail(kCommand, InvalidArgument(fmt::format("{} was made for {} and this machine's GPUs are: {}; make a policy "
                                                 "from a trace of this GPU",
                                                 p.path, p.gpus.front().gpu_name, seen)));
      return 2;
    }
  } else if (args.actuator == "nvml") {
    return Fail(kCommand, IoError(fmt::format("--actuator nvml needs NVML: {}", why)));
  }
  const std::string dir = TempFolder("emo_run");
  if (dir.empty()) return Fail(kCommand, IoError("cannot create a temporary folder"));
  const std::string schedule = dir + "/schedule", journal = dir + "/journal";
  if (Status st = WriteFile(schedule, runtime::FormatClockSchedule(ScheduleOf(p, args))); !st.ok()) {
    return Fail(kCommand, st);
  }
  auto watchdog = runtime::StartClockWatchdog(args.actuator, options, journal);
  if (!watchdog.ok()) return Fail(kCommand, watchdog.status());
  fmt::print(stderr, "emo run: following {} ({} GPU plan{}, actuator {}{}), guard {} %\n", p.path, p.gpus.size(),
             p.gpus.size() == 1 ? "" : "s", args.actuator,
             args.actuator == "dry-run"   ? ", no clock changes; switches written to " + options.log_path
             : args.actuator == "emulate" ? ", no clock changes; the plan's slowdown is added as spin kernels (model " +
                                                p.model_device + "); switches written to " + options.log_path
                                          : "",
             args.guard_pct);
  const bool traced = !args.trace_output.empty();
  args.trace.launch.mode = traced ? "trace" : "monitor";
  if (traced) args.trace.launch.output = args.trace_output;
  args.trace.launch.extra_env = {"EMO_RUN_SCHEDULE=" + schedule, "EMO_RUN_JOURNAL=" + journal,
                                 fmt::format("EMO_RUN_PID={}", getpid())};
  nlohmann::json extra = {
      {"policy", p.path}, {"actuator", args.actuator}, {"guard_pct", args.guard_pct}, {"switch_on", args.switch_on}};
  if (args.actuator == "dry-run" || args.actuator == "emulate") extra["switch_log"] = options.log_path;
  const int code = RunTraced(kCommand, args.trace, /*keep_files=*/traced, extra);
  const Status reset = runtime::FinishClockWatchdog(&*watchdog, journal);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!reset.ok()) return Fail(kCommand, reset);
  return code;
}

}  // namespace

void SetupRun(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a CUDA program unmodified with its SM clock following a policy from `emo optimize --policy`: EMO's "
      "injection library counts the program's kernel launches, recognises the planned iteration and asks for each "
      "pack's clock ahead of it; it falls back to the default clock when the launches stop matching the plan or "
      "when iterations exceed the plan's target by more than --guard. Clocks go back to the default when the program "
      "exits, when emo is interrupted or terminated, and (through a watchdog process) when the program or emo is "
      "killed. Time and energy per iteration are measured as by `emo monitor`. Actuators: dry-run (default; changes "
      "nothing, writes each switch it would make), nvml (locks clocks; needs root or CAP_SYS_ADMIN), zeusd (asks a "
      "running zeusd; needs its socket), emulate (changes nothing; adds the plan's predicted extra time as spin kernels "
      "on the program's streams, so the step time under the plan can be measured where clocks must not change). Example: emo run --policy plan.json --actuator dry-run -- python train.py");
  cmd->add_option("--policy", args->policy, "Clock policy from `emo optimize TRACE --policy F`")->required();
  cmd->add_option("--actuator", args->actuator,
                  "How clocks are set: dry-run (nothing changes), nvml (root or CAP_SYS_ADMIN), zeusd (a running zeusd, "
                  "socket $EMO_ZEUSD_SOCKET or /var/run/zeusd.sock), emulate (nothing changes; after the launches the "
                  "policy names, a spin kernel on the launch's stream adds the time the model says the plan's clocks "
                  "would add, so the measured step tests the plan's slowdown)")
      ->check(CLI::IsMember({"dry-run", "nvml", "zeusd", "emulate"}));
  cmd->add_option("--guard", args->guard_pct,
                  "Back to the default clock for the rest of the run when the median of 15 iterations under the plan "
                  "stays above this run's own iterations at the default clock (5, timed before the plan starts) times "
                  "the plan's allowed slowdown by more than this, %, for 3 iterations; the default clock is timed again every "
                  "50 iterations under the plan; 0 = off (the plan starts at once and holds)")
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--switch-log", args->switch_log, "dry-run, emulate: where each switch is written, one JSON line each");
  cmd->add_option("--switch-on", args->switch_on,
                  "When a pack's clock is set: gpu (default) once the op the policy names before the pack (its "
                  "gpu_switch_call, which ended a switch lead before the pack in the trace) has completed on the GPU, "
                  "watched through a CUDA event recorded behind it; launch: as soon as the program makes the launch call "
                  "of the policy's switch_call (the CPU's run-ahead moves it against the GPU). Packs without a "
                  "gpu_switch_call switch at their launch call either way")
      ->check(CLI::IsMember({"gpu", "launch"}));
  cmd->add_option("--trace", args->trace_output,
                  "Also trace a window of the run into this file (as `emo trace -o`: %r = rank, %p = pid, %h = host): "
                  "its report sets each pack switch against the GPU start of its pack's first op (switch timing)");
  AddWindowFlags(cmd, args->trace.launch, "With --trace: ");
  AddLaunchFlags(cmd, args->trace);
  cmd->callback([args, &exit_code] { exit_code = RunWithPolicy(*args); });
}

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
  AddWindowFlags(cmd, args->launch, "");
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
