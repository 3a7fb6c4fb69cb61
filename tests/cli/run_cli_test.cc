// `emo run` without a GPU: policies it must refuse, and the clock watchdog that puts a GPU back
// to its default clocks however the run ends (the program exits, emo is terminated, the program
// or emo is killed). The GPU is the stand-in NVML of tests/runtime/fake_nvml.cc; a shell program
// plays the injection library's part (it journals the GPU and "locks" its clock in the fake's
// state file), because nothing here initializes CUDA. The library's own switching is tested in
// tests/runtime (InjectRunTest).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "emo_run.h"

namespace emo::testing {
namespace {

namespace fs = std::filesystem;

class RunCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath(std::string("run_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    setenv("EMO_INJECT_LIB", "/bin/true", 1);  // never loaded: nothing initializes CUDA
    setenv("EMO_NVML_LIBRARY", EMO_FAKE_NVML_PATH, 1);
    setenv("FAKE_NVML_GPUS", "0000:19:00.0=NVIDIA H200", 1);
    setenv("FAKE_NVML_STATE", State().c_str(), 1);
    setenv("FAKE_NVML_LOG", (dir_ + "/nvml.log").c_str(), 1);
    policy_ = dir_ + "/policy.json";
    const EmoRun made = Emo("optimize " + SourceDir() + "/examples/streams_graph_h200.emotrace --device h200 --policy " +
                            policy_);
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  void TearDown() override {
    for (const char* v : {"EMO_INJECT_LIB", "EMO_NVML_LIBRARY", "FAKE_NVML_GPUS", "FAKE_NVML_STATE", "FAKE_NVML_LOG"}) {
      unsetenv(v);
    }
    // The watchdog of a killed emo (its own session) may still be appending to the fake NVML's log
    // here for a moment after the reset the test waited for: retry.
    for (int tries = 0; tries < 50; ++tries) {
      std::error_code error;
      fs::remove_all(dir_, error);
      if (!error) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    fs::remove_all(dir_);  // still failing: say why
  }
  std::string State() const { return dir_ + "/nvml.state"; }
  // A program that does what the injection library does before its first lock: journal the GPU,
  // lock its clock (here: the fake NVML's state), then `then`.
  static std::string LockingProgram(const std::string& then) {
    return "sh -c 'echo 0000:19:00.0 >> \"$EMO_RUN_JOURNAL\"; echo \"0000:19:00.0 1200\" > \"$FAKE_NVML_STATE\"; " + then +
           "'";
  }
  // Waits (up to 30 s) until the fake GPU's clock is `mhz` (0: back at the default).
  bool WaitForClock(int mhz) const {
    const std::string want = "0000:19:00.0 " + std::to_string(mhz) + "\n";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ReadText(State()) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Starts `emo ARGS` in the background in its own process group; returns its pid.
  pid_t Spawn(const std::string& args) const {
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      const std::string out = dir_ + "/emo.out";
      freopen(out.c_str(), "w", stdout);
      dup2(fileno(stdout), 2);
      execl("/bin/sh", "sh", "-c", ("exec '" + std::string(EMO_BINARY) + "' " + args).c_str(), nullptr);
      _exit(127);
    }
    return pid;
  }
  std::string dir_, policy_;
};

TEST_F(RunCliTest, TheClockIsResetWhenTheProgramExits) {
  const EmoRun r = Emo("run --policy " + policy_ + " --actuator nvml -- " + LockingProgram("exit 0"));
  EXPECT_NE(r.out.find("emo run: following " + policy_), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("emo run: watchdog: 0000:19:00.0 back to its default clocks (nvml)"), std::string::npos) << r.out;
  EXPECT_EQ(ReadText(State()), "0000:19:00.0 0\n");
  EXPECT_NE(ReadText(dir_ + "/nvml.log").find("nvmlDeviceResetGpuLockedClocks 0000:19:00.0"), std::string::npos);
}

TEST_F(RunCliTest, TheClockIsResetWhenTheProgramIsKilled) {
  const EmoRun r = Emo("run --policy " + policy_ + " --actuator nvml -- " + LockingProgram("kill -9 $$"));
  EXPECT_EQ(r.exit_code, 137) << r.out;
  EXPECT_NE(r.out.find("was ended by signal 9"), std::string::npos) << r.out;
  EXPECT_EQ(ReadText(State()), "0000:19:00.0 0\n") << r.out;
}

TEST_F(RunCliTest, TheClockIsResetWhenEmoIsTerminated) {
  const pid_t emo = Spawn("run --policy " + policy_ + " --actuator nvml -- " + LockingProgram("sleep 60"));
  ASSERT_TRUE(WaitForClock(1200));
  kill(emo, SIGTERM);
  int status = 0;
  waitpid(emo, &status, 0);
  EXPECT_TRUE(WaitForClock(0)) << ReadText(dir_ + "/emo.out");
  // emo passed the signal on: the program ended with it.
  EXPECT_NE(ReadText(dir_ + "/emo.out").find("was ended by signal 15"), std::string::npos) << ReadText(dir_ + "/emo.out");
  kill(-emo, SIGKILL);
}

TEST_F(RunCliTest, TheClockIsResetWhenEmoIsKilled) {
  const pid_t emo = Spawn("run --policy " + policy_ + " --actuator nvml -- " + LockingProgram("sleep 60"));
  ASSERT_TRUE(WaitForClock(1200));
  kill(emo, SIGKILL);  // no handler runs: only the watchdog is left to reset
  int status = 0;
  waitpid(emo, &status, 0);
  EXPECT_TRUE(WaitForClock(0)) << ReadText(dir_ + "/emo.out");
  kill(-emo, SIGKILL);  // the orphaned program
}

TEST_F(RunCliTest, DryRunChangesNothingAndItsWatchdogOnlyLogs) {
  unsetenv("FAKE_NVML_STATE");
  const std::string log = dir_ + "/switches.jsonl";
  const EmoRun r = Emo("run --policy " + policy_ + " --switch-log " + log + " -- sh -c 'echo 0000:19:00.0 >> \"$EMO_RUN_JOURNAL\"'");
  EXPECT_NE(r.out.find("actuator dry-run, no clock changes; switches written to " + log), std::string::npos) << r.out;
  const std::string written = ReadText(log);
  EXPECT_NE(written.find("\"action\":\"reset\""), std::string::npos) << written;
  EXPECT_NE(written.find("\"why\":\"watchdog\""), std::string::npos) << written;
  EXPECT_EQ(ReadText(dir_ + "/nvml.log").find("Reset"), std::string::npos);
  EXPECT_EQ(ReadText(dir_ + "/nvml.log").find("SetGpuLocked"), std::string::npos);
}

TEST_F(RunCliTest, APolicyForAnotherGpuModelIsRefusedBeforeTheProgramStarts) {
  setenv("FAKE_NVML_GPUS", "0000:19:00.0=NVIDIA A100-SXM4-80GB,0000:2a:00.0=NVIDIA A100-SXM4-80GB", 1);
  const EmoRun r = Emo("run --policy " + policy_ + " --actuator nvml -- sh -c 'echo the program ran'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find(policy_ + " was made for NVIDIA H200 and this machine's GPUs are: 0 NVIDIA A100-SXM4-80GB, 1 "
                                 "NVIDIA A100-SXM4-80GB"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("the program ran"), std::string::npos) << r.out;
}

TEST_F(RunCliTest, BrokenPoliciesAreRefusedWithTheFieldAtFault) {
  nlohmann::json good = ReadJson(policy_);
  auto refused = [&](const std::string& name, const std::string& text, const std::string& expected) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    const EmoRun r = Emo("run --policy " + path + " -- sh -c 'echo the program ran'");
    EXPECT_EQ(r.exit_code, 2) << name << "\n" << r.out;
    EXPECT_NE(r.out.find(expected), std::string::npos) << name << "\n" << r.out;
    EXPECT_EQ(r.out.find("the program ran"), std::string::npos) << name << "\n" << r.out;
  };
  refused("garbage.json", "{not json", "garbage.json is not JSON");
  refused("trace.json", R"({"traceEvents": []})", "is not an EMO clock policy (it has no emo_policy_version");
  auto old = good;
  old["emo_policy_version"] = 2;
  refused("v2.json", old.dump(), "is a version 2 clock policy; this emo follows version 3 only");
  auto newer = good;
  newer["emo_policy_version"] = 99;
  refused("v99.json", newer.dump(), "it comes from a newer emo");
  auto no_calls = good;
  no_calls["gpus"][0]["launch_calls_per_iteration"] = 0;
  refused("calls.json", no_calls.dump(), "gpus[0] has no kernel launch calls in its steady iteration");
  auto bad_clock = good;
  bad_clock["gpus"][0]["packs"][0]["clock_mhz"] = -5;
  refused("clock.json", bad_clock.dump(), "gpus[0].packs[0].clock_mhz is -5 MHz");
  auto no_packs = good;
  no_packs["gpus"][0].erase("packs");
  refused("packs.json", no_packs.dump(), "gpus[0].packs is missing or empty");
  auto far = good;
  far["gpus"][0]["packs"][0]["switch_call"] = -100000;
  refused("far.json", far.dump(), "gpus[0].packs[0].switch_call -100000 is more than an iteration");
  auto far_gpu = good;
  far_gpu["gpus"][0]["packs"][0]["gpu_switch_call"] = "7";
  refused("far_gpu.json", far_gpu.dump(), "gpus[0].packs[0].gpu_switch_call is not a launch call within an iteration");
  const EmoRun missing = Emo("run --policy " + dir_ + "/none.json -- true");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.out.find("none.json"), std::string::npos) << missing.out;
}

// The schedule `emo run` hands the injection library: a pack the policy anchors on the GPU
// switches after its gpu_switch_call, marked "gpu"; with --switch-on launch, after its
// switch_call, unmarked. (The stand-in program prints the schedule and starts no CUDA.)
TEST_F(RunCliTest, PacksSwitchOnTheGpuWhereThePolicyAnchorsThemUnlessAskedOtherwise) {
  nlohmann::json p = ReadJson(policy_);
  auto& pack = p["gpus"][0]["packs"][0];
  pack["gpu_switch_call"] = 3;
  const std::string path = dir_ + "/anchored.json";
  std::ofstream(path) << p.dump();
  const std::string first = std::to_string(pack["first_call"].get<int64_t>());
  const std::string mhz = std::to_string(std::lround(pack["clock_mhz"].get<double>()));
  const EmoRun on_gpu = Emo("run --policy " + path + " -- sh -c 'cat \"$EMO_RUN_SCHEDULE\"'");
  EXPECT_NE(on_gpu.out.find("pack " + first + " 3 " + mhz + " gpu\n"), std::string::npos) << on_gpu.out;
  const EmoRun at_launch = Emo("run --switch-on launch --policy " + path + " -- sh -c 'cat \"$EMO_RUN_SCHEDULE\"'");
  const std::string line =
      "pack " + first + " " + std::to_string(pack["switch_call"].get<int64_t>()) + " " + mhz + "\n";
  EXPECT_NE(at_launch.out.find(line), std::string::npos) << at_launch.out;
  EXPECT_EQ(at_launch.out.find(" gpu\n"), std::string::npos) << at_launch.out;
}

// Packs shorter than the switch lead cannot each get their clock: a policy whose packs share a
// switch call says so (and `emo run` prints the policy's warnings as it starts).
TEST_F(RunCliTest, APolicyWhosePacksShareASwitchCallSaysSo) {
  const std::string path = dir_ + "/short_packs.json";
  const EmoRun made = Emo("optimize " + SourceDir() + "/examples/streams_graph_h200.emotrace --device h200 "
                          "--max-slowdown 0.10 --min-pack-ms 0.1 --switch-latency-us 10 --policy " + path);
  ASSERT_EQ(made.exit_code, 0) << made.out;
  const nlohmann::json p = ReadJson(path);
  const auto& g = p["gpus"][0];
  ASSERT_GT(g["packs"].size(), 1u);
  // Cyclically: the next iteration's first pack is asked for an iteration's calls later.
  const auto& packs = g["packs"];
  const int64_t n = g["launch_calls_per_iteration"].get<int64_t>();
  size_t sharing = 0;
  for (size_t i = 1; i <= packs.size(); ++i) {
    const int64_t at = i < packs.size() ? packs[i]["switch_call"].get<int64_t>() : packs[0]["switch_call"].get<int64_t>() + n;
    sharing += at <= packs[i - 1]["switch_call"].get<int64_t>();
  }
  ASSERT_GT(sharing, 0u) << g["packs"].dump();
  EXPECT_EQ(g["packs_sharing_a_switch_call"].get<size_t>(), sharing);
  // The same count over the GPU anchors (a pack without one switches at its launch call).
  auto on_gpu = [&](size_t i) {
    const auto& pack = packs[i % packs.size()];
    const int64_t call = pack.contains("gpu_switch_call") ? pack["gpu_switch_call"].get<int64_t>()
                                                           : pack["switch_call"].get<int64_t>();
    return i < packs.size() ? call : call + n;
  };
  size_t sharing_on_gpu = 0;
  for (size_t i = 1; i <= packs.size(); ++i) sharing_on_gpu += on_gpu(i) <= on_gpu(i - 1);
  EXPECT_EQ(g["packs_sharing_a_gpu_switch_call"].get<size_t>(), sharing_on_gpu);
  bool warned = false;
  for (const auto& w : p["warnings"]) {
    warned = warned || w.get<std::string>().find("asked for at the same launch call as the pack before them, or an") !=
                           std::string::npos;
  }
  EXPECT_TRUE(warned) << p["warnings"].dump();
  // The default plan (10 ms packs) shares none.
  EXPECT_EQ(ReadJson(policy_)["gpus"][0]["packs_sharing_a_switch_call"].get<size_t>(), 0u);
}

// The policy says what `emulate` adds: its spins are checked like the rest, and a policy
// written before emulation existed is refused for emulate (and still followed otherwise).
TEST_F(RunCliTest, EmulateFollowsThePolicysSpinsAndRefusesAPolicyWithoutThem) {
  nlohmann::json good = ReadJson(policy_);
  const auto& emulate = good["gpus"][0]["emulate"];
  ASSERT_TRUE(emulate.is_object()) << good.dump(2);
  ASSERT_FALSE(emulate["spins"].empty());
  // The spins add up to the plan's extra time per iteration, each after a call of the iteration.
  double sum_us = 0;
  for (const auto& spin : emulate["spins"]) {
    EXPECT_GE(spin[0].get<int64_t>(), 0);
    EXPECT_LT(spin[0].get<int64_t>(), good["gpus"][0]["launch_calls_per_iteration"].get<int64_t>());
    sum_us += spin[1].get<double>() / 1e3;
  }
  EXPECT_NEAR(sum_us + emulate["extra_without_call_us"].get<double>(), emulate["extra_us_per_iteration"].get<double>(), 0.01);
  double planned_extra_us = 0;
  for (const auto& pack : good["gpus"][0]["packs"]) {
    planned_extra_us += pack["busy_us_planned"].get<double>() - pack["busy_us_default"].get<double>();
  }
  EXPECT_NEAR(emulate["extra_us_per_iteration"].get<double>(), planned_extra_us, 0.01 * planned_extra_us + 0.01);

  auto refused = [&](const std::string& name, const nlohmann::json& policy, const std::string& expected) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << policy.dump();
    const EmoRun r = Emo("run --policy " + path + " --actuator emulate -- sh -c 'echo the program ran'");
    EXPECT_EQ(r.exit_code, 2) << name << "\n" << r.out;
    EXPECT_NE(r.out.find(expected), std::string::npos) << name << "\n" << r.out;
    EXPECT_EQ(r.out.find("the program ran"), std::string::npos) << name << "\n" << r.out;
  };
  auto old = good;
  old["gpus"][0].erase("emulate");
  refused("old.json", old, "has no emulate section (rank -1, device 0): it was made before emulation existed");
  auto outside = good;
  outside["gpus"][0]["emulate"]["spins"][0][0] = 100000;
  refused("outside.json", outside, "gpus[0].emulate.spins[0] is not [call, ns] with a call of the iteration");
  auto negative = good;
  negative["gpus"][0]["emulate"]["spins"][0][1] = -3;
  refused("negative.json", negative, "gpus[0].emulate.spins[0] is not [call, ns]");

  // Without emulate, the old policy is still followed (dry-run).
  const std::string old_path = dir_ + "/old.json";
  const EmoRun dry = Emo("run --policy " + old_path + " --switch-log " + dir_ + "/log.jsonl -- sh -c 'echo the program ran'");
  EXPECT_NE(dry.out.find("the program ran"), std::string::npos) << dry.out;
  // With it, the program runs and nothing is set.
  const EmoRun r = Emo("run --policy " + policy_ + " --actuator emulate --switch-log " + dir_ +
                       "/log.jsonl -- sh -c 'echo the program ran'");
  EXPECT_NE(r.out.find("the program ran"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("actuator emulate, no clock changes; the plan's slowdown is added as spin kernels (model h200)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(ReadText(dir_ + "/nvml.log").find("SetGpuLocked"), std::string::npos);
}

}  // namespace
}  // namespace emo::testing
