// gemm_mma.hpp: the tensor-core GEMM with a fused epilogue (gpu/codegen/gemm_mma.py fills the
// ${...} slots; a list slot on a line of its own takes lines at its indentation; see
// gpu/codegen/templates.py). Sections: the kernel, its two K loops and their pieces.
// @template kernel

MIGX_GLOBAL void ${name}_kernel(${params}) {
    ${entry}
    __shared__ __align__(16) unsigned short as[${stages}][${bm}][${a_pitch}];
    __shared__ __align__(16) unsigned short bs[${stages}][${b_rows}][${b_pitch}];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / ${wn}) * ${wm_span}, wn0 = (warp % ${wn}) * ${wn_span};
    ${head}
    float acc[${fm}][${fn}][4];
    #pragma unroll
    for (int i = 0; i < ${fm}; ++i)
    #pragma unroll
        for (int j = 0; j < ${fn}; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    ${loop}
    auto put = [&](int i, int j, float x) {
        if (i >= ${m} || j >= ${n}) return;
        ${scale}
        ${epilogue}
        migx::store(p${out}, oc0 + ${out_offset}, ${result});
    };
    #pragma unroll
    for (int i = 0; i < ${fm}; ++i)
    #pragma unroll
        for (int j = 0; j < ${fn}; ++j) {
            const int r = row0 + wm0 + i * 16 + g, col = col0 + wn0 + j * 8 + 2 * t;
            put(r, col, acc[i][j][0]); put(r, col + 1, acc[i][j][1]);
            put(r + 8, col, acc[i][j][2]); put(r + 8, col + 1, acc[i][j][3]);
        }
}
// @template compute
#pragma unroll
for (int kk = 0; kk < ${bk}; kk += 16) {
    unsigned af[${fm}][4], bf[${fn}][2];
#pragma unroll
    for (int i = 0; i < ${fm}; ++i) {
        const int r = wm0 + i * 16 + g;
        af[i][0] = *reinterpret_cast<const unsigned*>(&as[buf][r][kk + 2 * t]);
        af[i][1] = *reinterpret_cast<const unsigned*>(&as[buf][r + 8][kk + 2 * t]);
        af[i][2] = *reinterpret_cast<const unsigned*>(&as[buf][r][kk + 2 * t + 8]);
        af[i][3] = *reinterpret_cast<const unsigned*>(&as[buf][r + 8][kk + 2 * t + 8]);
    }
#pragma unroll
    for (int j = 0; j < ${fn}; ++j) {
        ${b_frag}
    }
#pragma unroll
    for (int i = 0; i < ${fm}; ++i)
#pragma unroll
        for (int j = 0; j < ${fn}; ++j) migx::mma_16816<${t}>(acc[i][j], af[i], bf[j]);
}
// @template b_frag_kmajor
migx::load_b_trans(bf[j], &bs[buf][kk][wn0 + j * 8], ${pitch});
// @template b_frag_nmajor
bf[j][0] = *reinterpret_cast<const unsigned*>(&bs[buf][wn0 + j * 8 + g][kk + 2 * t]);
bf[j][1] = *reinterpret_cast<const unsigned*>(&bs[buf][wn0 + j * 8 + g][kk + 2 * t + 8]);
// @template main_loop
{
    int buf = 0;
    ${sa_decl} ${sb_decl}
    {
        const int k0 = 0;
        ${loads}
    }
    ${stores}
    __syncthreads();
    for (int c = 0; c < ${nchunks}; ++c) {
        if (c + 1 < ${nchunks}) {
            const int k0 = (c + 1) * ${bk};
            ${loads}
        }
        ${compute}
        if (c + 1 < ${nchunks}) {
            buf ^= 1;
            ${stores}
            __syncthreads();
        }
    }
}
// @template pipelined
{
${issue_a}
${issue_b}
${start}
for (int c = ${first_chunks}; c < ${last_stage}; ++c) migx::copy_async_commit();
for (int c = 0; c < ${nchunks}; ++c) {
    migx::copy_async_wait<${wait_stages}>();
    __syncthreads();
    const int buf = c % ${stages};
    ${compute}
    if (c + ${last_stage} < ${nchunks}) { issue_a(c + ${last_stage}); issue_b(c + ${last_stage}); }
    migx::copy_async_commit();
}
}
// @template issue
auto ${name} = [&](int c) {
    const int k0 = c * ${bk}, st = c % ${stages};
    {
    const auto* p = ${ptr};
    ${copies}
    }
};
// @template async_copy
    const bool full = row < ${rows_left} && col < ${cols_left};
    if (v < ${vectors}) migx::copy16_async(&${op}s[st][row][col], full ? p + (row * ${row_stride} + col) : p, full);
