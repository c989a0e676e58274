"""The op library. Importing this package registers every op spec (one module per family)."""

from . import builtin, fused, nn, pointwise, reduce, views  # noqa: F401  (registration side effects)
from . import control, fusion, quant  # noqa: F401  (ops the fusion, dynamic-shape and quantization passes make)
