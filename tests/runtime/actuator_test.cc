// The actuators (include/emo/runtime/actuator.h) against a stand-in NVML (fake_nvml.cc, which
// records every call) and a stand-in zeusd on a Unix socket: what each backend asks of the
// driver, in which form, and what it says when it may not.
#include "emo/runtime/actuator.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace emo::runtime {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

class ActuatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("emo_actuator_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    setenv("FAKE_NVML_GPUS", "0000:19:00.0=NVIDIA H200,0000:2a:00.0=NVIDIA H200", 1);
    setenv("FAKE_NVML_LOG", (dir_ / "nvml.log").c_str(), 1);
    setenv("FAKE_NVML_STATE", (dir_ / "nvml.state").c_str(), 1);
    unsetenv("FAKE_NVML_NO_PERMISSION");
    options_.nvml_library = EMO_FAKE_NVML_PATH;
    options_.log_path = (dir_ / "switches.jsonl").string();
  }
  void TearDown() override {
    unsetenv("FAKE_NVML_NO_PERMISSION");
    fs::remove_all(dir_);
  }
  // The fake NVML's call log without its time and pid columns.
  std::vector<std::string> NvmlCalls() const {
    std::vector<std::string> calls;
    for (const auto& line : Lines(ReadAll(dir_ / "nvml.log"))) {
      std::istringstream s(line);
      std::string t, pid, rest;
      s >> t >> pid;
      std::getline(s, rest);
      calls.push_back(rest.substr(rest.find_first_not_of(' ')));
    }
    return calls;
  }

  fs::path dir_;
  ActuatorOptions options_;
};

TEST(SnapClockTest, NearestSupportedClockWithTiesToTheLowerOne) {
  const std::vector<unsigned> grid = {1200, 1215, 1230};
  EXPECT_EQ(SnapClock(grid, 1207), 1200u);
  EXPECT_EQ(SnapClock(grid, 1208), 1215u);
  EXPECT_EQ(SnapClock(grid, 1500), 1230u);
  EXPECT_EQ(SnapClock(grid, 100), 1200u);
  EXPECT_EQ(SnapClock({}, 1207), 1207u);
}

TEST_F(ActuatorTest, NvmlLocksTheSmClockAtTheSnappedTargetAndResets) {
  std::string error;
  auto a = MakeActuator("nvml", options_, &error);
  ASSERT_NE(a, nullptr) << error;
  EXPECT_STREQ(a->kind(), "nvml");
  EXPECT_TRUE(a->changes_clocks());
  ActuatorGpu gpu;
  // CUDA's 4-digit domain and NVML's 8-digit one name the same GPU.
  const int slot = a->Open("00000000:2A:00.0", &gpu, &error);
  ASSERT_EQ(slot, 0) << error;
  EXPECT_EQ(gpu.pci_bus_id, "0000:2a:00.0");
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  EXPECT_EQ(gpu.index, 1);
  ASSERT_EQ(gpu.supported_mhz.size(), 110u);
  EXPECT_EQ(gpu.supported_mhz.front(), 345u);
  EXPECT_EQ(gpu.supported_mhz.back(), 1980u);

  SwitchRequest r;
  r.mhz = 1207;
  ASSERT_TRUE(a->Lock(slot, r, &error)) << error;
  EXPECT_EQ(ReadAll(dir_ / "nvml.state"), "0000:2a:00.0 1200\n");
  ASSERT_TRUE(a->Reset(slot, "exit", &error)) << error;
  EXPECT_EQ(ReadAll(dir_ / "nvml.state"), "0000:2a:00.0 0\n");

  const auto calls = NvmlCalls();
  const std::vector<std::string> control(calls.end() - 2, calls.end());
  EXPECT_EQ(control, (std::vector<std::string>{"nvmlDeviceSetGpuLockedClocks 0000:2a:00.0 1200 1200",
                                               "nvmlDeviceResetGpuLockedClocks 0000:2a:00.0"}));
  EXPECT_EQ(calls.front(), "nvmlInit_v2");
  // Nothing but the two control calls changes anything, and the memory clock is never touched.
  for (const auto& c : calls) EXPECT_EQ(c.find("Memory"), std::string::npos) << c;
}

TEST_F(ActuatorTest, NvmlWithoutPermissionSaysWhatIsNeeded) {
  setenv("FAKE_NVML_NO_PERMISSION", "1", 1);
  std::string error;
  auto a = MakeActuator("nvml", options_, &error);
  ASSERT_NE(a, nullptr) << error;
  ActuatorGpu gpu;
  const int slot = a->Open("0000:19:00.0", &gpu, &error);
  ASSERT_EQ(slot, 0) << error;
  SwitchRequest r;
  r.mhz = 1500;
  EXPECT_FALSE(a->Lock(slot, r, &error));
  EXPECT_NE(error.find("nvmlDeviceSetGpuLockedClocks(1500 MHz) failed: Insufficient Permissions (NVML 4)"),
            std::string::npos) << error;
  EXPECT_NE(error.find("root or CAP_SYS_ADMIN"), std::string::npos) << error;
  EXPECT_NE(error.find("zeusd"), std::string::npos) << error;
  EXPECT_FALSE(a->Reset(slot, "exit", &error));
  EXPECT_FALSE(fs::exists(dir_ / "nvml.state"));
}

TEST_F(ActuatorTest, AGpuNvmlDoesNotKnowAndAnUnopenedSlotAreErrors) {
  std::string error;
  auto a = MakeActuator("nvml", options_, &error);
  ASSERT_NE(a, nullptr) << error;
  ActuatorGpu gpu;
  EXPECT_EQ(a->Open("0000:77:00.0", &gpu, &error), -1);
  EXPECT_NE(error.find("nvmlDeviceGetHandleByPciBusId_v2(0000:77:00.0) failed: Not Found"), std::string::npos) << error;
  SwitchRequest r;
  r.mhz = 1500;
  EXPECT_FALSE(a->Lock(0, r, &error));
  EXPECT_EQ(error, "no GPU opened as slot 0");
}

TEST_F(ActuatorTest, ANamedNvmlLibraryThatCannotBeLoadedIsAnErrorNotAFallBack) {
  options_.nvml_library = (dir_ / "missing" / "libnvidia-ml.so.1").string();
  std::string error;
  EXPECT_EQ(MakeActuator("nvml", options_, &error), nullptr);
  EXPECT_NE(error.find("NVML (" + options_.nvml_library + ") cannot be loaded"), std::string::npos) << error;
}

TEST_F(ActuatorTest, UnknownKindIsRefusedWithTheKnownOnes) {
  std::string error;
  EXPECT_EQ(MakeActuator("smi", options_, &error), nullptr);
  EXPECT_EQ(error, "unknown actuator 'smi' (nvml, zeusd, dry-run or emulate)");
  EXPECT_TRUE(IsActuatorKind("dry-run"));
  EXPECT_FALSE(IsActuatorKind("smi"));
}

TEST_F(ActuatorTest, DryRunLogsEachSwitchAndNeverCallsAnNvmlSetter) {
  std::string error;
  auto a = MakeActuator("dry-run", options_, &error);
  ASSERT_NE(a, nullptr) << error;
  EXPECT_FALSE(a->changes_clocks());
  ActuatorGpu gpu;
  const int slot = a->Open("0000:19:00.0", &gpu, &error);
  ASSERT_EQ(slot, 0) << error;
  EXPECT_EQ(gpu.name, "NVIDIA H200");  // read through NVML's read functions
  SwitchRequest r;
  r.mhz = 1352;
  r.pack = 3;
  r.iteration = 41;
  r.why = "pack";
  ASSERT_TRUE(a->Lock(slot, r, &error)) << error;
  ASSERT_TRUE(a->Reset(slot, "exit", &error)) << error;

  const auto lines = Lines(ReadAll(options_.log_path));
  ASSERT_EQ(lines.size(), 2u);
  const auto lock = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(lock["actuator"], "dry-run");
  EXPECT_EQ(lock["action"], "lock");
  EXPECT_EQ(lock["gpu"], "0000:19:00.0");
  EXPECT_EQ(lock["mhz"], 1350);
  EXPECT_EQ(lock["requested_mhz"], 1352);
  EXPECT_EQ(lock["pack"], 3);
  EXPECT_EQ(lock["iteration"], 41);
  EXPECT_EQ(lock["why"], "pack");
  EXPECT_GT(lock["t_ns"].get<int64_t>(), 0);
  const auto reset = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(reset["action"], "reset");
  EXPECT_EQ(reset["why"], "exit");
  EXPECT_GE(reset["t_ns"].get<int64_t>(), lock["t_ns"].get<int64_t>());
  for (const auto& c : NvmlCalls()) {
    EXPECT_EQ(c.find("Set"), std::string::npos) << c;
    EXPECT_EQ(c.find("Reset"), std::string::npos) << c;
  }
  EXPECT_FALSE(fs::exists(dir_ / "nvml.state"));
}

TEST_F(ActuatorTest, DryRunWorksWithoutNvml) {
  options_.nvml_library = (dir_ / "no-nvml.so").string();
  std::string error;
  auto a = MakeActuator("emulate", options_, &error);
  ASSERT_NE(a, nullptr) << error;
  ActuatorGpu gpu;
  const int slot = a->Open("0000:19:00.0", &gpu, &error);
  ASSERT_EQ(slot, 0) << error;
  EXPECT_TRUE(gpu.name.empty());
  SwitchRequest r;
  r.mhz = 1352;
  ASSERT_TRUE(a->Lock(slot, r, &error)) << error;
  const auto lock = nlohmann::json::parse(Lines(ReadAll(options_.log_path)).at(0));
  EXPECT_EQ(lock["actuator"], "emulate");
  EXPECT_EQ(lock["mhz"], 1352);  // no clock list to snap to
}

// A stand-in zeusd: answers /discover with two GPUs and every write with `status`, and keeps
// the request lines it got.
class FakeZeusd {
 public:
  FakeZeusd(const fs::path& socket, int status, std::string groups)
      : path_(socket), status_(status), groups_(std::move(groups)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeZeusd() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  void Serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string in;
      char buf[1024];
      while (in.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      const std::string line = in.substr(0, in.find("\r\n"));
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(line);
      }
      std::string body;
      int status = status_;
      if (line.rfind("GET /discover ", 0) == 0) {
        status = 200;
        body = R"({"gpus":[{"id":0,"name":"NVIDIA H200","pci_address":"0000:19:00.0"},)"
               R"({"id":1,"name":"NVIDIA H200","pci_address":"0000:2A:00.0"}],"enabled_api_groups":)" +
               groups_ + "}";
      } else if (status != 200) {
        body = R"({"errors":{"1":"Insufficient Permissions"}})";
      }
      const std::string answer = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      (void)!send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      close(c);
    }
  }

  fs::path path_;
  int status_;
  std::string groups_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> requests_;
};

TEST_F(ActuatorTest, ZeusdFindsTheGpuByPciAddressAndLocksThroughItsApi) {
  options_.zeusd_socket = (dir_ / "zeusd.sock").string();
  FakeZeusd zeusd(options_.zeusd_socket, 200, R"(["gpu-control","gpu-read"])");
  std::string error;
  auto a = MakeActuator("zeusd", options_, &error);
  ASSERT_NE(a, nullptr) << error;
  EXPECT_TRUE(a->changes_clocks());
  ActuatorGpu gpu;
  const int slot = a->Open("0000:2a:00.0", &gpu, &error);
  ASSERT_EQ(slot, 0) << error;
  EXPECT_EQ(gpu.index, 1);
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  SwitchRequest r;
  r.mhz = 1410;
  ASSERT_TRUE(a->Lock(slot, r, &error)) << error;
  ASSERT_TRUE(a->Reset(slot, "exit", &error)) << error;
  EXPECT_EQ(zeusd.requests(),
            (std::vector<std::string>{
                "GET /discover HTTP/1.1",
                "POST /gpu/set_gpu_locked_clocks?gpu_ids=1&min_clock_mhz=1410&max_clock_mhz=1410&block=true HTTP/1.1",
                "POST /gpu/reset_gpu_locked_clocks?gpu_ids=1&block=true HTTP/1.1"}));
  EXPECT_EQ(a->Open("0000:77:00.0", &gpu, &error), -1);
  EXPECT_NE(error.find("does not list the GPU 0000:77:00.0"), std::string::npos) << error;
}

TEST_F(ActuatorTest, ZeusdRefusalsAndAbsenceAreClearErrors) {
  options_.zeusd_socket = (dir_ / "zeusd.sock").string();
  std::string error;
  EXPECT_EQ(MakeActuator("zeusd", options_, &error), nullptr);
  EXPECT_NE(error.find("cannot connect"), std::string::npos) << error;
  EXPECT_NE(error.find("is zeusd running"), std::string::npos) << error;
  {
    FakeZeusd zeusd(options_.zeusd_socket, 200, R"(["gpu-read"])");
    EXPECT_EQ(MakeActuator("zeusd", options_, &error), nullptr);
    EXPECT_NE(error.find("does not enable the gpu-control API group"), std::string::npos) << error;
  }
  fs::remove(options_.zeusd_socket);
  FakeZeusd zeusd(options_.zeusd_socket, 403, R"(["gpu-control"])");
  auto a = MakeActuator("zeusd", options_, &error);
  ASSERT_NE(a, nullptr) << error;
  ActuatorGpu gpu;
  const int slot = a->Open("0000:19:00.0", &gpu, &error);
  ASSERT_EQ(slot, 0) << error;
  SwitchRequest r;
  r.mhz = 1410;
  EXPECT_FALSE(a->Lock(slot, r, &error));
  EXPECT_NE(error.find("HTTP 403"), std::string::npos) << error;
  EXPECT_NE(error.find("Insufficient Permissions"), std::string::npos) << error;
}

}  // namespace
}  // namespace emo::runtime
