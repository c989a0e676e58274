# ruff: noqa: E501 -- the log lines are MIGraphX text as printed, one instruction a line
"""A develop-2026 MIGRAPHX_TRACE_COMPILE log of the built-in mlp model, written by hand from the format
notes (migraphx-trace-format.md): driver banner and logger lines with ANSI colours, debug symbols,
`out_dyn_dims={}`, debug-build `Validate` lines, MIGRAPHX_TIME_PASSES lines, a nested
fuse_pointwise that makes `main:pointwise*` modules the program print shows only afterwards,
another thread's line, and a lowered program of `gpu::code_object` kernels and `hip::` ops."""

from __future__ import annotations

import re

F = "float_type"


def S(*lens):
    st = []
    acc = 1
    for n in reversed(lens):
        st.insert(0, acc)
        acc *= n
    return f"{F}, {{{', '.join(map(str, lens))}}}, {{{', '.join(map(str, st))}}}"


INPUT = [
    f"x = @param:x -> {S(1, 784)}",
    f"@1 = @literal{{ ... }} -> {S(256, 784)} # fc1.weight",
    f"@2 = @literal{{ ... }} -> {S(256)} # fc1.bias",
    f"@3 = @literal{{ ... }} -> {S(128, 256)} # fc2.weight",
    f"@4 = @literal{{ ... }} -> {S(128)} # fc2.bias",
    f"@5 = @literal{{ ... }} -> {S(10, 128)} # fc3.weight",
    f"@6 = @literal{{0.0104896, 0.0938749, -0.0373855, -0.0208219, 0.0819869, 0.116861, 0.0642712, -0.117081, -0.0295331, -0.0421509}} -> {S(10)} # fc3.bias",
    f"@7 = transpose[permutation={{1, 0}}](@1) -> {F}, {{784, 256}}, {{1, 784}} # /fc1/Gemm",
    f"@8 = dot(x,@7) -> {S(1, 256)} # /fc1/Gemm",
    f"@9 = multibroadcast[out_lens={{1, 256}},out_dyn_dims={{}}](@2) -> {F}, {{1, 256}}, {{0, 1}} # /fc1/Gemm",
    f"@10 = add(@8,@9) -> {S(1, 256)} # /fc1/Gemm",
    f"@11 = relu(@10) -> {S(1, 256)} # /act1/Relu",
    f"@12 = transpose[permutation={{1, 0}}](@3) -> {F}, {{256, 128}}, {{1, 256}} # /fc2/Gemm",
    f"@13 = dot(@11,@12) -> {S(1, 128)} # /fc2/Gemm",
    f"@14 = multibroadcast[out_lens={{1, 128}},out_dyn_dims={{}}](@4) -> {F}, {{1, 128}}, {{0, 1}} # /fc2/Gemm",
    f"@15 = add(@13,@14) -> {S(1, 128)} # /fc2/Gemm",
    f"@16 = relu(@15) -> {S(1, 128)} # /act2/Relu",
    f"@17 = transpose[permutation={{1, 0}}](@5) -> {F}, {{128, 10}}, {{1, 128}} # /fc3/Gemm",
    f"@18 = dot(@16,@17) -> {S(1, 10)} # /fc3/Gemm",
    f"@19 = multibroadcast[out_lens={{1, 10}},out_dyn_dims={{}}](@6) -> {F}, {{1, 10}}, {{0, 1}} # /fc3/Gemm",
    f"@20 = add(@18,@19) -> {S(1, 10)} # /fc3/Gemm",
    f"@21 = logsoftmax[axis=1](@20) -> {S(1, 10)} # /LogSoftmax",
    "@22 = @return(@21) # @output_0:out",
]
# after fuse_pointwise: add+relu fused into pointwise modules
FUSED_MAIN = INPUT[:10] + [
    f"@10 = pointwise(@8,@9), [main:pointwise0] -> {S(1, 256)} # /act1/Relu, /fc1/Gemm",
    f"@11 = transpose[permutation={{1, 0}}](@3) -> {F}, {{256, 128}}, {{1, 256}} # /fc2/Gemm",
    f"@12 = dot(@10,@11) -> {S(1, 128)} # /fc2/Gemm",
    f"@13 = multibroadcast[out_lens={{1, 128}},out_dyn_dims={{}}](@4) -> {F}, {{1, 128}}, {{0, 1}} # /fc2/Gemm",
    f"@14 = pointwise(@12,@13), [main:pointwise1] -> {S(1, 128)} # /act2/Relu, /fc2/Gemm",
    f"@15 = transpose[permutation={{1, 0}}](@5) -> {F}, {{128, 10}}, {{1, 128}} # /fc3/Gemm",
    f"@16 = dot(@14,@15) -> {S(1, 10)} # /fc3/Gemm",
    f"@17 = multibroadcast[out_lens={{1, 10}},out_dyn_dims={{}}](@6) -> {F}, {{1, 10}}, {{0, 1}} # /fc3/Gemm",
    f"@18 = add(@16,@17) -> {S(1, 10)} # /fc3/Gemm",
    f"@19 = logsoftmax[axis=1](@18) -> {S(1, 10)} # /LogSoftmax",
    "@20 = @return(@19) # @output_0:out",
]


def PW(lens: tuple[int, ...]) -> list[str]:
    return [
        f"x0 = @param:x0 -> {S(*lens)}",
        f"x1 = @param:x1 -> {S(*lens)}",
        f"@2 = add(x0,x1) -> {S(*lens)}",
        f"@3 = relu(@2) -> {S(*lens)}",
        "@4 = @return(@3)",
    ]


def program(main: list[str], subs: list) -> list[str]:
    """A program print: `module:` headers, submodule names and their inputs prefixed."""
    out = ['module: "main"'] + main + [""]
    for name, body in subs:
        out.append(f'module: "{name}"')
        names = {ln.split(" = ")[0] for ln in body}
        out += [
            re.sub(
                r"(?<![\w:@#])(@\d+|x\d+)(?![\w])",
                lambda m: f"{name}:{m.group(1)}" if m.group(1) in names else m.group(1),
                ln.split(" = ", 1)[0],
            )
            + " = "
            + re.sub(r"(?<=[(,])(@\d+|x\d+)(?=[),])", lambda m: f"{name}:{m.group(1)}", ln.split(" = ", 1)[1])
            for ln in body
        ]
        out.append("")
    return out


def log() -> str:
    out = [
        "Running [ MIGraphX Version: 2.16.0.20260801-12-ab12cd3 ]: migraphx-driver compile mlp.onnx --gpu --debug-symbols",
        "\x1b[32m2026-08-10 09:00:00.000001 [INFO] [src/driver/main.cpp:449] Reading: mlp.onnx\x1b[0m",
        "\x1b[32m2026-08-10 09:00:00.000101 [INFO] [src/driver/main.cpp:763] Compiling ...\x1b[0m",
    ]
    out += program(INPUT, []) + [""]
    cur_main, subs = INPUT, []
    for name in [
        "split_single_dyn_dim",
        "dead_code_elimination",
        "normalize_ops",
        "dead_code_elimination",
        "eliminate_identity",
    ]:
        out += [f"Pass: {name}", *cur_main, "", "Validate ... ok", ""] + [f"{name}: 0.05ms"]
        out += [f"Pass: {name}"] + program(cur_main, subs) + [""]
    # fuse_pointwise_reduce with nested fuse_pointwise
    out += ["Pass: fuse_pointwise", *FUSED_MAIN, "", "fuse_pointwise: 1.2ms"]
    subs = [("main:pointwise0", PW((1, 256))), ("main:pointwise1", PW((1, 128)))]
    out += ["Pass: fuse_pointwise_reduce", *FUSED_MAIN, "", "fuse_pointwise_reduce: 1.5ms"]
    out += ["Pass: fuse_pointwise_reduce"] + program(FUSED_MAIN, subs) + [""]
    out += ["compiling kernel mlir_dot from thread 3"]  # another thread
    low = [
        "@0 = check_context::migraphx::gpu::context -> float_type, {}, {}",
        "@1 = hip::hip_allocate_memory[shape=int8_type, {2048}, {1},id=main:scratch] -> int8_type, {2048}, {1}",
        f"x = @param:x -> {S(1, 784)}",
        f"@3 = hip::hip_copy_literal[id=main:@literal:0] -> {F}, {{784, 256}}, {{1, 784}} # fc1.weight",
        f"@4 = load[offset=0,end=1024](@1) -> {S(1, 256)}",
        f"@5 = gpu::code_object[code_object=9000,symbol_name=mlir_dot_add_relu,global=256,local=64,output_arg=2,](x,@3,@4) -> {S(1, 256)} # /act1/Relu, /fc1/Gemm",
        f"@6 = gpu::code_object[code_object=9000,symbol_name=mlir_dot_add_relu,global=128,local=64,output_arg=1,](@5,@4) -> {S(1, 128)} # /act2/Relu, /fc2/Gemm",
        f"@7 = gpu::code_object[code_object=9000,symbol_name=mlir_dot_add,global=64,local=64,output_arg=1,](@6,@4) -> {S(1, 10)} # /fc3/Gemm",
        f"main:#output_0 = @param:main:#output_0 -> {S(1, 10)}",
        f"@9 = gpu::code_object[code_object=4000,symbol_name=logsoftmax_kernel,global=64,local=64,output_arg=1,](@7,main:#output_0) -> {S(1, 10)} # /LogSoftmax",
        "@10 = @return(@9) # @output_0:out",
    ]
    out += ["Pass: gpu::lowering", *low, "", "gpu::lowering: 3.1ms"]
    out += ["Pass: gpu::lowering"] + program(low, subs) + [""]
    out += ["\x1b[32m2026-08-10 09:00:01.5 [INFO] [src/driver/main.cpp:767] Compilation time: 1500ms\x1b[0m"]
    return "\n".join(out) + "\n"
