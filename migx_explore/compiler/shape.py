"""Shapes: element type, lens and strides (row-major by default; stride 0 marks a broadcast axis).

A shape is an immutable value. Dynamic shapes carry a `DynDim` range per axis (their `lens` hold the
maxima, so buffers can be sized for the worst case); tuple shapes hold sub-shapes (multi-output
fused ops).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from . import dtypes
from .errors import ShapeError

# numpy's limit on an array's rank (NPY_MAXDIMS): a higher rank could never be evaluated
MAX_RANK = 64


class RankError(ShapeError, ValueError):
    """A shape of more than MAX_RANK dims (a ValueError too, as the other malformed-shape errors)."""


@dataclass(frozen=True)
class DynDim:
    """One dynamic axis: a range [min, max] plus optional optimal sizes."""

    min: int
    max: int
    optimals: tuple[int, ...] = ()

    def __post_init__(self):
        if self.min < 0 or self.max < self.min:
            raise ValueError(f"bad dynamic dimension range [{self.min}..{self.max}]")

    @property
    def is_fixed(self) -> bool:
        return self.min == self.max

    def __str__(self) -> str:
        if self.is_fixed:
            return str(self.min)
        opt = (":" + ",".join(map(str, self.optimals))) if self.optimals else ""
        return f"[{self.min}..{self.max}{opt}]"


def standard_strides(lens: Sequence[int]) -> tuple[int, ...]:
    strides = [0] * len(lens)
    acc = 1
    for i in range(len(lens) - 1, -1, -1):
        strides[i] = acc
        acc *= max(int(lens[i]), 1)
    return tuple(strides)


@dataclass(frozen=True)
class Shape:
    type: str
    lens: tuple[int, ...]
    strides: tuple[int, ...] = field(default=())
    dyn_dims: tuple[DynDim, ...] | None = None
    sub_shapes: tuple[Shape, ...] | None = None

    def __post_init__(self):
        if self.type == "tuple":
            if self.sub_shapes is None:
                raise ValueError("a tuple shape needs sub_shapes")
            return
        dtypes.dtype(self.type)  # validates the name
        lens = tuple(int(x) for x in self.lens)
        object.__setattr__(self, "lens", lens)
        if any(x < 0 for x in lens):
            raise ValueError(f"negative dimension in {lens}")
        if len(lens) > MAX_RANK:
            raise RankError(f"rank {len(lens)} is more than the {MAX_RANK} dims migx-explore (and numpy) supports")
        strides = tuple(int(x) for x in self.strides) if self.strides else standard_strides(lens)
        if len(strides) != len(lens):
            raise ValueError(f"lens {lens} and strides {strides} differ in rank")
        object.__setattr__(self, "strides", strides)

    # ---- constructors -------------------------------------------------------------------------
    @staticmethod
    def of(type: str, lens: Iterable[int], strides: Iterable[int] | None = None) -> Shape:
        return Shape(dtypes.dtype(type).name, tuple(lens), tuple(strides) if strides is not None else ())

    @staticmethod
    def scalar(type: str) -> Shape:
        """MIGraphX's scalar: lens {1}, strides {0}."""
        return Shape(dtypes.dtype(type).name, (1,), (0,))

    @staticmethod
    def dynamic(type: str, dims: Sequence[DynDim | int | tuple[int, int]]) -> Shape:
        dd = []
        for d in dims:
            if isinstance(d, DynDim):
                dd.append(d)
            elif isinstance(d, int):
                dd.append(DynDim(d, d))
            else:
                dd.append(DynDim(int(d[0]), int(d[1])))
        lens = tuple(d.max for d in dd)
        return Shape(dtypes.dtype(type).name, lens, (), tuple(dd))

    @staticmethod
    def tuple_of(subs: Sequence[Shape]) -> Shape:
        return Shape("tuple", (), (), None, tuple(subs))

    @staticmethod
    def from_permutation(type: str, lens: Sequence[int], perm: Sequence[int]) -> Shape:
        """Lens in logical order, laid out in memory in `perm` order (perm[0] outermost)."""
        plens = [lens[p] for p in perm]
        pstr = standard_strides(plens)
        strides = [0] * len(lens)
        for i, p in enumerate(perm):
            strides[p] = pstr[i]
        return Shape.of(type, lens, strides)

    # ---- queries --------------------------------------------------------------------------------
    @property
    def dtype(self) -> dtypes.DType:
        return dtypes.dtype(self.type)

    @property
    def ndim(self) -> int:
        return len(self.lens)

    @property
    def dynamic_shape(self) -> bool:
        return self.dyn_dims is not None and not all(d.is_fixed for d in self.dyn_dims)

    @property
    def is_tuple(self) -> bool:
        return self.type == "tuple"

    def elements(self) -> int:
        return math.prod(self.lens) if self.lens else 1

    def element_space(self) -> int:
        if self.is_tuple:
            return 0
        if any(n == 0 for n in self.lens):
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.lens, self.strides))

    def bytes(self) -> int:
        if self.is_tuple:
            return sum(s.bytes() for s in self.sub_shapes)
        return self.element_space() * self.dtype.size

    def broadcasted(self) -> bool:
        # Asked of every operand by shape rules, matchers and the importer: computed once per
        # shape (frozen, so the answer cannot change; __dict__ bypasses the frozen __setattr__
        # and is not a field, so equality and hashing ignore it).
        known = self.__dict__.get("_broadcasted")
        if known is None:
            known = self.__dict__["_broadcasted"] = any(s == 0 and n > 1 for n, s in zip(self.lens, self.strides))
        return known

    def scalar_shape(self) -> bool:
        return not self.is_tuple and all(s == 0 for s in self.strides)

    def packed(self) -> bool:
        known = self.__dict__.get("_packed")  # computed once, as broadcasted() (asked per operand)
        if known is None:
            known = self.__dict__["_packed"] = not self.broadcasted() and self.elements() == self.element_space()
        return known

    def standard(self) -> bool:
        """Packed row-major (strides of size-1 axes are ignored)."""
        if self.is_tuple or self.broadcasted():
            return False
        std = standard_strides(self.lens)
        return all(n == 1 or s == t for n, s, t in zip(self.lens, self.strides, std)) and self.packed()

    def transposed(self) -> bool:
        if self.broadcasted():
            nz = [s for s in self.strides if s != 0]
            return nz != sorted(nz, reverse=True)
        rel = [s for n, s in zip(self.lens, self.strides) if n != 1]
        return rel != sorted(rel, reverse=True)

    def permutation(self) -> tuple[int, ...]:
        """Axes ordered from outermost (largest stride) to innermost; ties keep logical order."""
        return tuple(sorted(range(self.ndim), key=lambda i: (-self.strides[i], i)))

    def with_lens(self, lens: Sequence[int]) -> Shape:
        """Same type and memory order, new lens (packed)."""
        if self.ndim == len(lens) and not self.broadcasted():
            return Shape.from_permutation(self.type, lens, self.permutation())
        return Shape.of(self.type, lens)

    def with_type(self, type: str) -> Shape:
        return Shape(dtypes.dtype(type).name, self.lens, self.strides, self.dyn_dims)

    def as_standard(self) -> Shape:
        return Shape.of(self.type, self.lens)

    # ---- printing -------------------------------------------------------------------------------
    def __str__(self) -> str:
        if self.is_tuple:
            return "tuple_type, {" + ", ".join(f"({s})" for s in self.sub_shapes) + "}"
        t = self.type  # our type names, as the API spells them (the parser also reads MIGraphX's float_type)
        if self.dyn_dims is not None:
            return f"dynamic, {t}, {{{', '.join(str(d) for d in self.dyn_dims)}}}"
        return f"{t}, {{{', '.join(map(str, self.lens))}}}, {{{', '.join(map(str, self.strides))}}}"

    def __repr__(self) -> str:
        return f"Shape({self})"
