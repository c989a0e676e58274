"""One compiled program, with its graph, per shape bucket of a dynamic program (design decision
14: graph capture keeps a graph per shape bucket).

The GPU executor runs static shapes. A program with one dynamic dimension (a batch range, a
sequence range) is split the way split_single_dyn_dim splits it, one static copy per size (or per
bucket with buckets="pow2"); each copy is compiled and finalized on its own, and `run` picks the
one the inputs' shapes select, as MIGraphX's select_module picks a submodule at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Program
from migx_explore.compiler.passes.split_single_dyn_dim import bucket_sizes, copy_static, single_dyn_dim


def static_programs(program: Program, buckets: str = "") -> tuple[dict[int, Program], dict[str, int]]:
    """Per size (or bucket): the static program split_single_dyn_dim would make for it; and, per
    dynamic param, its dynamic axis."""
    found = single_dyn_dim(program.main)
    if found is None:
        raise MigxError("the program has no single dynamic dimension to split into static programs")
    dim, axes = found
    out = {}
    for size in bucket_sizes(dim.min, dim.max, buckets):
        p = Program()
        p.main.add_return(copy_static(program.main, p.main, axes, size))
        p.input_names = list(getattr(program, "input_names", []) or [])
        p.output_names = list(getattr(program, "output_names", []) or [])
        out[size] = p
    return out, axes


class BucketedProgram:
    """CompiledPrograms keyed by the size of the dynamic dimension."""

    def __init__(self, program: Program, options: Any = None, *, backend: Any = None, buckets: str = ""):
        from . import compile

        statics, self.axes = static_programs(program, buckets)
        self.programs: dict[int, Any] = {}
        try:
            for size, p in statics.items():
                self.programs[size] = compile(p, options, backend=backend)
        except BaseException:
            self.close()
            raise

    def size_of(self, inputs: Mapping[str, Any]) -> int:
        for name, axis in self.axes.items():
            if name in inputs:
                return int(np.shape(inputs[name])[axis])
        raise MigxError(f"inputs name none of the dynamic inputs {', '.join(self.axes)}")

    def for_inputs(self, inputs: Mapping[str, Any]) -> Any:
        size = self.size_of(inputs)
        if size not in self.programs:
            raise MigxError(f"no compiled program for size {size}; compiled sizes: {sorted(self.programs)}")
        return self.programs[size]

    def run(self, inputs: Mapping[str, Any], mode: str = "eager") -> list[np.ndarray]:
        return self.for_inputs(inputs).run(inputs, mode)

    def close(self) -> None:
        for c in self.programs.values():
            c.close()
        self.programs = {}

    def __enter__(self) -> BucketedProgram:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["BucketedProgram", "static_programs"]
