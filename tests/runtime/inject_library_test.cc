// libemo_inject.so as a program sees it: what it links, what it exports, and what happens
// when InitializeInjection cannot trace (no GPU here, or an output it cannot open): one
// "emo trace:" line on stderr, a success return, and the program carries on.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char* const kLibrary = EMO_INJECT_PATH;

// stdout of `command`, and whether it exited 0.
bool RunCommand(const std::string& command, std::string* out) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  return pclose(pipe) == 0;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// The library's name up to ".so" ("libcupti" from "libcupti.so.13 => /usr/...").
std::string Stem(const std::string& word) {
  const size_t slash = word.rfind('/');
  const std::string base = slash == std::string::npos ? word : word.substr(slash + 1);
  const size_t so = base.find(".so");
  return so == std::string::npos ? base : base.substr(0, so);
}

TEST(InjectLibraryTest, LinksOnlyCuptiAndTheSystemLibraries) {
  std::string out;
  ASSERT_TRUE(RunCommand(std::string("ldd ") + kLibrary, &out)) << out;
  // libutil comes with libcupti (glibc's, like the others).
  std::set<std::string> allowed = {"linux-vdso",      "libcupti",   "libc",  "libm",  "libstdc++", "libgcc_s",
                                   "ld-linux-x86-64", "libpthread", "libdl", "librt", "libutil"};
#ifdef EMO_INJECT_SANITIZED
  allowed.insert({"libasan", "libubsan", "libtsan"});
#endif
  const std::vector<std::string> lines = Lines(out);
  ASSERT_FALSE(lines.empty());
  bool cupti = false;
  for (const std::string& line : lines) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    const std::string stem = Stem(first);
    EXPECT_TRUE(allowed.count(stem)) << "libemo_inject.so must not need " << first << " (ldd: " << line << ")";
    EXPECT_EQ(line.find("not found"), std::string::npos) << line;
    cupti |= stem == "libcupti";
  }
  EXPECT_TRUE(cupti) << out;
}

TEST(InjectLibraryTest, ExportsOnlyItsEntryPoints) {
  std::string out;
  ASSERT_TRUE(RunCommand(std::string("nm -D --defined-only ") + kLibrary, &out)) << out;
  std::vector<std::string> exported;
  for (const std::string& line : Lines(out)) {
    std::istringstream words(line);
    std::string address;
    std::string type;
    std::string name;
    words >> address >> type >> name;
    if (!name.empty()) exported.push_back(name);
  }
  std::sort(exported.begin(), exported.end());
  EXPECT_EQ(exported, (std::vector<std::string>{"InitializeInjection", "emo_trace_begin", "emo_trace_end"})) << out;
}

struct ChildResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `setup` then InitializeInjection in a child process with `env` added, the way the CUDA
// driver would: dlopen, dlsym, call. The child then prints "continued" and exits 0.
ChildResult InitializeInChild(const std::map<std::string, std::string>& env) {
  int out_pipe[2];
  int err_pipe[2];
  ChildResult result;
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return result;
  const pid_t child = fork();
  if (child == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
      _exit(10);
    }
    using Init = int (*)();
    auto init = reinterpret_cast<Init>(dlsym(library, "InitializeInjection"));
    if (init == nullptr) _exit(11);
    const int r = init();
    std::printf("returned %d\ncontinued\n", r);
    std::fflush(stdout);
    std::fflush(stderr);
    std::exit(0);  // through exit(), so an atexit handler would run too
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  auto drain = [](int fd, std::string* to) {
    char buffer[4096];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) to->append(buffer, static_cast<size_t>(n));
    close(fd);
  };
  drain(out_pipe[0], &result.out);
  drain(err_pipe[0], &result.err);
  int status = 0;
  waitpid(child, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

bool HaveGpu() { return std::filesystem::exists("/dev/nvidiactl"); }

TEST(InjectLibraryTest, WithoutAGpuOneLineAndTheProgramContinues) {
  if (HaveGpu()) GTEST_SKIP() << "this machine has an NVIDIA GPU: the no-GPU path cannot be shown here";
  const std::string dir = std::filesystem::temp_directory_path() / ("emo_inject_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const ChildResult r = InitializeInChild({{"EMO_TRACE_OUT", dir + "/t_%r.emotrace"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "returned 1\ncontinued\n");
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("emo trace: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("untraced"), std::string::npos) << lines[0];
  // Nothing half-written is left behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(InjectLibraryTest, UnwritableOutputIsOneLineAndTheProgramContinues) {
  // Fails on any machine: without a GPU at CUPTI, with one at the output.
  const ChildResult r = InitializeInChild({{"EMO_TRACE_OUT", "/nonexistent-emo-dir/t_%r.emotrace"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "returned 1\ncontinued\n");
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("emo trace: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("untraced"), std::string::npos) << lines[0];
}

TEST(InjectLibraryTest, BadSettingsAreReportedAndDoNotStopTheProgram) {
  const ChildResult r = InitializeInChild({{"EMO_TRACE_OUT", "/nonexistent-emo-dir/t.emotrace"},
                                           {"EMO_TRACE_WARMUP", "-3"},
                                           {"EMO_TRACE_MODE", "everything"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "returned 1\ncontinued\n");
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 3u) << r.err;
  for (const std::string& line : lines) EXPECT_EQ(line.rfind("emo trace: ", 0), 0u) << line;
  EXPECT_NE(lines[0].find("EMO_TRACE_MODE"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("EMO_TRACE_WARMUP"), std::string::npos) << lines[1];
}

}  // namespace
