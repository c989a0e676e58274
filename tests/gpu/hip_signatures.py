"""hip-python call signatures, read with inspect.signature from hip-python 10.0.0.0.1.2 and
rocm-bindings-libraries 10.0.0.0.1.2 (rocm.bindings.{hip,hiprtc,hipblas}); the 6.x/7.x differences
are from docs/reference gpu-runtime.md §1.3 (hip-python 7.2.2 / 6.4.4 wheels). The fake bindings in
fake_hip.py check every call the HIP backend makes against these."""

SIGNATURES_10 = {
    # hip
    'hipDeviceSynchronize': (),
    'hipEventCreate': (),
    'hipEventDestroy': ('event',),
    'hipEventElapsedTime': ('start', 'stop'),
    'hipEventRecord': ('event', 'stream'),
    'hipEventSynchronize': ('event',),
    'hipFree': ('ptr',),
    'hipGetDeviceCount': (),
    'hipGetDeviceProperties': ('deviceId',),
    'hipGraphDestroy': ('graph',),
    'hipGraphExecDestroy': ('graphExec',),
    'hipGraphExecUpdate': ('hGraphExec', 'hGraph', 'hErrorNode_out'),
    'hipGraphInstantiateWithFlags': ('graph', 'flags'),
    'hipGraphLaunch': ('graphExec', 'stream'),
    'hipGraphUpload': ('graphExec', 'stream'),
    'hipHostFree': ('ptr',),
    'hipHostMalloc': ('size', 'flags'),
    'hipMalloc': ('size',),
    'hipMemcpyAsync': ('dst', 'src', 'sizeBytes', 'kind', 'stream'),
    'hipModuleGetFunction': ('module', 'kname'),
    'hipModuleLaunchKernel': (
        'f', 'gridDimX', 'gridDimY', 'gridDimZ', 'blockDimX', 'blockDimY', 'blockDimZ', 'sharedMemBytes', 'stream',
        'kernelParams', 'extra',
    ),
    'hipModuleLoadData': ('image',),
    'hipModuleUnload': ('module',),
    'hipSetDevice': ('deviceId',),
    'hipStreamBeginCapture': ('stream', 'mode'),
    'hipStreamCreateWithFlags': ('flags',),
    'hipStreamDestroy': ('stream',),
    'hipStreamEndCapture': ('stream',),
    'hipStreamIsCapturing': ('stream',),
    'hipStreamSynchronize': ('stream',),
    # hiprtc
    'hiprtcCompileProgram': ('prog', 'numOptions', 'options'),
    'hiprtcCreateProgram': ('src', 'name', 'numHeaders', 'headers', 'includeNames'),
    'hiprtcDestroyProgram': ('prog',),
    'hiprtcGetCode': ('prog', 'code'),
    'hiprtcGetCodeSize': ('prog',),
    'hiprtcGetProgramLog': ('prog', 'log'),
    'hiprtcGetProgramLogSize': ('prog',),
    'hiprtcVersion': (),
    # hipblas
    'hipblasCreate': (),
    'hipblasSetStream': ('handle', 'streamId'),
    'hipblasSetWorkspace': ('handle', 'workspace', 'workspaceSizeInBytes'),
    'hipblasGemmStridedBatchedEx': (
        'handle', 'transA', 'transB', 'm', 'n', 'k', 'alpha', 'A', 'aType', 'lda', 'strideA', 'B', 'bType', 'ldb',
        'strideB', 'beta', 'C', 'cType', 'ldc', 'strideC', 'batchCount', 'computeType', 'algo',
    ),
    'hipblasDestroy': ('handle',),
}

# hip-python 6.x / 7.x (`hip.hip`): where the shapes differ from 10.x
SIGNATURES_7 = dict(SIGNATURES_10, hipGetDeviceProperties=("prop", "deviceId"),
                    hipGraphExecUpdate=("hGraphExec", "hGraph"))
