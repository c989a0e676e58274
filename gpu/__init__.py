"""migx_explore.gpu: the GPU target (pipelines, lowering, kernels, runtimes, executor, timing).

Importing this package needs no GPU stack; runtimes (cuda-bindings, hip-python) load lazily and
say clearly what is missing when they cannot.
"""
