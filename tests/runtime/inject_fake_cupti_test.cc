// libemo_inject.so end to end on a stand-in libcupti (fake_cupti.cc): a child process plays a
// training loop (kernel launches at times the test sets, NVTX ranges), the library traces it,
// and the test reads the file it wrote. The only waits are for the tracer's thread to switch
// the activities, which the test needs to know to say which launches must have records; they
// carry a generous safety timeout, not a timing expectation.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/report/run_report.h"
#include "emo/trace/reader.h"
#include "runtime/chunk_walker.h"
namespace emo::runtime {
namespace {

constexpr int64_t kUs = 1000;
constexpr int kWaitMs = 60000;

struct Hooks {
  void (*set_time)(int64_t) = nullptr;
  void (*create_context)(uint32_t) = nullptr;
  void (*launch)(uint64_t) = nullptr;
  void (*push)(const char*) = nullptr;
  void (*pop)() = nullptr;
  int (*wait_activity)(int, int) = nullptr;
  void (*stream_sync)() = nullptr;
  int (*wait_launch_callback)(int, int) = nullptr;
  // The block calls (Python's `with emo.trace`), for a child started without the injection.
  int (*begin)(const char*, char*, size_t) = nullptr;
  int (*end)(const char*, char*, size_t) = nullptr;
  int (*finalized)() = nullptr;
  int (*stray_calls)(int during) = nullptr;
  void (*graph_launch)(uint64_t exec) = nullptr;
};

struct ChildResult {
  int exit_code = -1;
  std::string err;
};

// Forks; the child loads the fake CUPTI and the library, sets `env`, calls InitializeInjection
// (unless `inject` is false: a program that loaded the library itself), runs `play`, and exits
// through exit() (so the library's exit handler writes the end).
ChildResult RunChild(const std::map<std::string, std::string>& env, const std::function<void(const Hooks&)>& play,
                     bool inject = true) {
  int err_pipe[2];
  ChildResult result;
  if (pipe(err_pipe) != 0) return result;
  const pid_t child = fork();
  if (child == 0) {
    dup2(err_pipe[1], 2);
    close(err_pipe[0]);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    // `emo run`'s tests name the GPU through a stand-in driver, loaded as a CUDA program has it.
    if (env.count("TEST_FAKE_CUDA") != 0 && dlopen(EMO_FAKE_CUDA_PATH, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::fprintf(stderr, "dlopen fake cuda: %s\n", dlerror());
      _exit(9);
    }
    void* fake = dlopen(EMO_FAKE_CUPTI_PATH, RTLD_NOW | RTLD_GLOBAL);
    if (fake == nullptr) {
      std::fprintf(stderr, "dlopen fake: %s\n", dlerror());
      _exit(10);
    }
    void* library = dlopen(EMO_INJECT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      std::fprintf(stderr, "dlopen inject: %s\n", dlerror());
      _exit(11);
    }
    Hooks h;
    h.set_time = reinterpret_cast<void (*)(int64_t)>(dlsym(fake, "FakeCuptiSetTime"));
    h.create_context = reinterpret_cast<void (*)(uint32_t)>(dlsym(fake, "FakeCuptiCreateContext"));
    h.launch = reinterpret_cast<void (*)(uint64_t)>(dlsym(fake, "FakeCuptiLaunch"));
    h.push = reinterpret_cast<void (*)(const char*)>(dlsym(fake, "FakeCuptiNvtxPushA"));
    h.pop = reinterpret_cast<void (*)()>(dlsym(fake, "FakeCuptiNvtxPop"));
    h.wait_activity = reinterpret_cast<int (*)(int, int)>(dlsym(fake, "FakeCuptiWaitActivity"));
    h.stream_sync = reinterpret_cast<void (*)()>(dlsym(fake, "FakeCuptiStreamSync"));
    h.wait_launch_callback = reinterpret_cast<int (*)(int, int)>(dlsym(fake, "FakeCuptiWaitLaunchCallback"));
    h.finalized = reinterpret_cast<int (*)()>(dlsym(fake, "FakeCuptiFinalized"));
    h.stray_calls = reinterpret_cast<int (*)(int)>(dlsym(fake, "FakeCuptiStrayCalls"));
    h.graph_launch = reinterpret_cast<void (*)(uint64_t)>(dlsym(fake, "FakeCuptiGraphLaunch"));
    h.begin = reinterpret_cast<int (*)(const char*, char*, size_t)>(dlsym(library, "emo_trace_begin"));
    h.end = reinterpret_cast<int (*)(const char*, char*, size_t)>(dlsym(library, "emo_trace_end"));
    auto init = reinterpret_cast<int (*)()>(dlsym(library, "InitializeInjection"));
    if (init == nullptr || h.launch == nullptr || h.wait_activity == nullptr || h.stream_sync == nullptr ||
        h.wait_launch_callback == nullptr || h.begin == nullptr || h.end == nullptr || h.finalized == nullptr ||
        h.stray_calls == nullptr || h.graph_launch == nullptr) {
      _exit(12);
    }
    if (inject && init() != 1) _exit(13);
    play(h);
    std::exit(0);
  }
  close(err_pipe[1]);
  char buffer[4096];
  ssize_t n = 0;
  while ((n = read(err_pipe[0], buffer, sizeof(buffer))) > 0) result.err.append(buffer, static_cast<size_t>(n));
  close(err_pipe[0]);
  int status = 0;
  waitpid(child, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// The loop of the scenarios: five kernels, the host waits 5 ms before the first.
class Loop {
 public:
  explicit Loop(const Hooks& h) : h_(h) {}
  void Launch(int i) {
    time_ += i == 0 ? 5000 * kUs : 20 * kUs;
    h_.set_time(time_);
    h_.launch(0xA000 + static_cast<uint64_t>(i));
  }
  void Iteration() {
    for (int i = 0; i < 5; ++i) Launch(i);
  }
  int64_t time() const { return time_; }
  void Advance(int64_t ns) {
    time_ += ns;
    h_.set_time(time_);
  }

 private:
  const Hooks& h_;
  int64_t time_ = 2'000'000'000;
};

// In the child: writes "thread <name>" to stderr for each of the process's threads.
void SayThreadNames() {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) std::fprintf(stderr, "thread %s\n", name.c_str());
  }
}

bool SaidThread(const std::string& err, const std::string& name) {
  return err.find("thread " + name + "\n") != std::string::npos;
}

void Wait(const Hooks& h, int on, const char* where) {
  if (!h.wait_activity(on, kWaitMs))
    std::fprintf(stderr, "TEST: activities did not turn %s %s\n", on ? "on" : "off", where);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every stderr line is the library's, and none reports a failure (NVML may be missing here),
// but for lines holding `expected` (one the test provokes).
void ExpectQuiet(const std::string& err, const char* expected = nullptr) {
  for (const std::string& line : Lines(err)) {
    if (expected != nullptr && line.find(expected) != std::string::npos) continue;
    EXPECT_EQ(line.rfind("emo trace: ", 0), 0u) << line;
    EXPECT_EQ(line.find("failed"), std::string::npos) << line;
    EXPECT_EQ(line.find("untraced"), std::string::npos) << line;
  }
}

class InjectFakeCuptiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("emo_fake_" + std::to_string(getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Out() const { return (dir_ / "t_%r.emotrace").string(); }
  std::vector<Chunk> Read(const std::string& rank) const {
    return WalkChunks(ReadFile((dir_ / ("t_" + rank + ".emotrace")).string()));
  }

  std::filesystem::path dir_;
};

TEST_F(InjectFakeCuptiTest, LaunchPeriodWindow) {
  const ChildResult r =
      RunChild({{"EMO_TRACE_OUT", Out()}, {"RANK", "3"}, {"EMO_TRACE_WARMUP", "6"}, {"EMO_TRACE_ITERATIONS", "2"}},
               [](const Hooks& h) {
                 Loop loop(h);
                 h.create_context(0);
                 // Activities are on from the start (the loop is found at the first launch of
                 // iteration 3) through the warm-up and the window, and go off only after it.
                 for (int k = 0; k < 3; ++k) loop.Iteration();
                 loop.Launch(0);
                 for (int i = 1; i < 5; ++i) loop.Launch(i);
                 loop.Iteration();  // 4
                 loop.Launch(0);    // 5: the lead-in
                 for (int i = 1; i < 5; ++i) loop.Launch(i);
                 loop.Iteration();  // 6
                 loop.Iteration();  // 7
                 loop.Launch(0);    // 8: the window is over
                 Wait(h, 0, "after the window");
                 for (int i = 1; i < 5; ++i) loop.Launch(i);
                 loop.Iteration();  // 9
                 loop.Iteration();  // 10
               });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectQuiet(r.err);
  const std::vector<Chunk> chunks = Read("3");
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back().kind, static_cast<uint32_t>(fmt::ChunkKind::kEnd));
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["format"], "emo-trace");
  EXPECT_EQ(meta["rank"], "3");
  EXPECT_EQ(meta["config.mode"], "trace");
  EXPECT_EQ(meta["config.warmup"], "6");
  EXPECT_EQ(meta["iteration.source"], "launch_period");
  EXPECT_EQ(meta["window.first_iteration"], "6");
  EXPECT_EQ(meta["window.last_iteration"], "7");
  EXPECT_EQ(meta["window.complete"], "1");
  EXPECT_EQ(meta["end.reason"], "exit");
  EXPECT_EQ(meta["launches.seen"], "55");
  EXPECT_EQ(meta["launch_period.loops"], "1");
  // 41 kernels and 41 API calls (everything is on from the start to the window's end), 10
  // iterations, 1 GPU.
  EXPECT_EQ(meta["records.written"], "93");
  EXPECT_EQ(meta["records.incomplete"], "0");
  EXPECT_FALSE(meta["clock.cupti_ns"].empty());

  const auto iterations = Records<fmt::IterationRecord>(chunks, fmt::RecordType::kIteration);
  ASSERT_EQ(iterations.size(), 10u);  // 0..9; iteration 10 has not ended
  for (size_t i = 0; i < iterations.size(); ++i) {
    EXPECT_EQ(iterations[i].index, i);
    EXPECT_EQ(iterations[i].source, static_cast<uint32_t>(fmt::IterationSource::kLaunchPeriod));
    EXPECT_EQ(iterations[i].launches, 5u);
    EXPECT_EQ(iterations[i].traced, i == 6 || i == 7 ? 1u : 0u) << i;
    EXPECT_EQ(iterations[i].name, fmt::kNoName);
    EXPECT_EQ(iterations[i].end_ns - iterations[i].start_ns, 5000 * kUs + 4 * 20 * kUs);
    if (i > 0) {
      EXPECT_EQ(iterations[i].start_ns, iterations[i - 1].end_ns);
    }
  }

  // Kernel records: every launch from the first to the one that ended the window.
  const auto kernels = Records<fmt::KernelRecord>(chunks, fmt::RecordType::kKernel);
  const auto strings = Strings(chunks);
  std::vector<uint64_t> correlations;
  for (const auto& k : kernels) {
    correlations.push_back(k.correlation);
    ASSERT_TRUE(strings.count(k.name));
    EXPECT_EQ(strings.at(k.name).rfind("void kernel<", 0), 0u) << strings.at(k.name);  // demangled
    EXPECT_EQ(k.graph_id, fmt::kNone);
    EXPECT_EQ(k.end_ns - k.start_ns, 1000);
  }
  std::vector<uint64_t> expected;
  for (uint64_t c = 1; c <= 41; ++c) expected.push_back(c);
  EXPECT_EQ(correlations, expected);
  // The window's iterations, 6 and 7, are traced whole.
  size_t in_window = 0;
  for (const auto& k : kernels) in_window += k.start_ns >= iterations[6].start_ns && k.start_ns < iterations[7].end_ns;
  EXPECT_EQ(in_window, 10u);
  // API calls: every launch from the start to the one that ended the window, with no gap.
  const auto apis = Records<fmt::ApiRecord>(chunks, fmt::RecordType::kApi);
  ASSERT_EQ(apis.size(), 41u);
  for (size_t i = 0; i < apis.size(); ++i) EXPECT_EQ(apis[i].correlation, i + 1);
  for (const auto& a : apis) {
    EXPECT_EQ(strings.at(a.name), "cudaLaunchKernel");
    EXPECT_EQ(a.driver, 0u);
  }
  const auto gpus = Records<fmt::GpuRecord>(chunks, fmt::RecordType::kGpu);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].device, 0u);
  EXPECT_TRUE(strings.count(gpus[0].name));
  EXPECT_TRUE(Records<fmt::DroppedRecord>(chunks, fmt::RecordType::kDropped).empty());
}

TEST_F(InjectFakeCuptiTest, NvtxIterationsInMonitorMode) {
  const ChildResult r = RunChild({{"EMO_TRACE_OUT", Out()}, {"EMO_TRACE_MODE", "monitor"}}, [](const Hooks& h) {
    Loop loop(h);
    h.create_context(1);
    for (int k = 0; k < 6; ++k) {
      loop.Advance(1000 * kUs);
      const std::string name = "ProfilerStep#" + std::to_string(k);
      h.push(name.c_str());
      h.push("forward");
      loop.Iteration();
      loop.Advance(10 * kUs);
      h.pop();
      h.pop();
    }
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectQuiet(r.err);
  // Without RANK the file is named by the pid: find the one file written.
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("t_pid", 0), 0u) << files[0];
  const std::vector<Chunk> all = WalkChunks(ReadFile(files[0].string()));
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().kind, static_cast<uint32_t>(fmt::ChunkKind::kEnd));
  auto meta = Meta(all);
  EXPECT_EQ(meta["config.mode"], "monitor");
  EXPECT_EQ(meta["iteration.source"], "nvtx");
  EXPECT_EQ(meta["iteration.nvtx_key"], "ProfilerStep#N");
  EXPECT_EQ(meta["rank"], "-1");
  const auto strings = Strings(all);
  const auto iterations = Records<fmt::IterationRecord>(all, fmt::RecordType::kIteration);
  ASSERT_EQ(iterations.size(), 5u);  // steps 0..4 end where the next starts; step 5 has no next
  for (size_t i = 0; i < iterations.size(); ++i) {
    EXPECT_EQ(iterations[i].index, i);
    EXPECT_EQ(iterations[i].source, static_cast<uint32_t>(fmt::IterationSource::kNvtx));
    EXPECT_EQ(iterations[i].traced, 0u);
    ASSERT_TRUE(strings.count(iterations[i].name));
    EXPECT_EQ(strings.at(iterations[i].name), "ProfilerStep#" + std::to_string(i));
    EXPECT_EQ(iterations[i].end_ns - iterations[i].start_ns, 1000 * kUs + 5000 * kUs + 4 * 20 * kUs + 10 * kUs);
  }
  const auto ranges = Records<fmt::RangeRecord>(all, fmt::RecordType::kRange);
  ASSERT_EQ(ranges.size(), 12u);
  for (size_t i = 0; i < ranges.size(); i += 2) {
    // "forward" pops first, at depth 1, inside its step at depth 0.
    EXPECT_EQ(strings.at(ranges[i].name), "forward");
    EXPECT_EQ(ranges[i].depth, 1u);
    EXPECT_EQ(strings.at(ranges[i + 1].name), "ProfilerStep#" + std::to_string(i / 2));
    EXPECT_EQ(ranges[i + 1].depth, 0u);
    EXPECT_EQ(ranges[i].start_ns, ranges[i + 1].start_ns);
    EXPECT_EQ(ranges[i].end_ns, ranges[i + 1].end_ns);
    EXPECT_EQ(ranges[i].end_ns - ranges[i].start_ns, 5000 * kUs + 4 * 20 * kUs + 10 * kUs);
  }
  // Monitor mode: no activity records at all.
  EXPECT_TRUE(Records<fmt::KernelRecord>(all, fmt::RecordType::kKernel).empty());
  EXPECT_TRUE(Records<fmt::ApiRecord>(all, fmt::RecordType::kApi).empty());
  EXPECT_EQ(Records<fmt::GpuRecord>(all, fmt::RecordType::kGpu).size(), 1u);
}

TEST_F(InjectFakeCuptiTest, NoLoopMeansTracedFromStartToExit) {
  const ChildResult r = RunChild({{"EMO_TRACE_OUT", Out()}, {"RANK", "0"}}, [](const Hooks& h) {
    Loop loop(h);
    // Twenty different kernels, each once: nothing repeats.
    for (uint64_t i = 0; i < 20; ++i) {
      loop.Advance(100 * kUs);
      h.launch(0xB000 + i);
    }
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectQuiet(r.err);
  const std::vector<Chunk> chunks = Read("0");
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back().kind, static_cast<uint32_t>(fmt::ChunkKind::kEnd));
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["iteration.source"], "none");
  EXPECT_FALSE(meta["window.note"].empty());
  EXPECT_TRUE(Records<fmt::IterationRecord>(chunks, fmt::RecordType::kIteration).empty());
  EXPECT_EQ(Records<fmt::KernelRecord>(chunks, fmt::RecordType::kKernel).size(), 20u);
}

// A program whose CUDA is running traces blocks of its loop itself (Python's `with emo.trace`):
// nothing before or after a block is recorded, the context made before the block is known (its
// GPU is named without a creation callback), the block's iterations count from its start, and a
// second block writes a second file. Misuse fails with a reason and leaves the block alone.
TEST_F(InjectFakeCuptiTest, ABlockOfARunningProgramIsTracedAloneAndLearnsItsContexts) {
  const std::string first = (dir_ / "b1_%r.emotrace").string();
  const std::string second = (dir_ / "b2_%r.emotrace").string();
  const ChildResult r = RunChild(
      {{"RANK", "5"}, {"TEST_FAKE_CUDA", "1"}, {"FAKE_CUDA_PRIMARY", "2"}, {"FAKE_CUDA_LOG", (dir_ / "cuda.log").string()}},
      [&](const Hooks& h) {
        char out[512];
        auto say = [&](const char* what) { std::fprintf(stderr, "TEST: %s: %s\n", what, out); };
        Loop loop(h);
        for (int k = 0; k < 3; ++k) loop.Iteration();  // correlations 1..15, untraced
        const std::string settings =
            "EMO_TRACE_OUT=" + first + "\nEMO_TRACE_WARMUP=2\nEMO_TRACE_ITERATIONS=2\n";
        if (h.begin(settings.c_str(), out, sizeof(out)) != 0) say("begin failed");
        if (std::string(out) != (dir_ / "b1_5.emotrace").string()) say("begin named");
        if (h.begin(settings.c_str(), out, sizeof(out)) == 0 || std::string(out).find("already") == std::string::npos) {
          say("a nested begin");
        }
        for (int k = 0; k < 5; ++k) loop.Iteration();  // block iterations 0..4
        loop.Launch(0);  // 5 begins: the window [2, 4) is over
        Wait(h, 0, "after the window");
        for (int i = 1; i < 5; ++i) loop.Launch(i);
        loop.Iteration();  // 6
        loop.Launch(0);    // ends iteration 6
        if (h.end("", out, sizeof(out)) != 0) say("end failed");
        if (std::string(out) != (dir_ / "b1_5.emotrace").string()) say("end named");
        if (h.finalized() != 1) say("a block that traced did not detach CUPTI");
        for (int i = 1; i < 5; ++i) loop.Launch(i);
        if (h.end("", out, sizeof(out)) == 0 || std::string(out) != "no block is being traced") say("a second end");
        if (h.begin("EMO_TRACE_WARMUP=lots", out, sizeof(out)) == 0 || std::string(out).find("EMO_TRACE_WARMUP") == std::string::npos) {
          say("a bad value");
        }
        const std::string monitor = "EMO_TRACE_OUT=" + second + "\nEMO_TRACE_MODE=monitor\n";
        if (h.begin(monitor.c_str(), out, sizeof(out)) != 0) say("second begin failed");
        for (int k = 0; k < 4; ++k) loop.Iteration();
        loop.Launch(0);
        if (h.end("done", out, sizeof(out)) != 0) say("second end failed");
        if (h.finalized() != 1) say("a block that only monitored detached CUPTI");
      },
      /*inject=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  ExpectQuiet(r.err);

  const std::vector<Chunk> chunks = WalkChunks(ReadFile((dir_ / "b1_5.emotrace").string()));
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back().kind, static_cast<uint32_t>(fmt::ChunkKind::kEnd));
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["session.begin"], "block");
  EXPECT_EQ(meta["end.reason"], "block_end");
  EXPECT_EQ(meta["iteration.source"], "launch_period");
  EXPECT_EQ(meta["window.first_iteration"], "2");
  EXPECT_EQ(meta["window.last_iteration"], "3");
  EXPECT_EQ(meta["window.complete"], "1");
  EXPECT_EQ(meta["launches.seen"], "36");  // the block's own launches: 7 iterations and one
  const auto iterations = Records<fmt::IterationRecord>(chunks, fmt::RecordType::kIteration);
  ASSERT_EQ(iterations.size(), 7u);
  for (size_t i = 0; i < iterations.size(); ++i) {
    EXPECT_EQ(iterations[i].index, i);
    EXPECT_EQ(iterations[i].traced, i == 2 || i == 3 ? 1u : 0u) << i;
  }
  // Kernels from the block's first launch (correlation 16) on; none from before it.
  const auto kernels = Records<fmt::KernelRecord>(chunks, fmt::RecordType::kKernel);
  ASSERT_FALSE(kernels.empty());
  for (const auto& k : kernels) {
    EXPECT_GE(k.correlation, 16u);
    EXPECT_LE(k.correlation, 16u + 25u);  // through the launch that began iteration 5
  }
  EXPECT_EQ(kernels.front().correlation, 16u);
  // The GPU of the context that existed before the block, learned from the driver.
  const auto gpus = Records<fmt::GpuRecord>(chunks, fmt::RecordType::kGpu);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].device, 2u);

  const std::vector<Chunk> monitor = WalkChunks(ReadFile((dir_ / "b2_5.emotrace").string()));
  ASSERT_FALSE(monitor.empty());
  EXPECT_EQ(monitor.back().kind, static_cast<uint32_t>(fmt::ChunkKind::kEnd));
  auto monitor_meta = Meta(monitor);
  EXPECT_EQ(monitor_meta["config.mode"], "monitor");
  EXPECT_EQ(monitor_meta["end.reason"], "done");
  EXPECT_EQ(monitor_meta["launches.seen"], "21");
  EXPECT_TRUE(Records<fmt::KernelRecord>(monitor, fmt::RecordType::kKernel).empty());
  EXPECT_EQ(Records<fmt::IterationRecord>(monitor, fmt::RecordType::kIteration).size(), 4u);
  // Each retained primary context was released again.
  std::ifstream log(dir_ / "cuda.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  size_t retains = 0;
  size_t releases = 0;
  for (const std::string& line : Lines(text)) {
    retains += line == "retain 2";
    releases += line == "release 2";
  }
  EXPECT_EQ(retains, 2u) << text;
  EXPECT_EQ(releases, 2u) << text;
}

// The detach scenarios: begins a block of `loop` (warm-up 2, 2 traced, output `out`) and runs
// it through its window: block iterations 0..4 and the launches of 5, the activities off.
void BlockThroughItsWindow(const Hooks& h, Loop& loop, const std::string& out) {
  char text[512];
  const std::string settings = "EMO_TRACE_OUT=" + out + "\nEMO_TRACE_WARMUP=2\nEMO_TRACE_ITERATIONS=2\n";
  if (h.begin(settings.c_str(), text, sizeof(text)) != 0) std::fprintf(stderr, "TEST: begin: %s\n", text);
  for (int k = 0; k < 5; ++k) loop.Iteration();  // block iterations 0..4
  loop.Launch(0);                                 // 5 begins: the window [2, 4) is over
  Wait(h, 0, "after the window");
  for (int i = 1; i < 5; ++i) loop.Launch(i);
}

// After the detach: waits until the tracer subscribed again, runs `iterations` more and ends the
// block, which must not detach a second time. Returns the loop's time when it went on.
int64_t EndBlockAfterItsDetach(const Hooks& h, Loop& loop, int iterations) {
  char text[512];
  if (!h.wait_launch_callback(1, kWaitMs)) std::fprintf(stderr, "TEST: not subscribed again\n");
  const int64_t went_on = loop.time();
  for (int k = 0; k < iterations; ++k) loop.Iteration();
  loop.Launch(0);
  if (h.end("", text, sizeof(text)) != 0) std::fprintf(stderr, "TEST: end: %s\n", text);
  if (h.finalized() != 1) std::fprintf(stderr, "TEST: the block's end detached again\n");
  return went_on;
}

// A block's window is traced, and CUPTI is detached after it (cuptiFinalize): activities enabled
// on a running context slow the program's calls until then. This loop never waits for the GPU
// (no sync, no copy to the host), so the detach comes once the window's last records are fetched
// (the forced flush, 2 s after the window), at the next launch's exit. The session subscribes
// again and finds the loop anew: the block's later iterations are recorded, none spans the
// detach, and the block's end does not detach a second time.
TEST_F(InjectFakeCuptiTest, ABlockDetachesCuptiAfterItsWindowAndGoesOnCountingIterations) {
  const std::string out = (dir_ / "d_%r.emotrace").string();
  const std::string after_file = (dir_ / "after").string();
  const ChildResult r = RunChild(
      {{"RANK", "6"}, {"TEST_FAKE_CUDA", "1"}, {"FAKE_CUDA_PRIMARY", "0"}}, [&](const Hooks& h) {
        Loop loop(h);
        loop.Iteration();
        BlockThroughItsWindow(h, loop, out);
        if (h.finalized() != 0) std::fprintf(stderr, "TEST: detached before the window's records were fetched\n");
        // On past the forced flush: the tracer's thread asks, and a launch's exit detaches.
        const int64_t flush_at = loop.time() + 2'000'000 * kUs;
        bool detached = false;
        for (int k = 0; k < kWaitMs && !detached; ++k) {
          loop.Iteration();
          detached = h.finalized() == 1;
          if (!detached && loop.time() > flush_at) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (!detached) std::fprintf(stderr, "TEST: CUPTI was not detached after the window\n");
        std::ofstream(after_file) << EndBlockAfterItsDetach(h, loop, 8) << "\n";
        if (const int n = h.stray_calls(0); n != 0) std::fprintf(stderr, "TEST: %d CUPTI calls while detached\n", n);
      },
      /*inject=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  ExpectQuiet(r.err);

  const std::vector<Chunk> chunks = WalkChunks(ReadFile((dir_ / "d_6.emotrace").string()));
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back().kind, static_cast<uint32_t>(fmt::ChunkKind::kEnd));
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["cupti.detaches"], "1");
  EXPECT_EQ(meta["window.complete"], "1");
  EXPECT_EQ(meta["window.count"], "1");
  int64_t after = 0;
  std::ifstream(after_file) >> after;
  ASSERT_GT(after, 0);
  const auto iterations = Records<fmt::IterationRecord>(chunks, fmt::RecordType::kIteration);
  ASSERT_FALSE(iterations.empty());
  // Each iteration is one loop period, none across the hole, and after the new subscription the
  // loop is found again within the eight iterations (the finder locks after a few repeats).
  for (size_t i = 0; i < iterations.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(iterations[i].index, iterations[i - 1].index);
    }
    EXPECT_EQ(iterations[i].end_ns - iterations[i].start_ns, 5080 * kUs) << i;
  }
  EXPECT_GE(iterations.back().start_ns, after + 3 * 5080 * kUs);
  // Kernels of the window only: none after the activities went off.
  for (const auto& k : Records<fmt::KernelRecord>(chunks, fmt::RecordType::kKernel)) {
    EXPECT_LT(k.start_ns, 2'000'000'000 + 100'000 * kUs);
  }
}

// A CUDA graph launched while the block traced: CUPTI's detach would make the graph's later
// launches fail (measured with CUPTI alone: bench/gpu/detach_diag.sh), so the block never
// detaches, neither at the syncs after its window nor at its end, and says so once.
TEST_F(InjectFakeCuptiTest, ABlockThatTracedACudaGraphNeverDetachesCupti) {
  const std::string out = (dir_ / "g_%r.emotrace").string();
  const ChildResult r = RunChild(
      {{"RANK", "9"}, {"TEST_FAKE_CUDA", "1"}, {"FAKE_CUDA_PRIMARY", "0"}}, [&](const Hooks& h) {
        Loop loop(h);
        char text[512];
        const std::string settings = "EMO_TRACE_OUT=" + out + "\nEMO_TRACE_WARMUP=2\nEMO_TRACE_ITERATIONS=2\n";
        if (h.begin(settings.c_str(), text, sizeof(text)) != 0) std::fprintf(stderr, "TEST: begin: %s\n", text);
        for (int k = 0; k < 5; ++k) {
          loop.Iteration();
          h.graph_launch(0xC0DE);
        }
        loop.Launch(0);
        Wait(h, 0, "after the window");
        // As long as the detach-at-a-sync test gives its detach, and then some.
        for (int k = 0; k < 300; ++k) {
          h.stream_sync();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (h.finalized() != 0) std::fprintf(stderr, "TEST: detached at a sync after a traced graph\n");
        for (int i = 1; i < 5; ++i) loop.Launch(i);
        if (h.end("", text, sizeof(text)) != 0) std::fprintf(stderr, "TEST: end: %s\n", text);
        if (h.finalized() != 0) std::fprintf(stderr, "TEST: the block's end detached after a traced graph\n");
      },
      /*inject=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  const char* kSkip = "CUPTI stays attached after the window: a CUDA graph ran while it traced";
  ExpectQuiet(r.err, kSkip);
  const size_t said = r.err.find(kSkip);
  ASSERT_NE(said, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(kSkip, said + 1), std::string::npos) << "said more than once: " << r.err;
  const std::vector<Chunk> chunks = WalkChunks(ReadFile((dir_ / "g_9.emotrace").string()));
  ASSERT_FALSE(chunks.empty());
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["cupti.detach_skipped"], "a CUDA graph ran while CUPTI traced");
  EXPECT_EQ(meta["cupti.detaches"], "0");
  EXPECT_EQ(meta["window.complete"], "1");
}

// A loop that waits for the GPU (a stream sync): the block detaches CUPTI at the exit of the
// first sync after its window, long before the 2 s fallback, and the window's records are all in
// the file (flushed before the detach).
TEST_F(InjectFakeCuptiTest, ABlockDetachesCuptiAtTheFirstWaitAfterItsWindow) {
  const std::string out = (dir_ / "w_%r.emotrace").string();
  const ChildResult r = RunChild(
      {{"RANK", "7"}, {"TEST_FAKE_CUDA", "1"}, {"FAKE_CUDA_PRIMARY", "0"}}, [&](const Hooks& h) {
        Loop loop(h);
        BlockThroughItsWindow(h, loop, out);
        const int64_t window_over = loop.time();
        // The tracer's thread asks for the detach just after it turned the activities off.
        for (int k = 0; k < kWaitMs && h.finalized() == 0; ++k) {
          h.stream_sync();
          if (h.finalized() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (h.finalized() != 1) std::fprintf(stderr, "TEST: the sync after the window did not detach CUPTI\n");
        if (loop.time() != window_over) std::fprintf(stderr, "TEST: the clock moved\n");
        EndBlockAfterItsDetach(h, loop, 6);
        if (const int n = h.stray_calls(0); n != 0) std::fprintf(stderr, "TEST: %d CUPTI calls while detached\n", n);
      },
      /*inject=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  ExpectQuiet(r.err);
  const std::vector<Chunk> chunks = WalkChunks(ReadFile((dir_ / "w_7.emotrace").string()));
  ASSERT_FALSE(chunks.empty());
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["cupti.detaches"], "1");
  EXPECT_EQ(meta["records.incomplete"], "0");
  // Every launch from the block's start through the one that ended the window has its kernel
  // (correlations 1..26: activities were on from the start).
  const auto kernels = Records<fmt::KernelRecord>(chunks, fmt::RecordType::kKernel);
  std::vector<uint64_t> seen;
  for (const auto& k : kernels) seen.push_back(k.correlation);
  std::sort(seen.begin(), seen.end());
  ASSERT_GE(seen.size(), 26u);
  for (uint64_t c = 1; c <= 26; ++c) EXPECT_TRUE(std::binary_search(seen.begin(), seen.end(), c)) << c;
  EXPECT_GE(Records<fmt::IterationRecord>(chunks, fmt::RecordType::kIteration).size(), 7u);
}

// A loop that reads its loss back once per iteration (a stream sync after its last launch):
// once the window is traced and the sync has been seen once in each of 16 iterations, the
// launch callbacks go off and the syncs time the iterations; when the syncs stop, the
// callbacks come back on and the launch period is found again.
TEST_F(InjectFakeCuptiTest, AnchorCallTimesIterationsWithLaunchCallbacksOff) {
  constexpr int64_t kIterationNs = 5000 * kUs + 4 * 20 * kUs;
  // How many iterations the first stretch took (the child writes it): the tracer's thread picks
  // the anchor after the window and 16 iterations, however fast it runs beside this one.
  const std::string first_stretch = (dir_ / "first_stretch").string();
  const ChildResult r =
      RunChild({{"EMO_TRACE_OUT", Out()}, {"RANK", "4"}, {"EMO_TRACE_WARMUP", "2"}, {"EMO_TRACE_ITERATIONS", "2"}},
               [&first_stretch](const Hooks& h) {
                 Loop loop(h);
                 h.create_context(0);
                 auto iteration = [&](bool sync) {
                   loop.Iteration();
                   if (sync) h.stream_sync();  // at the last launch's time: the loop top stays the top
                 };
                 // Until the launch callbacks go off (at least 24 iterations, at most 400, each
                 // giving the tracer's thread up to 2 ms to catch up).
                 int n = 0;
                 for (; n < 400 && (n < 24 || !h.wait_launch_callback(0, 2)); ++n) iteration(true);
                 if (FILE* f = std::fopen(first_stretch.c_str(), "w")) {
                   std::fprintf(f, "%d\n", n);
                   std::fclose(f);
                 }
                 loop.Launch(0);
                 if (!h.wait_launch_callback(0, kWaitMs)) std::fprintf(stderr, "TEST: launch callbacks stayed on\n");
                 for (int i = 1; i < 5; ++i) loop.Launch(i);
                 h.stream_sync();
                 for (int k = 0; k < 10; ++k) iteration(true);
                 // The tracer's thread reads the (fake) clock when it gets to these syncs: give
                 // it real time to do so before the clock jumps two seconds ahead.
                 std::this_thread::sleep_for(std::chrono::milliseconds(200));
                 // The syncs stop (another phase of the program): after a second of silence the
                 // launch callbacks are back and the loop is found again from its launches.
                 loop.Advance(2'000'000'000);
                 if (!h.wait_launch_callback(1, kWaitMs)) std::fprintf(stderr, "TEST: launch callbacks stayed off\n");
                 for (int k = 0; k < 8; ++k) iteration(false);
               });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectQuiet(r.err);
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  const std::vector<Chunk> chunks = Read("4");
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back().kind, static_cast<uint32_t>(fmt::ChunkKind::kEnd));
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["iteration.source"], "launch_period");
  EXPECT_EQ(meta["iteration.anchor"], "cudaStreamSynchronize");
  EXPECT_EQ(meta["iteration.anchor_count"], "1");
  EXPECT_EQ(meta["anchor.follows"], "1");
  EXPECT_EQ(meta["anchor.given_up"], "1");
  EXPECT_EQ(meta["anchor.given_up_reason"], "the anchor call stopped coming");
  EXPECT_EQ(meta["launch_period.loops"], "2");  // found again after the anchor was given up
  EXPECT_EQ(meta["window.complete"], "1");
  // The iterations before the launch callbacks went off, each ending at its sync.
  int n = 0;
  if (FILE* f = std::fopen(first_stretch.c_str(), "r")) {
    EXPECT_EQ(std::fscanf(f, "%d", &n), 1);
    std::fclose(f);
  }
  ASSERT_GE(n, 24);
  // While the launch callbacks were off, the program's threads met the tracer only at its syncs (4
  // callbacks each: runtime and driver, entry and exit). The tracer opens the stretch just before
  // it turns the callbacks off, so a tracer's thread held off the CPU between the two (a loaded
  // machine) opens it some syncs of the first stretch early: the bounds follow the anchored
  // iterations the tracer counted in the same stretch, not the program's view of it. Each of
  // them ended at a sync in the stretch; the first sync may start the first instead of ending
  // one, and the stretch may open inside one more iteration's sync.
  const uint64_t off = std::stoull(meta["callbacks.launch_off"]);
  const uint64_t off_iterations = std::stoull(meta["callbacks.launch_off_iterations"]);
  EXPECT_GE(off, off_iterations * 4);
  EXPECT_LE(off, off_iterations * 4 + 8);
  // At least the 11 syncs the program made after it saw the callbacks off (the first of them
  // may start the first anchored iteration), at most those and the first stretch's.
  EXPECT_GE(off_iterations, 10u);
  EXPECT_LE(off_iterations, 11u + static_cast<uint64_t>(n));
  // In all, every sync of both stretches (the first stretch's n, the 11 after, less one the
  // tracer may still be inside at the end of the first), and none of the launches
  // (launches.seen counts them): the first stretch's 5 * 2 launch callbacks per iteration would
  // be at least 240 more.
  const uint64_t non_launch = std::stoull(meta["callbacks.non_launch"]);
  const uint64_t syncs = static_cast<uint64_t>(n) + 11;
  EXPECT_GE(non_launch, off);
  EXPECT_GE(non_launch, (syncs - 1) * 4);
  EXPECT_LT(non_launch, (syncs + 1) * 4 + 5u * 2 * 24);
  // The reader hands them on: `emo trace --json` gives the callbacks per anchored iteration.
  const std::string path = (dir_ / "t_4.emotrace").string();
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const nlohmann::json cb = report::RunToJson(path, *t)["callbacks"];
  EXPECT_EQ(cb["launch_off"].get<uint64_t>(), off) << cb.dump();
  EXPECT_DOUBLE_EQ(cb["per_iteration_launch_off"].get<double>(),
                   static_cast<double>(off) / static_cast<double>(off_iterations));

  const auto iterations = Records<fmt::IterationRecord>(chunks, fmt::RecordType::kIteration);
  // Three stretches: launch-period iterations, anchored ones, launch-period ones again.
  std::vector<uint32_t> stretches;
  size_t anchored = 0;
  for (size_t i = 0; i < iterations.size(); ++i) {
    const auto& it = iterations[i];
    EXPECT_EQ(it.index, i);
    EXPECT_EQ(it.launches, 5u) << i;
    if (stretches.empty() || stretches.back() != it.source) stretches.push_back(it.source);
    if (it.source == static_cast<uint32_t>(fmt::IterationSource::kAnchor)) {
      ++anchored;
      EXPECT_EQ(it.traced, 0u);
      EXPECT_EQ(it.end_ns - it.start_ns, kIterationNs) << i;
      if (iterations[i - 1].source == it.source) {
        EXPECT_EQ(it.start_ns, iterations[i - 1].end_ns) << i;
      }
    } else if (it.end_ns - it.start_ns != kIterationNs) {
      // Only the launch-period iteration across the two-second pause is longer.
      EXPECT_EQ(it.end_ns - it.start_ns, kIterationNs + 2'000'000'000) << i;
    }
  }
  const auto lp = static_cast<uint32_t>(fmt::IterationSource::kLaunchPeriod);
  const auto an = static_cast<uint32_t>(fmt::IterationSource::kAnchor);
  EXPECT_EQ(stretches, (std::vector<uint32_t>{lp, an, lp}));
  // The syncs of the 11 iterations after the callbacks went off, and of the ones before it
  // that came after the anchor was chosen, end anchored iterations.
  EXPECT_GE(anchored, 10u);
  // Launches were not seen while anchored: fewer than every launch the program made.
  EXPECT_LT(std::stoul(meta["launches.seen"]), static_cast<unsigned long>(5 * (n + 1 + 10 + 8)));
}

// EMO_TRACE_QUIET_MS (bench/gpu/detach_stress.sh): once the window is traced and the loop is
// followed by its sync, the tracer detaches CUPTI at a sync for a phase (quiet), attaches again and
// finds the loop afresh. Its launch callbacks then stay on (CUPTI corrupts the heap when they are
// switched one by one after a detach: MayStopLaunchCallbacks), so it never settles again: one
// quiet phase a run, the marks engaged, detaching, quiet, after in EMO_TRACE_QUIET_LOG, and the
// iterations go on being recorded after the hole.
TEST_F(InjectFakeCuptiTest, QuietPhasesDetachOnceAndKeepTheLaunchCallbacksOnAfter) {
  const std::string log = (dir_ / "quiet.txt").string();
  // The NVML thread ticks every 50 ms on its own and the detach and the subscription after it
  // last 60 ms each: a CUPTI call of that thread (or any other) while cuptiFinalize runs, before
  // the next subscription, or while it attaches CUPTI is counted by the stand-in.
  const ChildResult r = RunChild({{"EMO_TRACE_OUT", Out()},
                                  {"RANK", "9"},
                                  {"EMO_TRACE_WARMUP", "2"},
                                  {"EMO_TRACE_ITERATIONS", "2"},
                                  {"EMO_TRACE_QUIET_MS", "40"},
                                  {"EMO_TRACE_QUIET_LOG", log},
                                  {"FAKE_CUPTI_FINALIZE_MS", "60"},
                                  {"FAKE_CUPTI_SUBSCRIBE_MS", "60"},
                                  {"TEST_FAKE_CUDA", "1"},
                                  {"EMO_NVML_LIBRARY", EMO_FAKE_NVML_PATH},
                                  {"FAKE_NVML_LOG", (dir_ / "nvml.log").string()},
                                  {"FAKE_NVML_POWER_W", "300"},
                                  {"FAKE_NVML_SM_MHZ", "1755"}},
                                 [](const Hooks& h) {
                                   Loop loop(h);
                                   h.create_context(0);
                                   // Each iteration ends at its sync and takes a real millisecond,
                                   // so a phase (real time) holds ~40 of them; at most a minute.
                                   for (int n = 0; n < kWaitMs && h.finalized() < 1; ++n) {
                                     loop.Iteration();
                                     h.stream_sync();
                                     std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                   }
                                   if (h.finalized() != 1) std::fprintf(stderr, "TEST: no quiet phase\n");
                                   // Long enough for several more phases, had the tracer settled.
                                   for (int n = 0; n < 400; ++n) {
                                     loop.Iteration();
                                     h.stream_sync();
                                     std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                   }
                                   if (h.finalized() != 1) std::fprintf(stderr, "TEST: detached again\n");
                                   if (!h.wait_launch_callback(1, 0)) std::fprintf(stderr, "TEST: launch callbacks off\n");
                                   if (const int n = h.stray_calls(1); n != 0) {
                                     std::fprintf(stderr, "TEST: %d CUPTI calls while cuptiFinalize ran\n", n);
                                   }
                                   if (const int n = h.stray_calls(0); n != 0) {
                                     std::fprintf(stderr, "TEST: %d CUPTI calls while detached\n", n);
                                   }
                                   if (const int n = h.stray_calls(2); n != 0) {
                                     std::fprintf(stderr, "TEST: %d CUPTI calls while a subscription attached it\n", n);
                                   }
                                 });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectQuiet(r.err, "sampling nvmlDeviceGetPowerUsage instead");  // the stand-in NVML has no ring
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  const std::vector<Chunk> chunks = Read("9");
  ASSERT_FALSE(chunks.empty());
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["window.complete"], "1");
  EXPECT_EQ(meta["quiet.phase_ms"], "40");
  EXPECT_EQ(meta["window.count"], "1");  // no window on the loop found again after the attach
  EXPECT_EQ(meta["quiet.phases"], "1");
  EXPECT_EQ(meta["cupti.detaches"], "1");
  EXPECT_EQ(meta["anchor.follows"], "1");  // before the detach only
  // The marks: engaged, detaching, quiet, after, times not decreasing; the quiet phase and the
  // engaged one before it last their 40 ms at least.
  std::ifstream in(log);
  std::vector<std::pair<std::string, int64_t>> marks;
  std::string phase;
  int64_t time = 0;
  while (in >> phase >> time) marks.emplace_back(phase, time);
  const std::vector<std::string> expected{"engaged", "detaching", "quiet", "after"};
  ASSERT_EQ(marks.size(), expected.size());
  for (size_t i = 0; i < marks.size(); ++i) {
    EXPECT_EQ(marks[i].first, expected[i]) << i;
    if (i > 0) {
      EXPECT_GE(marks[i].second, marks[i - 1].second) << i;
    }
  }
  EXPECT_GE(marks[1].second - marks[0].second, 40'000'000);
  EXPECT_GE(marks[3].second - marks[2].second, 40'000'000);
  // Iterations were recorded after the attach (found by their launch period again), their indices
  // running on without a gap.
  const auto iterations = Records<fmt::IterationRecord>(chunks, fmt::RecordType::kIteration);
  ASSERT_GT(iterations.size(), 40u);
  for (size_t i = 0; i < iterations.size(); ++i) EXPECT_EQ(iterations[i].index, i);
  EXPECT_GT(iterations.back().start_ns, iterations.front().start_ns + 300 * 5080 * kUs);
}

TEST_F(InjectFakeCuptiTest, AnchorOffFollowsEveryLaunch) {
  const ChildResult r = RunChild({{"EMO_TRACE_OUT", Out()}, {"RANK", "6"}, {"EMO_TRACE_MODE", "monitor"},
                                  {"EMO_TRACE_ANCHOR", "0"}},
                                 [](const Hooks& h) {
                                   Loop loop(h);
                                   h.create_context(0);
                                   for (int k = 0; k < 30; ++k) {
                                     loop.Iteration();
                                     h.stream_sync();
                                   }
                                 });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectQuiet(r.err);
  auto meta = Meta(Read("6"));
  EXPECT_EQ(meta["anchor.follows"], "0");
  EXPECT_EQ(meta["launches.seen"], "150");
  EXPECT_EQ(meta["callbacks.launch_off"], "0");  // never off: every launch followed
  EXPECT_EQ(meta.count("iteration.anchor"), 0u);
}


// --- `emo run`: the injection library follows a clock schedule (src/runtime/clock_follower.cc)

// The schedule of the run tests: 5 launches per iteration; pack 0 (1200 MHz) from the first
// launch, asked for after the previous iteration's last; pack 1 (1500 MHz) from the fourth
// launch (call 3), asked for after the third (call 2).
std::string RunSchedule(const std::string& actuator, const std::string& log) {
  return "emo-clock-schedule 1\nactuator " + actuator + "\n" + (log.empty() ? "" : "log " + log + "\n") +
         "policy test-policy.json\nguard_pct 0\ngpu -1 0 5 100000000 90000000 NVIDIA H200\npack 0 -1 1200\npack 3 2 1500\n";
}

// The clock the schedule holds after launch `q` (0-based in its iteration) once followed.
unsigned PlannedAfter(uint64_t q) { return q == 2 || q == 3 ? 1500u : 1200u; }

// A text file's contents, "" when it does not exist.
std::string ReadText(const std::filesystem::path& path) {
  const std::vector<unsigned char> bytes = ReadFile(path.string());
  return std::string(bytes.begin(), bytes.end());
}

// The fake NVML's state line for the GPU ("0000:19:00.0 <MHz>"), "" when nothing was set.
std::string FakeNvmlState(const std::filesystem::path& state) { return ReadText(state); }

TEST_F(InjectFakeCuptiTest, TheGpuThreadReadsEnergyPowerAndTheSmClockFromNvmlAndSetsNothing) {
  const std::filesystem::path log = dir_ / "nvml.log";
  const ChildResult r = RunChild({{"EMO_TRACE_OUT", Out()},
                                  {"RANK", "0"},
                                  {"EMO_TRACE_MODE", "monitor"},
                                  {"TEST_FAKE_CUDA", "1"},
                                  {"EMO_NVML_LIBRARY", EMO_FAKE_NVML_PATH},
                                  {"FAKE_NVML_LOG", log.string()},
                                  {"FAKE_NVML_POWER_W", "300"},
                                  {"FAKE_NVML_SM_MHZ", "1755"},
                                  {"FAKE_NVML_REASONS", "4"}},
                                 [](const Hooks& h) {
                                   Loop loop(h);
                                   h.create_context(0);
                                   // The GPU thread reads the clock every ~50 ms of real
                                   // time, the energy every ~100 ms.
                                   const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
                                   while (std::chrono::steady_clock::now() < end) {
                                     loop.Iteration();
                                     std::this_thread::sleep_for(std::chrono::milliseconds(10));
                                   }
                                   SayThreadNames();
                                 });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The library's threads carry their names (top -H, gdb, a bench adding up their CPU time).
  for (const char* name : {"emo-control", "emo-writer", "emo-gpu"}) EXPECT_TRUE(SaidThread(r.err, name)) << name << r.err;
  EXPECT_FALSE(SaidThread(r.err, "emo-clocks")) << "no plan, no clock thread\n" << r.err;
  // The stand-in has no power sample ring: the thread says so once and reads the power instead.
  EXPECT_NE(r.err.find("sampling nvmlDeviceGetPowerUsage instead"), std::string::npos) << r.err;
  const std::vector<Chunk> chunks = Read("0");
  ASSERT_FALSE(chunks.empty());
  auto meta = Meta(chunks);
  EXPECT_EQ(meta["nvml"], "loaded");
  const auto gpus = Records<fmt::GpuRecord>(chunks, fmt::RecordType::kGpu);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(std::string(gpus[0].pci_bus_id), "0000:19:00.0");
  EXPECT_EQ(std::string(gpus[0].uuid), "GPU-fake-0000:19:00.0");
  EXPECT_EQ(gpus[0].nvml_index, 0u);
  const auto clocks = Records<fmt::ClockRecord>(chunks, fmt::RecordType::kClock);
  ASSERT_FALSE(clocks.empty());
  for (const auto& c : clocks) {
    EXPECT_EQ(c.gpu, 0u);
    EXPECT_EQ(c.sm_mhz, 1755u);
    EXPECT_EQ(c.reasons, fmt::kClockReasonSwPowerCap);
  }
  const auto power = Records<fmt::PowerRecord>(chunks, fmt::RecordType::kPower);
  ASSERT_FALSE(power.empty());
  for (const auto& p : power) EXPECT_EQ(p.power_mw, 300000u);
  // The counter: read on every tick and once more at the end, and it went up.
  const auto energy = Records<fmt::EnergyRecord>(chunks, fmt::RecordType::kEnergy);
  ASSERT_GE(energy.size(), 2u);
  for (size_t i = 1; i < energy.size(); ++i) EXPECT_GE(energy[i].energy_mj, energy[i - 1].energy_mj);
  EXPECT_GT(energy.back().energy_mj, energy.front().energy_mj);
  // Read functions only: the stand-in logs every call that could change a GPU.
  const std::string calls = ReadText(log);
  EXPECT_NE(calls.find("nvmlInit_v2"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("nvmlDeviceSet"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("nvmlDeviceReset"), std::string::npos) << calls;
}

class InjectRunTest : public InjectFakeCuptiTest {
 protected:
  std::map<std::string, std::string> Env(const std::string& actuator) {
    std::ofstream(dir_ / "schedule") << RunSchedule(actuator, actuator == "nvml" ? "" : (dir_ / "switches.jsonl").string());
    return {{"EMO_TRACE_OUT", Out()},
            {"RANK", "0"},
            {"EMO_TRACE_MODE", "monitor"},
            {"EMO_TRACE_NVML", "0"},
            {"EMO_RUN_SCHEDULE", (dir_ / "schedule").string()},
            {"EMO_RUN_JOURNAL", (dir_ / "journal").string()},
            {"EMO_NVML_LIBRARY", EMO_FAKE_NVML_PATH},
            {"FAKE_NVML_LOG", (dir_ / "nvml.log").string()},
            {"FAKE_NVML_STATE", (dir_ / "nvml.state").string()},
            {"TEST_FAKE_CUDA", "1"}};
  }
  // Env(actuator) with the schedule's packs replaced by `packs` (schedule lines), and the stand-in
  // driver logging to cuda_log().
  std::map<std::string, std::string> EnvWithPacks(const std::string& actuator, const std::string& packs) {
    auto env = Env(actuator);
    std::string schedule = RunSchedule(actuator, (dir_ / "switches.jsonl").string());
    schedule.replace(schedule.find("pack 0 -1 1200\n"), std::string::npos, packs);
    std::ofstream(dir_ / "schedule") << schedule;
    env["FAKE_CUDA_LOG"] = cuda_log().string();
    return env;
  }
  std::filesystem::path cuda_log() const { return dir_ / "cuda.log"; }
  // A child running the 5-launch loop, 1 ms between launches, for `iterations` iterations after
  // the plan took over (its first switch is in switches.jsonl; at most 2000 iterations in all):
  // the tracer's thread finds the loop after a few iterations, many more on a loaded machine or
  // under a sanitizer, and what a test counts happens only once it follows the plan.
  ChildResult RunLoop(const std::map<std::string, std::string>& env, int iterations) {
    const std::filesystem::path switches = dir_ / "switches.jsonl";
    return RunChild(env, [iterations, switches](const Hooks& h) {
      Loop loop(h);
      h.create_context(0);
      int after = -1;  // iterations since the plan took over (-1: not yet)
      for (int iteration = 0; iteration < 2000 && after < iterations; ++iteration) {
        for (int i = 0; i < 5; ++i) {
          loop.Launch(i);
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::error_code ec;
        const auto size = std::filesystem::file_size(switches, ec);  // an error: not written yet
        if (after >= 0 || (!ec && size > 0)) ++after;
      }
      if (after < iterations) {
        std::fprintf(stderr, "TEST: the plan ran %d of the %d iterations asked for in 2000\n", std::max(after, 0),
                     iterations);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the GPU catches up
    });
  }
  // Calls the fake NVML logged after nvmlInit: "Set <MHz>" or "Reset".
  std::vector<std::string> ControlCalls() const {
    std::vector<std::string> calls;
    for (const std::string& line : Lines(ReadText(dir_ / "nvml.log"))) {
      if (const size_t at = line.find("nvmlDeviceSetGpuLockedClocks "); at != std::string::npos) {
        std::istringstream f(line.substr(at));
        std::string call, pci, lo, hi;
        f >> call >> pci >> lo >> hi;
        calls.push_back("Set " + hi);
      } else if (line.find("nvmlDeviceResetGpuLockedClocks") != std::string::npos) {
        calls.push_back("Reset");
      }
    }
    return calls;
  }
};

TEST_F(InjectRunTest, EverySwitchHappensInOrderAheadOfItsPackAndTheClockIsResetAtExit) {
  const std::filesystem::path state = dir_ / "nvml.state";
  const ChildResult r = RunChild(Env("nvml"), [&](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    bool following = false;
    // Until 12 iterations ran followed (the loop is found after a few, later on a busy machine).
    int followed = 0;
    for (int iteration = 0; iteration < 400 && followed < 12; ++iteration) {
      if (following) ++followed;
      for (int i = 0; i < 5; ++i) {
        loop.Launch(i);
        if (!following) {
          // The loop is found after a few iterations; the first locks follow at once.
          std::this_thread::sleep_for(std::chrono::milliseconds(3));
          following = !FakeNvmlState(state).empty();
          continue;
        }
        // Before the next launch, the clock this launch's position calls for must be in effect:
        // the switch into pack 1 is made before its first launch (call 3), the one into pack 0
        // before the next iteration's first.
        const std::string want = "0000:19:00.0 " + std::to_string(PlannedAfter(static_cast<uint64_t>(i))) + "\n";
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
        while (FakeNvmlState(state) != want && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        if (FakeNvmlState(state) != want) {
          std::fprintf(stderr, "TEST: after launch %d of iteration %d the GPU holds '%s', not '%s'\n", i, iteration,
                       FakeNvmlState(state).c_str(), want.c_str());
        }
      }
    }
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("emo run"), std::string::npos) << r.err;
  // Back at the default clock, and the GPU is in the journal the watchdog reads.
  EXPECT_EQ(FakeNvmlState(state), "0000:19:00.0 0\n");
  EXPECT_EQ(ReadText(dir_ / "journal"), "0000:19:00.0\n");
  // The calls: alternating 1200 / 1500 (never the same twice in a row), the reset last.
  const auto calls = ControlCalls();
  ASSERT_GE(calls.size(), 2u * 10);
  EXPECT_EQ(calls.back(), "Reset");
  for (size_t i = 0; i + 1 < calls.size(); ++i) {
    EXPECT_TRUE(calls[i] == "Set 1200" || calls[i] == "Set 1500") << i << ": " << calls[i];
    if (i > 0) {
      EXPECT_NE(calls[i], calls[i - 1]) << i;
    }
  }
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "1");
  EXPECT_EQ(meta["run.actuator"], "nvml");
  EXPECT_EQ(meta["run.gpu"], "0000:19:00.0");
  EXPECT_EQ(meta["run.switches_failed"], "0");
  EXPECT_EQ(meta["run.fallbacks"], "0");
  EXPECT_EQ(meta["run.clock_at_exit"], "default");
  EXPECT_GT(std::stoll(meta["run.plan_started_ns"]), 0);  // when the first lock was applied
  EXPECT_TRUE(meta["run.plan_stopped_ns"].empty());        // held to the end
  // One span of the plan in force, from the first lock to the reset at exit.
  const std::string spans = meta["run.plan_spans_ns"];
  ASSERT_EQ(spans.find(','), std::string::npos) << spans;
  EXPECT_EQ(spans.substr(0, spans.find(':')), meta["run.plan_started_ns"]);
  EXPECT_GT(std::stoll(spans.substr(spans.find(':') + 1)), std::stoll(meta["run.plan_started_ns"]));
  EXPECT_EQ(std::stoul(meta["run.switches_applied"]), calls.size() - 1);
  // Each switch after the first is on time (the first is placed when the loop is found).
  EXPECT_LE(std::stoul(meta["run.switches_late"]), 2u);
  EXPECT_GE(std::stoul(meta["run.iterations_followed"]), 10u);
}

TEST_F(InjectRunTest, APolicyForAnotherGpuIsRefusedAndNothingIsSet) {
  auto env = Env("nvml");
  env["FAKE_CUDA_NAME"] = "NVIDIA A100-SXM4-80GB";
  const ChildResult r = RunChild(env, [](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    for (int iteration = 0; iteration < 12; ++iteration) loop.Iteration();
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("emo run (test-policy.json): the policy was made for NVIDIA H200 and this process runs on "
                       "NVIDIA A100-SXM4-80GB (0000:19:00.0); make a policy from a trace of this GPU; the clocks are "
                       "left at the default"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(ControlCalls().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "journal"));
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "0");
  EXPECT_NE(meta["run.not_followed_because"].find("NVIDIA A100-SXM4-80GB"), std::string::npos);
}

// A process the policy has no plan for (here rank 0 of a policy made for ranks 5 and 6) says so
// once when it launches work; a launcher that only creates a context says nothing.
TEST_F(InjectRunTest, AProcessWithoutAPlanSaysSoOnlyWhenItLaunchesWork) {
  auto env = Env("nvml");
  std::string text = RunSchedule("nvml", "");
  text.replace(text.find("gpu -1 0 "), 9, "gpu 5 0 ");
  text += "gpu 6 0 5 100000000 90000000 NVIDIA H200\npack 0 -1 1300\n";
  std::ofstream(dir_ / "schedule") << text;
  const ChildResult idle = RunChild(env, [](const Hooks& h) { h.create_context(0); });
  EXPECT_EQ(idle.exit_code, 0) << idle.err;
  EXPECT_EQ(idle.err.find("emo run"), std::string::npos) << idle.err;
  const ChildResult busy = RunChild(env, [](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    for (int iteration = 0; iteration < 4; ++iteration) {
      loop.Iteration();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  EXPECT_EQ(busy.exit_code, 0) << busy.err;
  const std::string said = "emo run (test-policy.json): the policy has no plan for this process (rank 0)";
  const size_t at = busy.err.find(said);
  EXPECT_NE(at, std::string::npos) << busy.err;
  EXPECT_EQ(busy.err.find(said, at + 1), std::string::npos) << busy.err;  // once
  EXPECT_TRUE(ControlCalls().empty());
}

TEST_F(InjectRunTest, DryRunLogsTheSwitchesWithTheirPacksAndChangesNothing) {
  const std::filesystem::path log = dir_ / "switches.jsonl";
  const ChildResult r = RunChild(Env("dry-run"), [&log](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    // Until two switches are logged (the loop is found after a few iterations, later on a busy
    // machine), then two iterations more.
    int after = 0;
    for (int iteration = 0; iteration < 400 && after < 2; ++iteration) {
      for (int i = 0; i < 5; ++i) {
        loop.Launch(i);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      const std::string text = ReadText(log);
      size_t locks = 0;
      for (size_t at = text.find("\"lock\""); at != std::string::npos; at = text.find("\"lock\"", at + 1)) ++locks;
      if (locks >= 2) ++after;
    }
    SayThreadNames();
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(SaidThread(r.err, "emo-clocks")) << r.err;
  EXPECT_TRUE(ControlCalls().empty());
  const auto lines = Lines(ReadText(dir_ / "switches.jsonl"));
  ASSERT_GE(lines.size(), 3u);
  size_t locks = 0;
  for (const auto& line : lines) {
    EXPECT_NE(line.find("\"actuator\":\"dry-run\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"gpu\":\"0000:19:00.0\""), std::string::npos) << line;
    if (line.find("\"action\":\"lock\"") != std::string::npos) {
      ++locks;
      EXPECT_TRUE(line.find("\"pack\":0") != std::string::npos || line.find("\"pack\":1") != std::string::npos) << line;
    }
  }
  EXPECT_GE(locks, 2u);
  EXPECT_NE(lines.back().find("\"action\":\"reset\""), std::string::npos) << lines.back();
  EXPECT_NE(lines.back().find("\"why\":\"exit\""), std::string::npos) << lines.back();
}

// emulate: once the plan is followed, a spin kernel of the schedule's length behind each launch
// the schedule names (calls 1 and 4 of the 5), on that launch's stream, and behind no other;
// no clock is set.
TEST_F(InjectRunTest, EmulateAddsEachSpinBehindItsLaunchOnItsStream) {
  auto env = Env("emulate");
  std::ofstream(dir_ / "schedule") << RunSchedule("emulate", (dir_ / "switches.jsonl").string())
                                   << "predicted 95000000\nspin 1 30000\nspin 4 50000\n";
  const std::filesystem::path log = dir_ / "cuda.log";
  env["FAKE_CUDA_LOG"] = log.string();
  const ChildResult r = RunChild(env, [&](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    auto spins = [&log] {
      std::vector<std::string> out;
      for (const std::string& line : Lines(ReadText(log))) {
        if (line.rfind("launch ", 0) == 0) out.push_back(line);
      }
      return out;
    };
    bool on = false;
    int checked = 0;  // whole iterations checked launch by launch once the spins began
    for (int iteration = 0; iteration < 400 && checked < 10; ++iteration) {
      // The plan may come into force in the middle of an iteration: that one is not whole.
      const bool whole = on;
      for (int i = 0; i < 5; ++i) {
        const size_t before = spins().size();
        loop.Launch(i);
        const std::vector<std::string> now = spins();
        const std::vector<std::string> added(now.begin() + static_cast<ptrdiff_t>(before), now.end());
        std::vector<std::string> want;
        if (i == 1) want = {"launch 0x7001 30000 grid 1 block 1 shared 0"};
        if (i == 4) want = {"launch 0x7004 50000 grid 1 block 1 shared 0"};
        if (!on && !added.empty()) on = true;
        if (on && added != want) {
          std::fprintf(stderr, "TEST: launch %d of iteration %d added %zu spins (%s), want %zu\n", i, iteration,
                       added.size(), added.empty() ? "" : added.front().c_str(), want.size());
        }
        if (!on) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (whole) ++checked;
    }
    if (!on) std::fprintf(stderr, "TEST: no spin was launched\n");
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  EXPECT_TRUE(ControlCalls().empty());
  const auto lines = Lines(ReadText(log));
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], "load emo_emulate_spin");
  EXPECT_EQ(lines[1], "function emo_emulate_spin");
  const size_t launched = static_cast<size_t>(std::count_if(
      lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("launch ", 0) == 0; }));
  EXPECT_GE(launched, 20u);
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "1");
  EXPECT_EQ(meta["run.actuator"], "emulate");
  EXPECT_EQ(meta["run.emulate_spins"], std::to_string(launched));
  EXPECT_EQ(meta["run.emulate_failed"], "0");
  EXPECT_EQ(meta["run.emulate_unknown_stream"], "0");
  EXPECT_GT(std::stoll(meta["run.emulate_launch_ns"]), 0);  // the spin launches' own host time
  EXPECT_EQ(meta["run.predicted_ns"], "95000000");
  EXPECT_EQ(meta["run.predicted_baseline_ns"], "90000000");
  for (const auto& line : Lines(ReadText(dir_ / "switches.jsonl"))) {
    EXPECT_NE(line.find("\"actuator\":\"emulate\""), std::string::npos) << line;
  }
}

// `emo run --trace`: in a traced window, each pack switch set against the GPU start of its pack's
// first op in the same trace. On the stand-in loop a pack-1 switch is asked for at call 2 and its
// pack starts with call 3's kernel (20 us + 1 us later on the fake clock); a pack-0 switch at
// call 4 and its pack with the next iteration's first kernel (5 ms + 1 us later).
TEST_F(InjectRunTest, ATracedWindowSetsEachSwitchAgainstItsPacksStartOnTheGpu) {
  auto env = Env("dry-run");
  env["EMO_TRACE_MODE"] = "trace";
  env["EMO_TRACE_WARMUP"] = "12";
  env["EMO_TRACE_ITERATIONS"] = "8";
  const std::filesystem::path log = dir_ / "switches.jsonl";
  const ChildResult r = RunChild(env, [&log](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    auto locks = [&log] {
      const auto lines = Lines(ReadText(log));
      return std::count_if(lines.begin(), lines.end(),
                           [](const std::string& l) { return l.find("\"action\":\"lock\"") != std::string::npos; });
    };
    for (int iteration = 0; iteration < 40; ++iteration) {
      for (int i = 0; i < 5; ++i) {
        const auto before = locks();
        loop.Launch(i);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        // Once the plan is followed, calls 2 and 4 ask for a switch: the fake clock stands still
        // until the control thread has made it (at most 1 s), however loaded the machine is.
        if (before > 0 && (i == 2 || i == 4)) {
          for (int waited = 0; waited < 500 && locks() == before; ++waited) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
        }
      }
    }
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string path = (dir_ / "t_0.emotrace").string();
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->meta.run->policy_run.at("pack_first_calls"), "0,3");
  const nlohmann::json j = report::RunToJson(path, *t);
  ASSERT_TRUE(j.contains("switch_timing")) << j.dump(1);
  const auto& s = j["switch_timing"];
  EXPECT_GE(s["switches_timed"].get<int>(), 20) << s.dump();
  EXPECT_GE(s["in_traced_window"].get<int>(), 8) << s.dump();  // 8 traced iterations, two packs each
  // Only the first switch may be late (the child waits for switches once it has seen one); a pack
  // matched one call off would put half of them after.
  EXPECT_LE(s["after_the_pack_started"].get<int>(), 1) << s.dump();
  EXPECT_NEAR(s["lead_ms_max"].get<double>(), 5.001, 0.001) << s.dump();
  EXPECT_GE(s["lead_ms_min"].get<double>(), -0.05) << s.dump();
  EXPECT_NE(report::RunText(path, *t).find("pack switches fall in the traced window"), std::string::npos);
}

// Switches on the GPU: the schedule's packs wait for the op their call launched (pack 1: call 2,
// pack 0: call 4, the previous iteration's last). An event is recorded behind exactly those calls,
// on their streams, and each pack switch is made only once the stand-in driver reports its event
// complete (20 ms after the record: a GPU 20 ms behind the CPU), in order, none coalesced.
TEST_F(InjectRunTest, SwitchesOnTheGpuWaitForTheOpBeforeThePackInOrder) {
  auto env = EnvWithPacks("dry-run", "pack 0 -1 1200 gpu\npack 3 2 1500 gpu\n");
  const std::filesystem::path log = cuda_log();
  env["FAKE_CUDA_EVENT_MS"] = "20";
  const ChildResult r = RunLoop(env, 80);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ControlCalls().empty());
  // Events only behind calls 2 and 4, on their streams.
  std::map<std::string, int> recorded;
  struct Done {
    int64_t t_ns;
    int pack;
  };
  std::vector<Done> completes;
  for (const std::string& line : Lines(ReadText(log))) {
    std::istringstream f(line);
    std::string what, a, b;
    f >> what >> a >> b;
    if (what == "record") ++recorded[b];
    if (what == "complete") completes.push_back({std::stoll(b), a == "0x7002" ? 1 : a == "0x7004" ? 0 : -1});
  }
  EXPECT_EQ(recorded.size(), 2u);
  EXPECT_GE(recorded["0x7002"], 10);
  EXPECT_GE(recorded["0x7004"], 10);
  // Each pack lock comes after a completion on its pack's stream that no earlier lock used, but
  // for the switches the follower made at once: those whose launch had no mark (the plan's first
  // iteration; more while the tracer's thread catches up on a loaded machine), asked for after
  // their launch (late), or given up on. The follower counts each kind; the locks that came
  // before their op completed are at most those.
  std::vector<std::pair<int64_t, int>> locks;
  for (const std::string& line : Lines(ReadText(dir_ / "switches.jsonl"))) {
    if (line.find("\"action\":\"lock\"") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line);
    locks.push_back({j["t_ns"].get<int64_t>(), j["pack"].get<int>()});
  }
  ASSERT_GE(locks.size(), 20u);
  auto meta = Meta(Read("0"));
  std::string why;  // the follower's own account
  for (const char* k : {"switch_marks_recorded", "switch_marks_no_mark", "switch_marks_unknown_stream",
                        "switch_marks_gave_up", "fallbacks", "switches_late", "iterations_followed"}) {
    why += std::string(" ") + k + "=" + meta[std::string("run.") + k];
  }
  int unused[2] = {0, 0};
  size_t next = 0, early = 0;
  for (size_t k = 0; k < locks.size(); ++k) {
    while (next < completes.size() && completes[next].t_ns <= locks[k].first) {
      if (completes[next].pack >= 0) ++unused[completes[next].pack];
      ++next;
    }
    const int pack = locks[k].second;
    ASSERT_TRUE(pack == 0 || pack == 1) << pack;
    if (unused[pack] > 0) {
      --unused[pack];
    } else {
      ++early;  // before its op completed
    }
    if (k > 2) {
      EXPECT_NE(pack, locks[k - 1].second) << "lock " << k << ": a pack's switch was passed over";
    }
  }
  const long long at_once = std::stoll(meta["run.switch_marks_no_mark"]) + std::stoll(meta["run.switch_marks_gave_up"]) +
                            std::stoll(meta["run.switches_late"]);
  EXPECT_LE(static_cast<long long>(early), at_once) << early << " of " << locks.size() << " locks early;" << why;
  EXPECT_GE(locks.size() - early, 18u) << why;
  EXPECT_EQ(meta["run.switch_on"], "gpu");
  EXPECT_EQ(meta["run.switch_marks_record_failed"], "0");
  EXPECT_EQ(meta["run.switch_marks_query_failed"], "0");
  EXPECT_GE(std::stoll(meta["run.switch_marks_completed"]), static_cast<long long>(locks.size() - early)) << why;
  EXPECT_EQ(meta["run.switches_coalesced"], "0");
}

// A one-pack plan switches once, at once: no event is ever recorded for it (every later switch
// to the same clock would be skipped).
TEST_F(InjectRunTest, AOnePackPlanRecordsNoEventsOnTheGpu) {
  const std::filesystem::path log = cuda_log();
  const ChildResult r = RunLoop(EnvWithPacks("dry-run", "pack 0 -1 1200 gpu\n"), 40);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadText(log).find("record "), std::string::npos) << ReadText(log);
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "1");
  EXPECT_EQ(meta["run.switches_applied"], "1");
  EXPECT_EQ(meta["run.switch_marks_recorded"], "0");
}

// A plan of one clock needs no launch once its clock is in force: the launch callbacks go off and
// a call the loop makes once per iteration (here a stream sync) times the iterations. The guard
// still re-times the default clock every 50 of them (a reset, five iterations, the lock again),
// and when the anchor call stops, the launch callbacks come back, the clock falls back to the
// default until the loop is found again, and is locked again then.
TEST_F(InjectRunTest, AOneClockPlanIsFollowedByItsAnchorWithTheLaunchCallbacksOff) {
  auto env = EnvWithPacks("nvml", "pack 0 -1 1200\n");
  std::string schedule = ReadText(dir_ / "schedule");
  schedule.replace(schedule.find("guard_pct 0"), 11, "guard_pct 5");
  // A policy's emulate spins ride along: only the emulate actuator launches them.
  std::ofstream(dir_ / "schedule") << schedule << "spin 1 30000\n";
  const ChildResult r = RunChild(env, [](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    auto iteration = [&](bool sync) {
      loop.Iteration();
      if (sync) h.stream_sync();
    };
    // Until the launch callbacks go off: the loop found, five iterations timed for the guard, the
    // lock, the anchor stable over 16 iterations (each iteration gives the tracer 2 ms to catch up).
    int n = 0;
    for (; n < 400 && (n < 24 || !h.wait_launch_callback(0, 2)); ++n) iteration(true);
    if (n == 400) std::fprintf(stderr, "TEST: launch callbacks stayed on\n");
    for (int k = 0; k < 130; ++k) {  // two probes of the guard, anchored
      iteration(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // each switch made before the next
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    loop.Advance(2'000'000'000);
    if (!h.wait_launch_callback(1, kWaitMs)) std::fprintf(stderr, "TEST: launch callbacks stayed off\n");
    for (int k = 0; k < 12; ++k) {
      iteration(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TEST:"), std::string::npos) << r.err;
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "1");
  EXPECT_EQ(meta["iteration.anchor"], "cudaStreamSynchronize");
  EXPECT_EQ(meta["anchor.follows"], "1");
  EXPECT_GE(std::stoll(meta["run.anchored_iterations"]), 120);
  EXPECT_EQ(meta["run.anchors_lost"], "1");
  EXPECT_EQ(meta["run.guard_tripped"], "0");
  EXPECT_GE(std::stoll(meta["run.guard_probes"]), 2);
  EXPECT_GE(std::stoll(meta["run.fallbacks"]), 1);
  // Asked for: the lock, a reset and a lock again for each probe and for the fallback. Applied:
  // alternating, the reset at exit last (a reset and the lock after it may be coalesced when the
  // switching thread runs late, on a busy machine).
  EXPECT_GE(std::stoll(meta["run.switches"]), 1 + 2 * 3);
  const auto calls = ControlCalls();
  ASSERT_GE(calls.size(), 4u);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i], i % 2 == 0 ? "Set 1200" : "Reset") << i;
  }
  EXPECT_EQ(calls.back(), "Reset");
  // Launches were not followed while anchored.
  EXPECT_LT(std::stoll(meta["launches.seen"]), 5 * 130);
}

// A plan of two clocks needs its launch calls: the launch callbacks stay on whatever anchor the
// loop has.
TEST_F(InjectRunTest, ATwoClockPlanKeepsFollowingEveryLaunch) {
  const ChildResult r = RunChild(EnvWithPacks("dry-run", "pack 0 -1 1200\npack 3 2 1500\n"), [](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    for (int k = 0; k < 80; ++k) {
      loop.Iteration();
      h.stream_sync();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "1");
  EXPECT_EQ(meta.count("iteration.anchor"), 0u);
  EXPECT_EQ(meta.count("run.anchored_iterations"), 0u);
  EXPECT_EQ(meta["launches.seen"], "400");
}

// A driver that runs out of events while the pool is made: the events made are given back, the
// context is not tried again on every marked launch, and each switch is made at its call.
TEST_F(InjectRunTest, APoolOfEventsThatCannotBeMadeIsGivenBackAndNotRetried) {
  auto env = EnvWithPacks("dry-run", "pack 0 -1 1200 gpu\npack 3 2 1500 gpu\n");
  const std::filesystem::path log = cuda_log();
  env["FAKE_CUDA_EVENTS"] = "10";
  const ChildResult r = RunLoop(env, 40);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  int refused = 0, destroyed = 0, recorded = 0;
  for (const std::string& line : Lines(ReadText(log))) {
    refused += line == "create refused";
    destroyed += line.rfind("destroy ", 0) == 0;
    recorded += line.rfind("record ", 0) == 0;
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(destroyed, 10);
  EXPECT_EQ(recorded, 0);
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "1");
  EXPECT_EQ(meta["run.switch_marks_recorded"], "0");
  EXPECT_GT(std::stoll(meta["run.switch_marks_record_failed"]), 10);
  EXPECT_EQ(meta["run.switch_marks_error"], "cuEventCreate returned 2 after 10 events");
  EXPECT_GT(std::stoll(meta["run.switches_applied"]), 10);  // made at their calls
}

// While the program captures its streams into a CUDA graph, nothing is added to them: a spin or
// an event would become part of its graph. The switches are made at once instead.
TEST_F(InjectRunTest, NothingIsAddedToAStreamTheProgramIsCapturing) {
  auto env = EnvWithPacks("emulate", "pack 0 -1 1200 gpu\npack 3 2 1500 gpu\nspin 1 30000\n");
  const std::filesystem::path log = cuda_log();
  env["FAKE_CUDA_CAPTURING"] = "1";
  const ChildResult r = RunLoop(env, 40);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string cuda = ReadText(log);
  EXPECT_EQ(cuda.find("launch "), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("record "), std::string::npos) << cuda;
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.followed"], "1");
  EXPECT_EQ(meta["run.emulate_spins"], "0");
  EXPECT_GT(std::stoll(meta["run.emulate_capturing"]), 10);
  EXPECT_EQ(meta["run.switch_marks_recorded"], "0");
  EXPECT_GT(std::stoll(meta["run.switch_marks_capturing"]), 10);
  EXPECT_GT(std::stoll(meta["run.switches_applied"]), 10);  // made at once, the marks missing
}

// A spin that cannot be launched stops the emulation, said once; the program runs on.
TEST_F(InjectRunTest, EmulateStopsAtAFailedSpinLaunchAndSaysSoOnce) {
  auto env = Env("emulate");
  std::ofstream(dir_ / "schedule") << RunSchedule("emulate", (dir_ / "switches.jsonl").string()) << "spin 1 30000\n";
  env["FAKE_CUDA_LAUNCH_FAILS"] = "1";
  const ChildResult r = RunChild(env, [](const Hooks& h) {
    Loop loop(h);
    h.create_context(0);
    for (int iteration = 0; iteration < 60; ++iteration) {
      for (int i = 0; i < 5; ++i) {
        loop.Launch(i);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string said =
      "emo run: emulate: cuLaunchKernel of the spin kernel failed: CUDA_ERROR_FAKE; the plan's slowdown is no longer "
      "emulated";
  const size_t at = r.err.find(said);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(said, at + 1), std::string::npos) << r.err;  // once
  auto meta = Meta(Read("0"));
  EXPECT_EQ(meta["run.emulate_failed"], "1");
  EXPECT_EQ(meta["run.emulate_spins"], "0");
  EXPECT_NE(meta["run.emulate_error"].find("cuLaunchKernel of the spin kernel failed"), std::string::npos);
}

}  // namespace
}  // namespace emo::runtime
