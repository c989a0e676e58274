"""Fake hip-python modules (hip, hiprtc, hipblas) for one binding version: every call is bound
against the recorded signature (wrong arity or names fail), logged, and answered with the tuple
shape that version returns. Host memory is real (the backend wraps it in numpy); device memory
is just addresses."""

from __future__ import annotations

import ctypes
import enum
import inspect
from types import SimpleNamespace

from .hip_signatures import SIGNATURES_7, SIGNATURES_10


class hipMemcpyKind(enum.IntEnum):
    hipMemcpyHostToHost = 0
    hipMemcpyHostToDevice = 1
    hipMemcpyDeviceToHost = 2
    hipMemcpyDeviceToDevice = 3


class hipStreamCaptureMode(enum.IntEnum):
    hipStreamCaptureModeGlobal = 0
    hipStreamCaptureModeThreadLocal = 1
    hipStreamCaptureModeRelaxed = 2


class hipStreamCaptureStatus(enum.IntEnum):
    hipStreamCaptureStatusNone = 0
    hipStreamCaptureStatusActive = 1
    hipStreamCaptureStatusInvalidated = 2


PROPS = dict(gcnArchName=b"gfx942:sramecc+:xnack-", warpSize=64, multiProcessorCount=304, name=b"AMD Instinct MI300X")


class FakeHip:
    def __init__(self, version: str):
        self.version = version
        self.major = int(version.split(".")[0])
        self.sigs = SIGNATURES_10 if self.major >= 10 else SIGNATURES_7
        self.calls: list[tuple[str, dict]] = []
        self._host: dict[int, ctypes.Array] = {}
        self._next = 0x7000_0000
        self.capturing = False

    def _bind(self, name: str, args: tuple) -> dict:
        params = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in self.sigs[name]]
        bound = inspect.Signature(params).bind(*args)  # TypeError on a wrong call shape
        self.calls.append((name, dict(bound.arguments)))
        return bound.arguments

    def fn(self, name: str, result):
        def call(*args):
            a = self._bind(name, args)
            return result(a) if callable(result) else result

        call.__name__ = name
        return call

    def _dev(self, a) -> tuple:
        self._next += 0x10000
        return (0, self._next)

    def _host_alloc(self, a) -> tuple:
        buf = (ctypes.c_uint8 * max(int(a["size"]), 1))()
        self._host[ctypes.addressof(buf)] = buf
        return (0, ctypes.addressof(buf))

    def modules(self):
        hip = SimpleNamespace(
            hipMemcpyKind=hipMemcpyKind,
            hipStreamCaptureMode=hipStreamCaptureMode,
            hipStreamCaptureStatus=hipStreamCaptureStatus,
        )
        ok = (0,)
        results = {
            "hipGetDeviceCount": (0, 1),
            "hipMalloc": self._dev,
            "hipHostMalloc": self._host_alloc,
            "hipStreamCreateWithFlags": (0, "stream"),
            "hipEventCreate": lambda a: (0, object()),
            "hipEventElapsedTime": (0, 0.5),
            "hipStreamEndCapture": lambda a: self._end(),
            "hipStreamBeginCapture": lambda a: self._begin(),
            "hipStreamIsCapturing": lambda a: (0, hipStreamCaptureStatus(int(self.capturing))),
            "hipGraphInstantiateWithFlags": (0, "exec"),
            "hipModuleLoadData": (0, "module"),
            "hipModuleGetFunction": lambda a: (0, ("function", a["kname"])),
            "hipGraphExecUpdate": (0, 0) if self.major >= 10 else (0, None, 0),
        }
        if self.major >= 10:
            results["hipGetDeviceProperties"] = (0, SimpleNamespace(**PROPS))
        else:
            hip.hipDeviceProp_t = lambda: SimpleNamespace()
            results["hipGetDeviceProperties"] = lambda a: (a["prop"].__dict__.update(PROPS), ok)[1]
        for name in self.sigs:
            if name.startswith("hip") and not name.startswith(("hiprtc", "hipblas")):
                setattr(hip, name, self.fn(name, results.get(name, ok)))
        rtc = SimpleNamespace()
        rtc_results = {
            "hiprtcCreateProgram": (0, "prog"),
            "hiprtcGetCodeSize": (0, 16),
            "hiprtcVersion": (0, 7, 0),
            "hiprtcGetProgramLogSize": (0, 1),
        }
        blas = SimpleNamespace()
        for name in self.sigs:
            if name.startswith("hiprtc"):
                setattr(rtc, name, self.fn(name, rtc_results.get(name, ok)))
            elif name.startswith("hipblas"):
                setattr(blas, name, self.fn(name, (0, "handle") if name == "hipblasCreate" else ok))
        return hip, rtc, blas, self.version

    def _begin(self):
        assert not self.capturing, "capture begun twice"
        self.capturing = True
        return (0,)

    def _end(self):
        assert self.capturing, "capture ended without begin"
        self.capturing = False
        return (0, "graph")

    def named(self, name: str) -> list[dict]:
        return [a for n, a in self.calls if n == name]
