#include "emo/runtime/launch.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <utility>

namespace emo::runtime {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibraryName = "libemo_inject.so";

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The child's pid while it runs, for the signal forwarder; a signal that came before the child
// had a pid (between the handler's installation and the fork's return) waits in g_pending.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_pending = 0;

void Forward(int sig) {
  if (g_child > 0) {
    kill(static_cast<pid_t>(g_child), sig);
  } else {
    g_pending = sig;
  }
}

// A regex matching the file names an output pattern's %-fields can produce.
std::string PatternRegex(const std::string& name) {
  std::string re;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '%' && i + 1 < name.size()) {
      const char f = name[++i];
      if (f == 'r') re += "(pid)?[0-9]+";
      else if (f == 'p') re += "[0-9]+";
      else if (f == 'h') re += "[^/]+";
      else if (f == '%') re += "%";
      else re += std::string("%") + f;
      continue;
    }
    if (std::strchr(".^$|()[]{}*+?\\", c) != nullptr) re += '\\';
    re += c;
  }
  return re;
}

}  // namespace

Result<std::string> FindInjectionLibrary() {
  std::vector<std::string> tried;
  if (const char* env = std::getenv("EMO_INJECT_LIB"); env != nullptr && *env != '\0') {
    if (fs::exists(env)) return std::string(env);
    tried.push_back(fmt::format("{} ($EMO_INJECT_LIB)", env));
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p : {exe.parent_path() / kLibraryName, exe.parent_path().parent_path() / "lib" / kLibraryName}) {
      if (fs::exists(p)) return fs::absolute(p).string();
      tried.push_back(p.string());
    }
  }
#ifdef EMO_INJECT_BUILD_PATH
  if (fs::exists(EMO_INJECT_BUILD_PATH)) return std::string(EMO_INJECT_BUILD_PATH);
  tried.push_back(EMO_INJECT_BUILD_PATH);
#endif
  std::string list;
  for (const auto& t : tried) list += fmt::format("{}{}", list.empty() ? "" : ", ", t);
  return NotFound(fmt::format(
      "EMO's tracer library {} was not found (looked in: {}); this emo was built without CUPTI (the CUDA "
      "toolkit was not found when it was built), or the library was not installed beside it",
      kLibraryName, list));
}

std::vector<std::string> FindOutputs(const std::string& pattern, int64_t since_ns) {
  const fs::path p(pattern);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::regex re(PatternRegex(p.filename().string()));
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec) || !std::regex_match(entry.path().filename().string(), re)) continue;
    struct stat st{};
    if (stat(entry.path().c_str(), &st) != 0) continue;
    const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    // File systems keep coarse times: a second of slack, then the newest first run wins.
    if (mtime + 1'000'000'000 < since_ns) continue;
    found.emplace_back(mtime, (p.has_parent_path() ? entry.path() : entry.path().filename()).string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (auto& f : found) files.push_back(std::move(f.second));
  return files;
}

Result<LaunchResult> RunUnderTracer(const LaunchOptions& o) {
  if (o.command.empty()) return InvalidArgument("no program to run: give it after `--`, e.g. `emo trace -- python train.py`");
  LaunchResult result;
  result.injection_library = o.injection_library;
  if (result.injection_library.empty()) {
    auto lib = FindInjectionLibrary();
    if (!lib.ok()) return lib.status();
    result.injection_library = *lib;
  }
  const std::string out_dir = fs::path(o.output).has_parent_path() ? fs::path(o.output).parent_path().string() : ".";
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) {
    return NotFound(fmt::format("the output folder {} (of -o {}) does not exist", out_dir, o.output));
  }
  // Before the fork: the child only calls async-signal-safe functions and exec.
  std::vector<std::string> env = {
      "CUDA_INJECTION64_PATH=" + result.injection_library,
      "EMO_TRACE_OUT=" + fs::absolute(o.output).string(),
      "EMO_TRACE_MODE=" + o.mode,
      fmt::format("EMO_TRACE_WARMUP={}", o.warmup),
      fmt::format("EMO_TRACE_ITERATIONS={}", o.iterations),
      fmt::format("EMO_TRACE_BUFFER_MIB={}", o.buffer_mib),
  };
  if (!o.nvtx_regex.empty()) env.push_back("EMO_TRACE_NVTX_REGEX=" + o.nvtx_regex);
  env.insert(env.end(), o.extra_env.begin(), o.extra_env.end());
  // The variables set above replace the caller's; any other (EMO_TRACE_ANCHOR, EMO_TRACE_NVML:
  // knobs with no command-line option) passes through.
  const size_t set_here = env.size();
  auto set_by_emo = [&env, set_here](std::string_view key) {
    return std::any_of(env.begin(), env.begin() + static_cast<ptrdiff_t>(set_here), [&](const std::string& kv) {
      return kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=';
    });
  };
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    if (!set_by_emo(kv.substr(0, kv.find('=')))) env.emplace_back(kv);
  }
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o.command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int64_t start_ns = RealtimeNs();
  // The forwarder is in place before the fork: a SIGTERM that reaches emo as soon as the program
  // runs (a job scheduler's, a test's) is passed on, not emo's own end with the program left
  // running.
  struct sigaction forward{}, old_int{}, old_term{};
  forward.sa_handler = Forward;
  sigemptyset(&forward.sa_mask);
  g_pending = 0;
  sigaction(SIGINT, &forward, &old_int);
  sigaction(SIGTERM, &forward, &old_term);
  auto restore = [&] {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  };
  const pid_t pid = fork();
  if (pid < 0) {
    restore();
    return IoError(fmt::format("cannot start {}: fork failed: {}", o.command[0], std::strerror(errno)));
  }
  if (pid == 0) {
    // The program starts with emo's caller's dispositions (exec would reset the handler anyway).
    restore();
    execvpe(argv[0], argv.data(), envp.data());
    // No allocation between fork and exit: the message is written piece by piece.
    const char* why = std::strerror(errno);
    for (const char* part : std::initializer_list<const char*>{"emo: cannot run ", argv[0], ": ", why, "\n"}) {
      (void)!write(STDERR_FILENO, part, std::strlen(part));
    }
    _exit(127);
  }
  g_child = pid;
  if (g_pending != 0) kill(pid, g_pending);
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  restore();
  g_child = 0;
  if (waited < 0) return IoError(fmt::format("waiting for {} failed: {}", o.command[0], std::strerror(errno)));
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.exit_code = 128 + result.signal;
  }
  result.files = FindOutputs(fs::absolute(o.output).string(), start_ns);
  return result;
}

}  // namespace emo::runtime
