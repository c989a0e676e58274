"""Gathers fused into a kernel's loads (fuse_ops' gather fusion, `gathers` on the kernel op).

An own input of a pointwise or reduction kernel that is `gather(table, indices, axis)` is read as
table[..., wrap(indices[...]), ...] where the kernel reads it, so the gathered tensor (an
embedding lookup's activations) is never written and read back, and the gather is not a launch.

The generators see such an input as two strided views over the gather's output lens: the table
with stride 0 on the axes the indices span (`rest`), and the indices with stride 0 elsewhere. An
element's address is the rest offset + wrap(index) * the table's stride along axis. Both views
collapse and decompose like any other operand, so the generators change only where they load.
Negative indices wrap by the axis length, as the gather kernel and the reference do; nothing is
clamped (the gather kernel does not clamp either).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from migx_explore.compiler.shape import Shape

from .common import CodegenUnsupported


@dataclass(frozen=True)
class GatherLoad:
    """Kernel param `table` is read through the indices in param `index`."""

    table: int
    index: int
    n: int  # the table's length along the gathered axis (negative indices wrap by it)
    stride: int  # the table's stride along the gathered axis
    real: tuple[Shape, Shape]  # the table's and the indices' own shapes (they size the index type)

    def index_lines(self, off: str, var: str) -> list[str]:
        """C++ lines that leave the wrapped index at `off` of the index param in `var`."""
        return [f"long long {var} = (long long)p{self.index}[{off}];", f"if ({var} < 0) {var} += {self.n};"]

    def offset(self, rest: str, var: str, it: str) -> str:
        """The table offset of an element whose rest offset is `rest` and wrapped index `var`."""
        step = f"({it}){var}" if self.stride == 1 else f"({it}){var} * {self.stride}"
        return step if rest == "0" else f"{rest} + {step}"


def gather_views(
    shapes: Sequence[Shape],
    gathers: Sequence[tuple[int, int]],
    nout: int,
    row_axes: Sequence[int] = (),
    rank: int | None = None,
) -> tuple[list[Shape], dict[int, GatherLoad]]:
    """`shapes` (kernel params: inputs, the gathers' indices, outputs) with each gathered table and
    its indices replaced by views over the gather's output lens, and the loads by table param.
    `row_axes`: a reduction's reduced axes (of `rank` axes), where the indices must not vary
    (their view has lens 1 there: one index a row, read with the row's base offset)."""
    out = list(shapes)
    first = len(shapes) - nout - len(gathers)
    loads: dict[int, GatherLoad] = {}
    for g, (k, axis) in enumerate(gathers):
        j = first + g
        table, idx = shapes[k], shapes[j]
        if k >= first or not 0 <= axis < table.ndim:
            raise CodegenUnsupported(f"fused gather on param {k} along axis {axis}")
        r = idx.ndim
        lens = table.lens[:axis] + idx.lens + table.lens[axis + 1 :]
        if rank is not None and len(lens) != rank:  # a lower-rank input the body broadcasts
            raise CodegenUnsupported("a fused gather of another rank than the reduction")
        if any(axis <= d < axis + r and lens[d] != 1 for d in row_axes):
            raise CodegenUnsupported("a fused gather's indices vary along the reduced axes")
        rest = table.strides[:axis] + (0,) * r + table.strides[axis + 1 :]
        at = (0,) * axis + idx.strides + (0,) * (table.ndim - axis - 1)
        idx_lens = tuple(1 if d in row_axes else n for d, n in enumerate(lens))
        out[k] = Shape(table.type, lens, rest)
        out[j] = Shape(idx.type, idx_lens, at)
        loads[k] = GatherLoad(k, j, table.lens[axis], table.strides[axis], (table, idx))
    return out, loads


def real_shapes(loads: dict[int, GatherLoad]) -> list[Shape]:
    """The tables' and indices' own shapes, for `index_type` (a view spans less than its table)."""
    return [s for ld in loads.values() for s in ld.real]
