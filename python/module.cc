// emo._emo: the native half of the Python package. It runs the emo command line in-process
// (emo::cli::RunEmo, the code the binary runs) with the GIL released, and hands back the exit
// code and what the command printed; python/emo/__init__.py builds the Python API on it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "cli_app.h"
#include "emo/runtime/energy_windows.h"

namespace py = pybind11;

namespace {

// Commands that start and signal programs (trace, monitor, run) install signal handlers and
// fork: they would take Ctrl-C from the interpreter. Python runs them as the emo binary.
constexpr const char* kOutOfProcess[] = {"trace", "monitor", "run"};

// Points file descriptor `fd` at a fresh temporary file while alive, and gives back what was
// written there. The command prints to stdout/stderr with stdio; both are flushed at each end.
class Capture {
 public:
  explicit Capture(int fd) : fd_(fd), file_(std::tmpfile()) {
    std::fflush(nullptr);
    if (file_ == nullptr) return;
    saved_ = dup(fd_);
    if (saved_ < 0 || dup2(fileno(file_), fd_) < 0) Restore();
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  ~Capture() {
    Restore();
    if (file_ != nullptr) std::fclose(file_);
  }
  // Restores the descriptor and returns the text captured.
  std::string Take() {
    Restore();
    std::string text;
    if (file_ == nullptr) return text;
    std::rewind(file_);
    char buffer[4096];
    size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, file_)) > 0) text.append(buffer, n);
    return text;
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(nullptr);
    dup2(saved_, fd_);
    close(saved_);
    saved_ = -1;
  }
  int fd_;
  std::FILE* file_;
  int saved_ = -1;
};

// One command at a time: the captures redirect the process's descriptors 1 and 2.
std::mutex g_run_mutex;

std::tuple<int, std::string, std::string> Run(const std::vector<std::string>& args) {
  if (!args.empty()) {
    for (const char* name : kOutOfProcess) {
      if (args[0] == name) {
        return {2, "", "emo " + args[0] +
                           ": not run inside Python (it starts and signals programs); run the emo binary "
                           "(subprocess), or use emo.Monitor / emo.trace\n"};
      }
    }
  }
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g_run_mutex);
  Capture out(1), err(2);
  const int code = emo::cli::RunEmo(args);
  std::string out_text = out.Take();
  std::string err_text = err.Take();
  return {code, std::move(out_text), std::move(err_text)};
}

// A failed Status as a Python RuntimeError carrying its message (python/emo/__init__.py turns it
// into EmoError).
void Check(const emo::Status& status) {
  if (!status.ok()) throw std::runtime_error(status.message());
}

py::dict MeasurementDict(const emo::runtime::WindowMeasurement& m) {
  py::dict energy, uncertainty, names;
  for (const auto& g : m.gpus) {
    energy[py::int_(g.index)] = g.energy_j;
    uncertainty[py::int_(g.index)] = g.uncertainty_j;
    names[py::int_(g.index)] = g.name;
  }
  py::dict d;
  d["name"] = m.name;
  d["time"] = m.time_s;
  d["energy"] = energy;
  d["uncertainty"] = uncertainty;
  d["gpu_names"] = names;
  d["total_energy"] = m.total_energy_j;
  d["measurable"] = m.measurable;
  return d;
}

}  // namespace

PYBIND11_MODULE(_emo, m) {
  m.doc() = "EMO's native module: runs the emo command line in-process (use the emo package).";
  m.def("run", &Run, py::arg("args"),
        "Runs `emo ARGS...` in this process with the GIL released; returns (exit code, stdout, stderr).");
  using emo::runtime::EnergyWindows;
  py::class_<EnergyWindows>(m, "EnergyWindows",
                            "Time and energy windows per GPU on NVML's energy counter (emo.Monitor uses it).")
      .def(py::init<>())
      .def(
          "open",
          [](EnergyWindows& w, const std::vector<int>& indices, const std::string& nvml_path) {
            Check(w.Open(indices, nvml_path));
          },
          py::arg("indices"), py::arg("nvml_path") = "")
      .def("indices", &EnergyWindows::indices)
      .def("begin", [](EnergyWindows& w, const std::string& name) { Check(w.Begin(name)); })
      .def("end", [](EnergyWindows& w, const std::string& name) {
        auto r = w.End(name);
        Check(r.status());
        return MeasurementDict(*r);
      });
  m.attr("ENERGY_COUNTER_PERIOD_S") = emo::runtime::kEnergyCounterPeriodS;
  m.def(
      "trace_summary",
      [](const std::string& path) {
        py::gil_scoped_release release;
        auto r = emo::cli::TraceSummaryJson(path);
        Check(r.status());
        return *r;
      },
      py::arg("path"), "The summary `emo trace --json` gives of one trace file, as JSON text.");
  m.def(
      "tracer_library",
      [] {
        auto r = emo::cli::TracerLibrary();
        Check(r.status());
        return *r;
      },
      "The path of EMO's tracer library (libemo_inject.so) as `emo trace` finds it.");
}
