"""The op library. Importing this package registers every op spec (one module per family).

bitwise, data, nn_extra, resize: ops the ONNX importer maps onto. control, fusion, quant: ops the
fusion, dynamic-shape and quantization passes make."""

from . import (  # noqa: F401  (registration side effects)
    bitwise,
    builtin,
    control,
    data,
    dynamic,
    fused,
    fusion,
    nn,
    nn_extra,
    pointwise,
    quant,
    reduce,
    resize,
    views,
)
