"""Kernels that compute each output element independently: fused pointwise bodies, single
elementwise ops, strided copies (contiguous, layout), concat, gather, pad, and GEMM epilogues.

One thread per output element in a grid-stride loop. The linear index is split into
coordinates of the output lens after merging axes that are contiguous in every tensor; each
tensor's offset is then a dot product with its own strides (broadcast axes have stride 0), so
views (transpose, slice, broadcast) need no copies before a kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.ops.common import norm_axes, norm_axis
from migx_explore.compiler.shape import Shape

from .common import (
    CodegenUnsupported,
    KernelSource,
    RequestGenerator,
    collapse,
    compute_type,
    decompose,
    grid_stride_kernel,
    index_type,
    literal,
    memory_order,
    offset_expr,
    output_grid_kernel,
)
from .expr import BodyEmitter, op_expr
from .gather_load import GatherLoad, gather_views, real_shapes
from .pointwise_vec import paired_kernel, vectorizable

Body = Callable[[list[str], list[str]], list[str]]  # (lines, loaded input exprs) -> output exprs
# Half / bfloat16 elementwise kernels take two elements per thread with 32-bit accesses where the
# layout allows (pointwise_vec.py); False: one element per thread everywhere.
VECTORIZE = True


def elementwise(
    name: str,
    shapes: Sequence[Shape],
    writes: Sequence[bool],
    lens: Sequence[int],
    loads: Sequence[int],
    stores: Sequence[int],
    body: Body,
    gathers: dict[int, GatherLoad] | None = None,
) -> KernelSource:
    """A grid-stride kernel over `lens`: load params `loads` (in compute type), run `body`, store
    its results into params `stores`. Every listed param must have lens `lens`. `gathers`: params
    read through a fused gather's indices (gather_load.gather_views made their views)."""
    gathers = gathers or {}
    n = 1
    for x in lens:
        n *= x
    if n == 0:
        raise CodegenUnsupported("empty output")
    used = sorted(set(loads) | set(stores) | {g.index for g in gathers.values()})
    # the walk follows the (first) output's memory order: coalesced stores for any layout
    order = memory_order(shapes[stores[0]]) if stores and not gathers else list(range(len(lens)))
    lens = [lens[d] for d in order]
    clens, cstrides = collapse(lens, [[shapes[k].strides[d] for d in order] for k in used])
    strides = dict(zip(used, cstrides))
    it = index_type(list(shapes) + real_shapes(gathers))
    lines = decompose("i", clens, it)
    coords = [f"c{d}" for d in range(len(clens))]
    loaded = []
    for k in loads:
        var = f"a{k}"
        off = offset_expr(coords, strides[k])
        g = gathers.get(k)
        if g is not None:
            lines += g.index_lines(offset_expr(coords, strides[g.index]), f"g{k}")
            off = g.offset(off, f"g{k}", it)
        lines.append(f"const {compute_type(shapes[k].type)} {var} = migx::load(p{k}, {off});")
        loaded.append(var)
    results = body(lines, loaded)
    for k, expr in zip(stores, results):
        lines.append(f"migx::store(p{k}, {offset_expr(coords, strides[k])}, {expr});")
    if VECTORIZE and vectorizable(shapes, clens, strides, gathers):
        return paired_kernel(name, shapes, writes, it, n, clens, strides, loads, stores, body, lines, gathers)
    return grid_stride_kernel(name, shapes, writes, it, n, lines)


def _body_from_module(module: Module, types: Sequence[str]) -> Body:
    def body(lines: list[str], loaded: list[str]) -> list[str]:
        em = BodyEmitter()
        outs = em.run(module, loaded, types)
        lines.extend(em.lines)
        return [e for e, _ in outs]

    return body


def module_label(module: Module, limit: int = 3) -> str:
    names = [i.name for i in module if not i.is_builtin()]
    uniq = list(dict.fromkeys(names))
    return "_".join(uniq[:limit]) + ("_etc" if len(uniq) > limit else "") or "copy"


def pointwise_kernel(
    inner: Op, shapes: Sequence[Shape], nout: int, module: Module | None, gathers: Sequence[tuple[int, int]] = ()
) -> KernelSource:
    """`pointwise` with its submodule, or a single elementwise op (add, convert, contiguous, ...);
    `gathers`: (input, axis) of the inputs read through fused gathers (their indices follow the
    inputs)."""
    nin = len(shapes) - nout
    shapes, loads = gather_views(shapes, gathers, nout)
    nown = nin - len(gathers)
    writes = [False] * nin + [True] * nout
    lens = shapes[-1].lens
    types = [s.type for s in shapes[:nown]]
    if module is not None:
        body = _body_from_module(module, types)
        label = module_label(module)
    else:
        out_type = shapes[-1].type

        def body(lines, loaded):
            return [op_expr(inner, loaded, types, out_type)]

        label = inner.name
    own, stores = list(range(nown)), list(range(nin, nin + nout))
    return elementwise(label, shapes, writes, lens, own, stores, body, loads)


def epilogue_kernel(module: Module, shapes: Sequence[Shape]) -> KernelSource:
    """In-place epilogue after a BLAS call: params (out, extras...); x0 is read from out."""
    out = shapes[0]
    types = [out.type] + [s.type for s in shapes[1:]]
    writes = [True] + [False] * (len(shapes) - 1)
    return elementwise(
        "epilogue_" + module_label(module),
        shapes,
        writes,
        out.lens,
        list(range(len(shapes))),
        [0],
        _body_from_module(module, types),
    )


# --- kernels whose inputs have other lens than the output ---------------------------------------
def _lookup_kernel(name: str, shapes: Sequence[Shape], load: Callable[[list[str], list[str]], str]) -> KernelSource:
    """Output = load(lines, coords) at every output position (params: inputs..., out)."""
    out = shapes[-1]

    def lines_fn(coords: list[str], it: str) -> list[str]:
        lines: list[str] = []
        expr = load(lines, coords)
        lines.append(f"migx::store(p{len(shapes) - 1}, {offset_expr(coords, out.strides)}, {expr});")
        return lines

    return output_grid_kernel(name, shapes, lines_fn)


def concat_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    parts = shapes[:-1]
    axis = op["axis"]
    ct = compute_type(shapes[-1].type)

    def load(lines, coords):
        lines.append(f"{ct} v;")
        start = 0
        for k, s in enumerate(parts):
            end = start + s.lens[axis]
            cs = [c if d != axis else f"({c} - {start})" for d, c in enumerate(coords)]
            cond = "" if k == len(parts) - 1 else f"if ({coords[axis]} < {end}) "
            prefix = "" if k == 0 else "else "
            lines.append(f"{prefix}{cond}v = migx::load(p{k}, {offset_expr(cs, s.strides)});")
            start = end
        return "v"

    return _lookup_kernel("concat", shapes, load)


def gather_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    data, ind = shapes[0], shapes[1]
    axis = op["axis"]
    n_axis = data.lens[axis]

    def load(lines, coords):
        ic = coords[axis : axis + ind.ndim]
        lines.append(f"long long j = (long long)p1[{offset_expr(ic, ind.strides) if ind.ndim else '0'}];")
        lines.append(f"if (j < 0) j += {n_axis};")
        dc = coords[:axis] + ["j"] + coords[axis + ind.ndim :]
        return f"migx::load(p0, {offset_expr(dc, data.strides)})"

    return _lookup_kernel("gather", shapes, load)


def append_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    """concat_past_present: each element of `new` (p0) is stored into the cache (p2, updated in
    place) at its own coordinates, shifted by the runtime past length (p1[0]) along `axis`. Only
    the new entries move; the past stays where it is."""
    new, _, cache = shapes
    axis = op["axis"]
    n = new.elements()
    if n == 0:
        raise CodegenUnsupported("nothing to append")
    it = "long long"
    lines = decompose("i", new.lens, it, "c")
    coords = [f"c{d}" for d in range(new.ndim)]
    dst = [f"({c} + p)" if d == axis else c for d, c in enumerate(coords)]
    room = cache.lens[axis] - new.lens[axis]
    src, dst_at = offset_expr(coords, new.strides), offset_expr(dst, cache.strides)
    lines += [
        f"const {it} p = (long long)p1[0];",
        f"if (p < 0 || p > {room}) continue;  // no room (or an unset length, e.g. a warm-up run)",
        f"migx::store(p2, {dst_at}, migx::load(p0, {src}));",
    ]
    return grid_stride_kernel("concat_past_present", shapes, [False, False, True], it, n, lines)


def pad_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    x = shapes[0]
    nd = x.ndim
    pads = op["pads"]
    mode = op["mode"]
    ct = compute_type(x.type)

    def load(lines, coords):
        src, inside = [], []
        for d in range(nd):
            n, pb = x.lens[d], pads[d]
            v = f"s{d}"
            lines.append(f"long long {v} = (long long){coords[d]} - {pb};")
            if mode == "constant":
                inside.append(f"{v} >= 0 && {v} < {n}")
            elif mode == "edge":
                lines.append(f"{v} = {v} < 0 ? 0 : ({v} >= {n} ? {n - 1} : {v});")
            elif mode == "reflect":
                # Reflection repeats with period 2n - 2 when a pad is wider than the dim (numpy's,
                # onnx.reference's and MIGraphX's reading); a dim of 1 reflects onto itself.
                if n == 1:
                    lines.append(f"{v} = 0;")
                else:
                    period = 2 * n - 2
                    lines.append(f"if ({v} < 0) {v} = -{v}; {v} %= {period}; if ({v} >= {n}) {v} = {period} - {v};")
            elif mode == "wrap":
                lines.append(f"{v} = (({v} % {n}) + {n}) % {n};")
            else:
                raise CodegenUnsupported(f"pad mode {mode}")
            src.append(v)
        value = f"migx::load(p0, {offset_expr(src, x.strides)})"
        if mode == "constant" and inside:
            return f"(({' && '.join(inside)}) ? {value} : {literal(op['value'], x.type)})"
        return value

    if ct is None:  # pragma: no cover - every type maps
        raise CodegenUnsupported(x.type)
    return _lookup_kernel("pad", shapes, load)


def reverse_kernel(op: Op, shapes: Sequence[Shape]) -> KernelSource:
    x = shapes[0]
    axes = set(norm_axes(op["axes"], x.ndim, "reverse"))

    def load(lines, coords):
        src = [f"({x.lens[d] - 1} - {c})" if d in axes else c for d, c in enumerate(coords)]
        return f"migx::load(p0, {offset_expr(src, x.strides)})"

    return _lookup_kernel("reverse", shapes, load)


def fused_concat_kernel(op: Op, shapes: Sequence[Shape], mods: Sequence[Module], nout: int = 1) -> KernelSource:
    """Pieces computed by their pointwise modules straight into the concat position, then the
    post module (extras..., concat value) at every output element. A post module returning
    several values (the concat and its convert, fuse_concat) writes one output each."""
    outs = list(shapes[len(shapes) - nout :])
    out = outs[0]
    axis = norm_axis(op["axis"], out.ndim, "fused_concat")
    pieces, post = list(mods[:-1]), mods[-1]
    groups, k = [], 0
    for m in pieces:
        n = len(m.params())
        groups.append(list(range(k, k + n)))
        k += n
    extras = list(range(k, len(shapes) - nout))
    cat_t = pieces[0].output_shapes()[0].type

    def body(lines, coords):
        lines.append(f"{compute_type(cat_t)} v;")
        start = 0
        for j, (m, idx) in enumerate(zip(pieces, groups)):
            n_axis = shapes[idx[0]].lens[axis]
            cs = [c if d != axis else f"({c} - {start})" for d, c in enumerate(coords)]
            cond = "" if j == len(pieces) - 1 else f"if ({coords[axis]} < {start + n_axis}) "
            lines.append(f"{'else ' if j else ''}{cond}{{")
            loaded = [f"migx::load(p{i}, {offset_expr(cs, shapes[i].strides)})" for i in idx]
            em = BodyEmitter(f"c{j}_")
            res = em.run(m, loaded, [shapes[i].type for i in idx])
            lines.extend("    " + x for x in em.lines)
            lines.append(f"    v = {res[0][0]};")
            lines.append("}")
            start += n_axis
        loaded = [f"migx::load(p{i}, {offset_expr(coords, shapes[i].strides)})" for i in extras]
        em = BodyEmitter("post_")
        res = em.run(post, loaded + ["v"], [shapes[i].type for i in extras] + [cat_t])
        lines.extend(em.lines)
        return [r[0] for r in res]

    if nout == 1:
        return _lookup_kernel("fused_concat", shapes, lambda lines, coords: body(lines, coords)[0])
    if any(list(o.lens) != list(out.lens) for o in outs) or len(post.output_shapes()) != nout:
        raise CodegenUnsupported("fused_concat: outputs of different sizes")
    n = out.elements()
    if n == 0:
        raise CodegenUnsupported("empty output")
    it = index_type(shapes)
    lines = decompose("i", out.lens, it, "o")
    coords = [f"o{d}" for d in range(out.ndim)]
    values = body(lines, coords)
    first = len(shapes) - nout
    lines += [f"migx::store(p{first + q}, {offset_expr(coords, o.strides)}, {values[q]});" for q, o in enumerate(outs)]
    return grid_stride_kernel("fused_concat", shapes, [False] * first + [True] * nout, it, n, lines)


GENERATORS: dict[str, RequestGenerator] = {
    "pointwise": lambda r: pointwise_kernel(r.inner, r.shapes, r.nout, r.module, r.gathers),
    "concat": lambda r: concat_kernel(r.inner, r.shapes),
    "gather": lambda r: gather_kernel(r.inner, r.shapes),
    "pad": lambda r: pad_kernel(r.inner, r.shapes),
    "reverse": lambda r: reverse_kernel(r.inner, r.shapes),
    "fused_concat": lambda r: fused_concat_kernel(r.inner, r.shapes, r.modules, r.nout),
    "concat_past_present": lambda r: append_kernel(r.inner, r.shapes),
}
