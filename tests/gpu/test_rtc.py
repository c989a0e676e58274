"""nvrtc and hiprtc go through one compile path (gpu/runtime/rtc.py): the same calls under each
vendor's prefix, checked here against a recording stand-in for either module."""

from __future__ import annotations

import pytest

from migx_explore.gpu.runtime.base import GpuError
from migx_explore.gpu.runtime.rtc import RuntimeCompiler


class FakeRtc:
    """Answers `<prefix><Call>` like the bindings: a status first, then the value."""

    def __init__(self, prefix: str, fail: bool = False):
        self.prefix, self.fail, self.calls = prefix, fail, []

    def __getattr__(self, attr: str):
        call = attr.removeprefix(self.prefix)

        def fn(*args):
            self.calls.append(call)
            if call == "CreateProgram":
                return 0, "prog"
            if call == "CompileProgram":
                return (1 if self.fail else 0,)
            if call.endswith("Size"):
                return 0, 4
            if call in ("GetProgramLog", "GetCUBIN", "GetCode"):
                args[1][:] = b"oops" if call == "GetProgramLog" else b"\x7fELF"
                return (0,)
            return (0,)

        return fn


def _check(result, what):
    if result[0]:
        raise GpuError(f"{what} failed")
    return result[1] if len(result) > 1 else None


@pytest.mark.parametrize("prefix,binary", [("nvrtc", "CUBIN"), ("hiprtc", "Code")])
def test_both_vendors_compile_through_the_same_calls(prefix, binary):
    mod = FakeRtc(prefix)
    rtc = RuntimeCompiler(mod, prefix, ".cu", binary, bytearray, _check)
    assert rtc.compile_program("k", "src", {"migx.hpp": "x"}, ["-O3"]) == b"\x7fELF"
    assert mod.calls == ["CreateProgram", "CompileProgram", f"Get{binary}Size", f"Get{binary}", "DestroyProgram"]


def test_a_compile_error_carries_the_log_and_the_source_and_frees_the_program():
    mod = FakeRtc("hiprtc", fail=True)
    rtc = RuntimeCompiler(mod, "hiprtc", ".hip", "Code", bytearray, _check)
    with pytest.raises(GpuError, match=r"(?s)hiprtc failed to compile k:\noops\n--- source ---\nint x;"):
        rtc.compile_program("k", "int x;", {}, [])
    assert mod.calls[-1] == "DestroyProgram"
