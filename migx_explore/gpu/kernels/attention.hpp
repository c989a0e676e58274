// attention.hpp: the scalar (fp32 arithmetic) FlashAttention-style kernel, one warp per query row
// group (gpu/codegen/attention.py fills the ${...} slots; see gpu/codegen/templates.py).
// @template tile_load
for (int e = threadIdx.x; e < MIGX_WARP_SIZE * ${cols}; e += ${threads}) {
            ${idx}
            ${dst}[j * (${cols} + ${pad}) + c] =
                (j0 + j < ${n}) ? (float)migx::load(${ptr}, ${base} + (j0 + j) * ${srow} + c * ${scol}) : 0.0f;
        }
// @template kernel

constexpr int ROWS = ${rows};
constexpr int NWARPS = ${threads} / MIGX_WARP_SIZE;
constexpr int RPW = ROWS / NWARPS;  // rows per warp
constexpr int DVL = (${dv} + MIGX_WARP_SIZE - 1) / MIGX_WARP_SIZE;  // output columns per lane
constexpr int ILP = 4;  // independent accumulators in the Q·K and P·V loops

MIGX_GLOBAL void ${name}_kernel(${params}) {
    migx::kernel_entry();
    __shared__ float q_s[ROWS * ${d}];
    __shared__ float k_s[MIGX_WARP_SIZE * (${d} + 1)];
    __shared__ float v_s[MIGX_WARP_SIZE * ${dv}];
    __shared__ float p_s[ROWS * MIGX_WARP_SIZE];
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
    const int warp = threadIdx.x / MIGX_WARP_SIZE;
    const ${it} bh = blockIdx.x / ${row_blocks};
    const ${it} row0 = (blockIdx.x % ${row_blocks}) * ROWS;
    ${batch_lines}
    const ${it} q_base = ${q_base}, k_base = ${k_base}, v_base = ${v_base};
    for (int e = threadIdx.x; e < ROWS * ${d}; e += ${threads}) {
        const ${it} r = row0 + e / ${d};
        const ${it} off = q_base + r * ${q_row} + (e % ${d}) * ${q_col};
        q_s[e] = r < ${m} ? (float)migx::load(p${q}, off) : 0.0f;
    }
    float m_run[RPW], l_run[RPW], acc[RPW][DVL];
    for (int r = 0; r < RPW; ++r) {
        m_run[r] = -migx::inf_f();
        l_run[r] = 0.0f;
        for (int t = 0; t < DVL; ++t) acc[r][t] = 0.0f;
    }
    for (int j0 = 0; j0 < ${n}; j0 += MIGX_WARP_SIZE) {
        __syncthreads();
        ${k_load}
        ${v_load}
        __syncthreads();
        const ${it} j = j0 + lane;
        float alpha[RPW];
        for (int r = 0; r < RPW; ++r) {
            const int lr = warp * RPW + r;
            const ${it} row = row0 + lr;
            float x = -migx::inf_f();
            if (row < ${m} && j < ${n}) {
                // ILP independent partial sums: a block holds only a few warps (one row each), so
                // a single dependent FMA chain would leave the SM waiting on each step.
                float s4[ILP] = {};
                #pragma unroll
                for (int c = 0; c < ${d}; ++c) s4[c % ILP] += q_s[lr * ${d} + c] * k_s[lane * (${d} + 1) + c];
                float s = s4[0];
                #pragma unroll
                for (int u = 1; u < ILP; ++u) s += s4[u];
                ${score_body}
                x = ${score};
            }
            const float m_new = migx::max_(m_run[r], migx::warp_reduce(x, migx::op_max{}));
            // A row whose keys so far are all masked (-inf) has nothing to rescale yet.
            alpha[r] = m_new == -migx::inf_f() ? 1.0f : expf(m_run[r] - m_new);
            const float p = x == -migx::inf_f() ? 0.0f : expf(x - m_new);
            l_run[r] = l_run[r] * alpha[r] + migx::warp_reduce(p, migx::op_sum{});
            m_run[r] = m_new;
            p_s[lr * MIGX_WARP_SIZE + lane] = p;
        }
        __syncthreads();
        for (int r = 0; r < RPW; ++r) {
            const float* pr = p_s + (warp * RPW + r) * MIGX_WARP_SIZE;
            for (int t = 0; t < DVL; ++t) {
                const int c = lane + t * MIGX_WARP_SIZE;
                if (c < ${dv}) {
                    float a4[ILP] = {};
                    #pragma unroll
                    for (int jj = 0; jj < MIGX_WARP_SIZE; ++jj) a4[jj % ILP] += pr[jj] * v_s[jj * ${dv} + c];
                    float a = acc[r][t] * alpha[r];
                    #pragma unroll
                    for (int u = 0; u < ILP; ++u) a += a4[u];
                    acc[r][t] = a;
                }
            }
        }
    }
    const ${it} o_base = ${o_base};
    for (int r = 0; r < RPW; ++r) {
        const ${it} row = row0 + warp * RPW + r;
        if (row >= ${m}) continue;
        for (int t = 0; t < DVL; ++t) {
            const int c = lane + t * MIGX_WARP_SIZE;
            ${row_comment}
            if (c < ${dv})
                migx::store(p${nout}, o_base + row * ${o_row} + c * ${o_col}, ${row_value});
        }
    }
}
