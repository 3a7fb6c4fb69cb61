// emo_py_core (python/CMakeLists.txt): the command code as one shared library, for machines whose
// Python differs from the build's; the native module is then compiled there on its own
// (scripts/device_bundle.sh, python/build_module.sh). It holds all of emo_cli, and the energy
// windows below.
#include "emo/runtime/energy_windows.h"

namespace emo::python {

// The linker takes an archive's member only when something refers to it: this keeps the energy
// windows (used by the native module only, not by the commands) in the library.
// (An exported function, so that nothing can drop it.)
[[gnu::visibility("default")]] std::vector<int> KeepEnergyWindows() { return runtime::EnergyWindows().indices(); }

}  // namespace emo::python
