// Energy windows on NVML's counter (energy_windows.h).
#include "emo/runtime/energy_windows.h"

#include <fmt/format.h>

#include "nvml_library.h"

namespace emo::runtime {

EnergyWindows::EnergyWindows() = default;
EnergyWindows::~EnergyWindows() = default;

Status EnergyWindows::Open(const std::vector<int>& indices, const std::string& nvml_path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (nvml_) return InvalidArgument("the energy windows are open already");
  auto nvml = std::make_unique<NvmlLibrary>();
  std::string error;
  if (!nvml->Load(nvml_path, /*control=*/false, &error)) return Unsupported(error);
  std::vector<int> want = indices;
  if (want.empty()) {
    const std::vector<std::string> names = nvml->Names(&error);
    if (names.empty()) return Unsupported(error.empty() ? "NVML sees no GPU" : error);
    for (size_t i = 0; i < names.size(); ++i) want.push_back(static_cast<int>(i));
  }
  std::vector<Gpu> gpus;
  for (int index : want) {
    if (index < 0) return InvalidArgument(fmt::format("GPU index {}: not an NVML index", index));
    Gpu g;
    g.index = index;
    if (!nvml->ByIndex(static_cast<unsigned>(index), &g.handle, &g.name, &error)) {
      return NotFound(fmt::format("GPU {}: {}", index, error));
    }
    unsigned long long mj = 0;
    if (!nvml->EnergyMj(g.handle, &mj, &error)) {
      return Unsupported(fmt::format("GPU {} ({}): no energy counter: {}", index, g.name, error));
    }
    gpus.push_back(std::move(g));
  }
  nvml_ = std::move(nvml);
  gpus_ = std::move(gpus);
  return Status::Ok();
}

std::vector<int> EnergyWindows::indices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> out;
  for (const auto& g : gpus_) out.push_back(g.index);
  return out;
}

Status EnergyWindows::ReadAll(std::vector<unsigned long long>* mj) const {
  mj->assign(gpus_.size(), 0);
  std::string error;
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (!nvml_->EnergyMj(gpus_[i].handle, &(*mj)[i], &error)) {
      return Internal(fmt::format("GPU {}: {}", gpus_[i].index, error));
    }
  }
  return Status::Ok();
}

Status EnergyWindows::Begin(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!nvml_) return InvalidArgument("the energy windows are not open");
  if (open_.count(name)) return InvalidArgument(fmt::format("window '{}' is open already", name));
  Window o;
  EMO_RETURN_IF_ERROR(ReadAll(&o.mj));
  o.start = std::chrono::steady_clock::now();
  open_.emplace(name, std::move(o));
  return Status::Ok();
}

Result<WindowMeasurement> EnergyWindows::End(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = open_.find(name);
  if (it == open_.end()) return InvalidArgument(fmt::format("window '{}' was not begun", name));
  const auto end = std::chrono::steady_clock::now();
  std::vector<unsigned long long> mj;
  EMO_RETURN_IF_ERROR(ReadAll(&mj));
  WindowMeasurement m;
  m.name = name;
  m.time_s = std::chrono::duration<double>(end - it->second.start).count();
  m.measurable = m.time_s >= 20 * kEnergyCounterPeriodS;
  for (size_t i = 0; i < gpus_.size(); ++i) {
    GpuWindow g;
    g.index = gpus_[i].index;
    g.name = gpus_[i].name;
    const unsigned long long before = it->second.mj[i];
    g.energy_j = mj[i] >= before ? static_cast<double>(mj[i] - before) * 1e-3 : 0.0;
    g.uncertainty_j = m.time_s > 0 ? g.energy_j * 2 * kEnergyCounterPeriodS / m.time_s : g.energy_j;
    m.total_energy_j += g.energy_j;
    m.gpus.push_back(std::move(g));
  }
  open_.erase(it);
  return m;
}

}  // namespace emo::runtime
