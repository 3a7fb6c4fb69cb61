"""Instructions retired by one thread, from the kernel's performance counters (perf_event_open(2)
through ctypes; Linux only, standard library only).

Why the bench loops count them: a step's instruction count does not depend on how fast the host
runs at that moment, so the instructions a tracer adds to the program's thread, and the
instructions its own threads run, can be compared between processes on a host whose speed drifts
(bench/gpu/overhead_summary.py).

    c = ThreadInstructions()          # the calling thread; ThreadInstructions(tid) for another one
    if c.ok: n0 = c.read(); ...; n = c.read() - n0
    else: print(c.why)                # no counter (perf_event_paranoid, a container, no PMU)

The counter counts user-space instructions, and kernel ones too where perf_event_paranoid allows
it (`kernel` says which). Hypervisor instructions are left out.
"""
import ctypes
import os
import struct

_SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_PERF_TYPE_HARDWARE = 0
_PERF_COUNT_HW_INSTRUCTIONS = 1
_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7 and later fields left zero
_EXCLUDE_KERNEL = 1 << 5
_EXCLUDE_HV = 1 << 6


class ThreadInstructions:
    def __init__(self, tid=0):
        self.fd = -1
        self.kernel = False
        self.why = ""
        nr = _SYS_PERF_EVENT_OPEN.get(os.uname().machine)
        if nr is None:
            self.why = f"perf_event_open: no syscall number known for {os.uname().machine}"
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        errors = []
        for flags, kernel in ((_EXCLUDE_HV, True), (_EXCLUDE_HV | _EXCLUDE_KERNEL, False)):
            attr = ctypes.create_string_buffer(_ATTR_SIZE)
            # type, size, config, sample_period, sample_type, read_format, flag bits
            struct.pack_into("=IIQQQQQ", attr, 0, _PERF_TYPE_HARDWARE, _ATTR_SIZE, _PERF_COUNT_HW_INSTRUCTIONS,
                             0, 0, 0, flags)
            fd = libc.syscall(ctypes.c_long(nr), attr, ctypes.c_int(tid), ctypes.c_int(-1), ctypes.c_int(-1),
                              ctypes.c_ulong(0))
            if fd >= 0:
                self.fd, self.kernel = fd, kernel
                return
            err = ctypes.get_errno()
            errors.append(f"{'user+kernel' if kernel else 'user'}: {os.strerror(err)}")
        try:
            with open("/proc/sys/kernel/perf_event_paranoid") as f:
                errors.append(f"perf_event_paranoid {f.read().strip()}")
        except OSError:
            pass
        self.why = "perf_event_open failed (" + "; ".join(errors) + ")"

    @property
    def ok(self):
        return self.fd >= 0

    def read(self):
        return struct.unpack("=Q", os.read(self.fd, 8))[0]

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
