"""Integer bit ops beyond MIGraphX's bitwise_and (ONNX BitwiseOr/Xor/Not, BitShift). Pointwise,
so they fuse like any other elementwise op."""

from __future__ import annotations

import numpy as np

from .pointwise import binary, unary

binary("bitwise_or", np.bitwise_or, traits={"commutative"})
binary("bitwise_xor", np.bitwise_xor, traits={"commutative"})
unary("bitwise_not", np.invert)
# Shifts by >= the bit width give 0 in ONNX; numpy's result there is platform-defined, so mask.
binary(
    "shift_left",
    lambda a, b: np.where(
        b < a.dtype.itemsize * 8, np.left_shift(a, np.minimum(b, a.dtype.itemsize * 8 - 1).astype(a.dtype)), 0
    ).astype(a.dtype),
)
# An arithmetic right shift by >= the width leaves the sign (0 or -1): shifting by width-1 gives it.
binary(
    "shift_right",
    lambda a, b: (
        np.right_shift(a, np.minimum(b, a.dtype.itemsize * 8 - 1).astype(a.dtype))
        if a.dtype.kind == "i"
        else np.where(
            b < a.dtype.itemsize * 8, np.right_shift(a, np.minimum(b, a.dtype.itemsize * 8 - 1).astype(a.dtype)), 0
        ).astype(a.dtype)
    ),
)
