"""The op library. Importing this package registers every op spec (one module per family).

bitwise, data, detection, nn_extra, resize, rnn: ops the ONNX importer maps onto (rewrite_rnn
unrolls the recurrent ones). control, fusion, quant: ops the
fusion, dynamic-shape and quantization passes make."""

from . import (  # noqa: F401  (registration side effects)
    bitwise,
    builtin,
    control,
    data,
    detection,
    dynamic,
    dynamic_values,
    fused,
    fusion,
    nn,
    nn_extra,
    pointwise,
    quant,
    reduce,
    resize,
    rnn,
    views,
)
