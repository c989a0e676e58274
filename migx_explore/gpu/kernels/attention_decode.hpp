// attention_decode.hpp: the one-query-row (decode step) attention kernel, with the optional KV-cache
// append (gpu/codegen/attention_decode.py fills the ${...} slots; see gpu/codegen/templates.py).
// @template append
const long long P = (long long)p${past}[0];
    // a write that does not fit is dropped (concat_past_present's guard), and then nothing is substituted
    const bool fits = P >= 0 && P <= ${room};
    const ${it} kn_base = ${kn_base}, vn_base = ${vn_base};
    const ${it} ck_base = ${ck_base}, cv_base = ${cv_base};
    // this block's head: the new rows into both caches (the keys below read them from k_new / v_new)
    for (int e = threadIdx.x; fits && e < ${new_elements}; e += ${threads}) {
        const int r = e / ${width}, c = e % ${width};
        if (c < ${d})
            migx::store(p${cache_k}, ck_base + (P + r) * ${ck_row} + c * ${ck_col},
                        migx::load(p${k_new}, kn_base + r * ${kn_row} + c * ${kn_col}));
        if (c < ${dv})
            migx::store(p${cache_v}, cv_base + (P + r) * ${cv_row} + c * ${cv_col},
                        migx::load(p${v_new}, vn_base + r * ${vn_row} + c * ${vn_col}));
    }
// @template kernel

constexpr int NWARPS = ${warps};
constexpr int DVL = (${dv} + MIGX_WARP_SIZE - 1) / MIGX_WARP_SIZE;  // output columns per lane

MIGX_GLOBAL void ${name}_kernel(${params}) {
    migx::kernel_entry();
    __shared__ float q_s[${d}];
    __shared__ float p_s[NWARPS][MIGX_WARP_SIZE];
    __shared__ float m_s[NWARPS], l_s[NWARPS];
    __shared__ float acc_s[NWARPS][${dv}];
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
    const int warp = threadIdx.x / MIGX_WARP_SIZE;
    const ${it} bh = blockIdx.x;
    ${batch_lines}
    const ${it} q_base = ${q_base}, k_base = ${k_base}, v_base = ${v_base};
    const ${it} row = 0;
    ${append_lines}
    for (int c = threadIdx.x; c < ${d}; c += ${threads})
        q_s[c] = (float)migx::load(p${q}, q_base + c * ${q_col});
    __syncthreads();
    float m_run = -migx::inf_f(), l_run = 0.0f, acc[DVL];
    for (int t = 0; t < DVL; ++t) acc[t] = 0.0f;
    // the same trip count in every warp, so the barriers below are reached by all
    for (int base = 0; base < ${n}; base += NWARPS * MIGX_WARP_SIZE) {
        const int j0 = base + warp * MIGX_WARP_SIZE;
        const ${it} j = j0 + lane;
        float x = -migx::inf_f();
        if (j < ${n}) {
            float s4[4] = {};
            #pragma unroll
            for (int c = 0; c < ${d}; ++c)
                s4[c % 4] += q_s[c] * (float)${k_read};
            float s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
            ${score_body}
            x = ${score};
        }
        const float m_new = migx::max_(m_run, migx::warp_reduce(x, migx::op_max{}));
        // keys all masked so far: nothing to rescale yet
        const float alpha = m_new == -migx::inf_f() ? 1.0f : expf(m_run - m_new);
        const float p = x == -migx::inf_f() ? 0.0f : expf(x - m_new);
        l_run = l_run * alpha + migx::warp_reduce(p, migx::op_sum{});
        m_run = m_new;
        p_s[warp][lane] = p;
        __syncthreads();
        const int keys = ${n} - j0 < MIGX_WARP_SIZE ? ${n} - j0 : MIGX_WARP_SIZE;
        for (int t = 0; t < DVL; ++t) {
            const int c = lane + t * MIGX_WARP_SIZE;
            if (c < ${dv}) {
                float a4[4] = {};
                // a constant trip count, unrolled, so the tile's V loads are all in flight at once
                // (a loop to `keys` issues them one L2 round trip after another)
                #pragma unroll
                for (int jj = 0; jj < MIGX_WARP_SIZE; ++jj) {
                    if (jj < keys) {
                        const ${it} jv = j0 + jj;
                        a4[jj % 4] += p_s[warp][jj] * (float)${v_read};
                    }
                }
                acc[t] = acc[t] * alpha + ((a4[0] + a4[1]) + (a4[2] + a4[3]));
            }
        }
        __syncthreads();
    }
    if (lane == 0) { m_s[warp] = m_run; l_s[warp] = l_run; }
    for (int t = 0; t < DVL; ++t) {
        const int c = lane + t * MIGX_WARP_SIZE;
        if (c < ${dv}) acc_s[warp][c] = acc[t];
    }
    __syncthreads();
    float mx = -migx::inf_f();
    for (int w = 0; w < NWARPS; ++w) mx = migx::max_(mx, m_s[w]);
    const ${it} o_base = ${o_base};
    for (int c = threadIdx.x; c < ${dv}; c += ${threads}) {
        float a = 0.0f, l = 0.0f;
        for (int w = 0; w < NWARPS; ++w) {
            // a warp whose keys were all masked (m = -inf) adds nothing
            const float e = m_s[w] == -migx::inf_f() ? 0.0f : expf(m_s[w] - mx);
            a += e * acc_s[w][c];
            l += e * l_s[w];
        }
        migx::store(p${nout}, o_base + c * ${o_col}, ${value});
    }
}
