#!/usr/bin/env python3
"""NVML energy counter, read through ctypes (libnvidia-ml.so.1), getters only.

An independent check of `emo monitor`: the bench loops (train_loop.py, decode_loop.py) import
`NvmlEnergy` from here and, with `--nvml-energy`, read the GPU's total-energy counter
(nvmlDeviceGetTotalEnergyConsumption, mJ since the driver loaded) before and after their timed
region (synchronized at both ends), and report joules per step and the window's length.

This module calls only nvmlInit_v2, nvmlShutdown, nvmlErrorString and nvmlDeviceGet* functions.
It never sets clocks, power limits or modes and never resets anything.

Counter granularity: on the H200 the counter moves about every 100 ms, so each end of a window
can be off by up to one update period; `bound_pct` below is 2 x 0.1 s / window, a bound
assumed from that period (not measured per run). Use windows >= 6 s for numbers within ~3 %.

As a script: prints the counter, power and SM clock of one GPU as a JSON line, and with
`--window-s S` the energy and mean power over S seconds of whatever the GPU is doing (e.g. idle,
to compare a loop's energy with the idle floor):
  python3 bench/gpu/energy_check.py [--index I | --pci-bus-id ID] [--window-s S]
"""
import argparse
import ctypes
import json
import time

NVML_CLOCK_SM = 1
COUNTER_PERIOD_S = 0.1  # H200 energy-counter update period (../shared research, measured)


class NvmlError(RuntimeError):
    pass


class NvmlEnergy:
    """One GPU's NVML energy counter. `pci_bus_id` (e.g. '00000000:19:00.0', as CUDA or PyTorch
    report it) picks the same GPU as the CUDA device even under CUDA_VISIBLE_DEVICES; else
    `index` is NVML's index."""

    def __init__(self, pci_bus_id=None, index=0):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        self.lib.nvmlErrorString.restype = ctypes.c_char_p
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        if pci_bus_id:
            self._check(self.lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(self.handle)),
                        f"nvmlDeviceGetHandleByPciBusId_v2({pci_bus_id})")
        else:
            self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self.handle)),
                        f"nvmlDeviceGetHandleByIndex_v2({index})")
        self.pci_bus_id = pci_bus_id
        self.index = index

    def _check(self, rc, what):
        if rc != 0:
            msg = self.lib.nvmlErrorString(rc)
            raise NvmlError(f"NVML {what} failed: {rc} ({msg.decode() if msg else '?'})")

    def energy_mj(self):
        v = ctypes.c_ulonglong()
        self._check(self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(v)),
                    "nvmlDeviceGetTotalEnergyConsumption")
        return v.value

    def power_mw(self):
        v = ctypes.c_uint()
        self._check(self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(v)), "nvmlDeviceGetPowerUsage")
        return v.value

    def sm_mhz(self):
        v = ctypes.c_uint()
        self._check(self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(v)),
                    "nvmlDeviceGetClockInfo(SM)")
        return v.value

    def name(self):
        buf = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlDeviceGetName(self.handle, buf, ctypes.c_uint(96)), "nvmlDeviceGetName")
        return buf.value.decode(errors="replace")

    def shutdown(self):
        self._check(self.lib.nvmlShutdown(), "nvmlShutdown")


class EnergyWindow:
    """Counter read at start() and stop(); the caller synchronizes the GPU before each call."""

    def __init__(self, nvml):
        self.nvml = nvml
        self.e0 = self.t0 = None

    def start(self):
        self.e0 = self.nvml.energy_mj()
        self.t0 = time.perf_counter()

    def stop(self, steps):
        t1 = time.perf_counter()
        e1 = self.nvml.energy_mj()
        window = t1 - self.t0
        joules = (e1 - self.e0) / 1000.0
        return {"energy_per_step_j": joules / steps if steps else None, "energy_j": joules, "window_s": window,
                "energy_steps": steps, "avg_power_w": joules / window if window > 0 else None,
                "energy_bound_pct": 100.0 * 2 * COUNTER_PERIOD_S / window if window > 0 else None,
                "energy_source": "nvmlDeviceGetTotalEnergyConsumption (ctypes, read at synchronized window ends)",
                "sm_mhz_at_end": self.nvml.sm_mhz(), "power_w_at_end": self.nvml.power_mw() / 1000.0}


def for_torch_device(device_index):
    """NvmlEnergy for the CUDA device PyTorch calls `device_index` (matched by PCI bus id)."""
    import torch  # only when used from the torch loops

    props = torch.cuda.get_device_properties(device_index)
    bus = getattr(props, "pci_bus_id", None)
    dom = getattr(props, "pci_domain_id", None)
    dev = getattr(props, "pci_device_id", None)
    if bus is not None and dom is not None and dev is not None:
        return NvmlEnergy(pci_bus_id=f"{dom:08x}:{bus:02x}:{dev:02x}.0")
    return NvmlEnergy(index=device_index)  # fallback: NVML index (wrong under CUDA_VISIBLE_DEVICES)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", type=int, default=0, help="NVML device index (default 0)")
    ap.add_argument("--pci-bus-id", help="pick the GPU by PCI bus id instead")
    ap.add_argument("--window-s", type=float, default=0.0, help="also measure energy over this many seconds")
    args = ap.parse_args()
    nv = NvmlEnergy(pci_bus_id=args.pci_bus_id, index=args.index)
    out = {"device": nv.name(), "energy_mj": nv.energy_mj(), "power_w": nv.power_mw() / 1000.0,
           "sm_mhz": nv.sm_mhz()}
    if args.window_s > 0:
        w = EnergyWindow(nv)
        w.start()
        time.sleep(args.window_s)
        r = w.stop(0)
        out.update({k: r[k] for k in ("energy_j", "window_s", "avg_power_w", "energy_bound_pct")})
    nv.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
