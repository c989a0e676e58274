"""MIGraphX log texts of every period, written from the format notes (migraphx-trace-format.md):
one small compile (a main module with an If over two branch modules) printed as each period's
pass manager and driver printed it.

A program state is {module: [Ins]}; `log(period, states)` prints the compile of those states the
way that period's MIGRAPHX_TRACE_COMPILE did."""

from __future__ import annotations

from dataclasses import dataclass

F23 = "float_type, {2, 3}, {3, 1}"


@dataclass(frozen=True)
class Ins:
    name: str  # unprefixed: @3, x
    op: str  # op text, e.g. add, multibroadcast[out_lens={2, 3},out_dyn_dims={}], @param:x, @literal{ ... }
    inputs: tuple[tuple[str, str], ...] = ()  # (module, name)
    shape: str = F23
    mods: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()


def _main(*body: Ins) -> list[Ins]:
    return list(body)


X = Ins("x", "@param:x")
C = Ins("cond", "@param:cond", shape="bool_type, {1}, {0}")
W = Ins("@2", "@literal{ ... }", symbols=("/enc/w",))


def m(name: str, module: str = "main") -> tuple[str, str]:
    return (module, name)


def states() -> list[tuple[str, dict[str, list[Ins]]]]:
    """(pass that produced it, program state) for a short compile; the first is the input."""
    ifo = Ins("@5", "if", (m("cond"),), f"[{F23}]", ("If_0_if", "If_0_else"), ("/enc/If",))
    branches = {
        "If_0_if": [Ins("@0", "mul", (m("@4"), m("@4"))), Ins("@1", "@return", (m("@0", "If_0_if"),))],
        "If_0_else": [Ins("@0", "sub", (m("@4"), m("@4"))), Ins("@1", "@return", (m("@0", "If_0_else"),))],
    }
    s0 = {
        "main": [
            X,
            C,
            W,
            Ins("@3", "add", (m("x"), m("@2")), symbols=("/enc/layer/Add",)),
            Ins("@4", "identity", (m("@3"),), symbols=("/enc/layer/Identity",)),
            ifo,
            Ins("@6", "get_tuple_elem[index=0]", (m("@5"),)),
            Ins("@7", "relu", (m("@6"),), symbols=("/enc/layer/Relu",)),
            Ins("@8", "@return", (m("@7"),), shape=""),
        ],
        **branches,
    }
    # eliminate_identity: @4 goes, its users read @3
    s1 = {
        "main": [i for i in s0["main"] if i.name != "@4"],
        "If_0_if": [Ins("@0", "mul", (m("@3"), m("@3"))), branches["If_0_if"][1]],
        "If_0_else": [Ins("@0", "sub", (m("@3"), m("@3"))), branches["If_0_else"][1]],
    }
    # simplify_algebra (inside optimize_module) on If_0_if: mul(a, a) stays; on main: add -> add (no change);
    # gpu::lowering: relu and add become kernels
    s2 = {
        "main": [],
        "If_0_if": [Ins("@0", "mul", (m("@5"), m("@5"))), branches["If_0_if"][1]],
        "If_0_else": [Ins("@0", "sub", (m("@5"), m("@5"))), branches["If_0_else"][1]],
    }
    s2["main"] = [
        Ins("@0", "hip::hip_allocate_memory[shape=int8_type, {48}, {1},id=main:scratch]", shape="int8_type, {48}, {1}"),
        X,
        C,
        W,
        Ins("@4", "load[offset=0,end=24]", (m("@0"),)),
        Ins(
            "@5",
            "gpu::code_object[code_object=5000,symbol_name=add_kernel,global=64,local=64,]",
            (m("x"), m("@2"), m("@4")),
            symbols=("/enc/layer/Add",),
        ),
        Ins("@6", "if", (m("cond"),), f"[{F23}]", ("If_0_if", "If_0_else"), ("/enc/If",)),
        Ins("@7", "get_tuple_elem[index=0]", (m("@6"),)),
        Ins(
            "@8",
            "gpu::code_object[code_object=5000,symbol_name=relu_kernel,global=64,local=64,]",
            (m("@7"), m("@4")),
            symbols=("/enc/layer/Relu",),
        ),
        Ins("@9", "@return", (m("@8"),), shape=""),
    ]
    return [("", s0), ("eliminate_identity", s1), ("gpu::lowering", s2)]


def _without_if(body: list[Ins]) -> list[Ins]:
    kept, last = [], None
    for i in body:
        if i.mods or "get_tuple_elem" in i.op:
            continue
        if i.op in ("relu", "@return") or "relu_kernel" in i.op:
            i = Ins(
                i.name,
                i.op,
                ((("main", last),) + i.inputs[1:]) if i.op != "@return" else i.inputs,
                i.shape,
                (),
                i.symbols,
            )
        kept.append(i)
        if i.op != "@return" and not i.op.startswith(("@param", "load", "hip::")):
            last = i.name
    return kept


# ---- printing ------------------------------------------------------------------------------------
PERIODS = ("2018", "rocm4.5", "rocm5.5", "dev2023", "rocm5.6", "rocm6.0", "rocm7.2", "develop2026")


def _name(ins_module: str, name: str, prefix: bool, main_prefix: bool) -> str:
    if ins_module == "main":
        return f"main:{name}" if main_prefix else name
    return f"{ins_module}:{name}" if prefix else name


def print_module(period: str, module: str, body: list[Ins], *, in_program: bool) -> list[str]:
    """One module's lines as `operator<<(module)` (in_program=False) or inside a program print."""
    main_prefix = period in ("rocm4.5", "rocm5.5", "rocm5.6") and in_program
    prefix = in_program and module != "main"
    symbols = period == "develop2026"
    target = period == "rocm6.0"
    out = []
    for i in body:
        name = _name(module, i.name, prefix, main_prefix and module == "main")
        if i.op.startswith("@param"):
            line = f"{name} = {i.op} -> {i.shape}"
        else:
            args = []
            for mod, n in i.inputs:
                if mod != module and not in_program:
                    args.append("?")  # an outer value is not in a standalone module's name map
                else:
                    args.append(_name(mod, n, in_program and mod != "main", main_prefix and mod == "main"))
            line = f"{name} = {i.op}"
            if args:
                line += "(" + ",".join(args) + ")"
            if i.mods:
                line += ", [" + ", ".join(i.mods) + "]"
            if i.shape:
                line += f" -> {i.shape}"
        if target:
            line += ", target_id=0"
        if symbols and i.symbols:
            line += " # " + ", ".join(i.symbols)
        out.append(line)
    return out


def print_program(period: str, state: dict[str, list[Ins]]) -> list[str]:
    out = []
    for module, body in state.items():
        if period != "2018":
            out.append(f'module: "{module}"')
        out += print_module(period, module, body, in_program=True)
        out.append("")
    return out


def _visit(state: dict[str, list[Ins]]) -> list[str]:
    """run_passes' module order: reverse([main] + submodules)."""
    return list(reversed(list(state)))


NESTED = ("simplify_reshapes", "eliminate_convert", "dead_code_elimination", "simplify_algebra")


def log(period: str, steps: list[tuple[str, dict]] | None = None, *, nested: bool = True, times: bool = False) -> str:
    """The whole compile log: driver preamble, input program, every pass (optimize_module with its
    nested passes between the two real changes), in that period's format."""
    steps = steps or states()
    if period == "2018":  # no submodules before 2021: main alone, without the If
        steps = [(n, {"main": _without_if(st["main"])}) for n, st in steps]
    out: list[str] = []
    if period in ("rocm7.2", "develop2026"):
        out.append("Running [ MIGraphX Version: 2.15.0.20250912-17-195-g1afd1b89c ]: migraphx-driver compile m.onnx")
    if period == "rocm7.2":
        out.append("[2026-08-01 10:00:00]")
    if period == "develop2026":
        out.append("\x1b[32m2026-08-01 10:00:00.123456 [INFO] [src/driver/main.cpp:449] Reading: m.onnx\x1b[0m")
    else:
        out.append("Compiling ... ")
        out.append("Reading: m.onnx")
    first = steps[0][1]
    out += print_program(period, first)
    out.append("")  # trace() after the input program
    passes: list[tuple[str, dict, list[tuple[str, dict]]]] = []
    prev = first
    for name, state in steps[1:]:
        passes.append(("normalize_ops", prev, []))
        passes.append((name, state, []))
        if nested and name == "eliminate_identity":
            passes.append(("optimize_module", state, [(n, state) for n in NESTED]))
        prev = state
    for name, state, kids in passes:
        out += _pass(period, name, state, kids, times)
    return "\n".join(out) + "\n"


def _pass(period: str, name: str, state: dict, kids: list, times: bool) -> list[str]:
    out: list[str] = []
    modules = _visit(state) if period not in ("2018",) else ["main"]
    for mod in modules:
        for kid, kstate in kids:
            out += _module_block(period, kid, mod, kstate, times)
        out += _module_block(period, name, mod, state, times)
    if period == "2018":
        return out
    if period != "dev2023":
        out.append(f"Pass: {name}")
    out += print_program(period, state)
    out.append("")
    return out


def _module_block(period: str, name: str, mod: str, state: dict, times: bool) -> list[str]:
    out = []
    if period in ("rocm4.5", "rocm5.5"):
        out.append(f"Module: {mod}, Pass: {name}")
    elif period != "dev2023":
        out.append(f"Pass: {name}")
    if times or period == "dev2023":
        out.append(f"{name}: 0.25ms")
    out += print_module(period, mod, state[mod], in_program=False)
    out.append("")
    if period == "2018":
        out.append("Validate ...0 milliseconds")
    if period == "rocm5.5":
        out.append(f"Pass: {name} completed in (s): 0.000250")
    return out
