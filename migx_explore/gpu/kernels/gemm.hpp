// gemm.hpp: the tiled GEMM for quant_dot and the BLAS fallback, one 16x16 output tile a block
// (gpu/codegen/gemm.py fills the ${...} slots; a list slot alone on its line takes lines; see
// gpu/codegen/templates.py). `offsets` sets oa, ob and oc, the batch entry's offsets.
// @template kernel

MIGX_GLOBAL void ${name}_kernel(${params}) {
    migx::kernel_entry();
    __shared__ ${acc} sa[${tile}][${pitch}];
    __shared__ ${acc} sb[${tile}][${pitch}];
    const int tx = threadIdx.x % ${tile}, ty = threadIdx.x / ${tile};
    ${it} blk = blockIdx.x;
    const ${it} tn = blk % ${tiles_n}; blk /= ${tiles_n};
    const ${it} tm = blk % ${tiles_m}; blk /= ${tiles_m};
    ${offsets}
    const ${it} row = tm * ${tile} + ty, col = tn * ${tile} + tx;
    ${acc} acc = 0;
    for (${it} k0 = 0; k0 < ${k}; k0 += ${tile}) {
        const ${it} ak = k0 + tx, bk = k0 + ty;
        sa[ty][tx] = (row < ${m} && ak < ${k}) ? (${acc})migx::load(p0, oa + row * ${a_row} + ak * ${a_col}) : (${acc})0;
        sb[ty][tx] = (bk < ${k} && col < ${n}) ? (${acc})migx::load(p1, ob + bk * ${b_row} + col * ${b_col}) : (${acc})0;
        __syncthreads();
    #pragma unroll
        for (int kk = 0; kk < ${tile}; ++kk) acc += sa[ty][kk] * sb[kk][tx];
        __syncthreads();
    }
    if (row < ${m} && col < ${n}) migx::store(p2, oc + row * ${c_row} + col * ${c_col}, acc${scale});
}
