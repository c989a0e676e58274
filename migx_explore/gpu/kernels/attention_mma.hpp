// attention_mma.hpp: the tensor-core FlashAttention-2 forward kernel (gpu/codegen/attention_mma.py
// fills the ${...} slots; see gpu/codegen/templates.py for the section and slot syntax).
// @template tile_fetch
if (aligned) {
            #pragma unroll
            for (int i = 0; i < ${per_thread}; ++i) {
                ${vec_index}
                ${name}_r[i] = make_uint4(0, 0, 0, 0);
                const ${it} at = ${base} + (${start} + j) * ${row_stride} + c;
                const bool in_tile = e < ${vectors} && ${start} + j < ${n};
                if (in_tile) ${name}_r[i] = *(const uint4*)(${ptr} + at);
            }
        }
// @template tile_put_scalar
for (int e = threadIdx.x; e < ${elements}; e += ${threads}) {
                const int j = e / ${cols}, c = e % ${cols};
                const ${it} at = ${base} + (j0 + j) * ${row_stride} + c * ${col_stride};
                ${dst}[j * ${pitch} + c] = (j0 + j < ${n}) ? ${ptr}[at].bits : 0;
            }
// @template tile_put_vector
if (aligned) {
            #pragma unroll
            for (int i = 0; i < ${per_thread}; ++i) {
                ${vec_index}
                if (e < ${vectors}) *(uint4*)(${dst} + j * ${pitch} + c) = ${name}_r[i];
            }
        } else {
            ${scalar}
        }
// @template mask_fetch
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                const ${it} rc = migx::min_((${it})(row0 + g + (e >> 1) * 8), (${it})${m_last});
                const ${it} jc = migx::min_((${it})(${start} + nt * 8 + 2 * t + (e & 1)), (${it})${n_last});
                ${loads}
            }
        }
// @template write_unsplit
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
            const ${it} row = row0 + g + (e >> 1) * 8;
            const ${it} c = dt * 8 + 2 * t + (e & 1);
            const float l = l_run[e >> 1];
            const float y = ${y}
            ${store}
        }
    }
// @template write_split
__syncthreads();  // every warp is done with k_s / v_s: their space takes the partials
    float* part_o = (float*)smem;  // [warp][16 rows][dv]
    float* part_ml = part_o + ${ml_offset};  // [warp][16 rows][max, sum]
    #pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) part_o[(warp * 16 + g + (e >> 1) * 8) * ${dv} + dt * 8 + 2 * t + (e & 1)] = o[dt][e];
    }
    if (t == 0) {
        part_ml[(warp * 16 + g) * 2] = m_run[0];
        part_ml[(warp * 16 + g) * 2 + 1] = l_run[0];
        part_ml[(warp * 16 + g + 8) * 2] = m_run[1];
        part_ml[(warp * 16 + g + 8) * 2 + 1] = l_run[1];
    }
    __syncthreads();
    const int tile_warp0 = (warp / SPLITS) * SPLITS;
    for (int e = split * 32 + lane; e < ${tile_elements}; e += SPLITS * 32) {
        const int r = e / ${dv}, c = e % ${dv};
        float mx = -migx::inf_f();
        #pragma unroll
        for (int s = 0; s < SPLITS; ++s) mx = migx::max_(mx, part_ml[((tile_warp0 + s) * 16 + r) * 2]);
        float l = 0.0f, acc = 0.0f;
        #pragma unroll
        for (int s = 0; s < SPLITS; ++s) {
            const float ms = part_ml[((tile_warp0 + s) * 16 + r) * 2];
            const float w = ms == -migx::inf_f() ? 0.0f : expf(ms - mx);  // a split with no unmasked key adds nothing
            l += w * part_ml[((tile_warp0 + s) * 16 + r) * 2 + 1];
            acc += w * part_o[((tile_warp0 + s) * 16 + r) * ${dv} + c];
        }
        const ${it} row = row0 + r;
        const float y = ${y}
        ${store}
    }
// @template kernel

constexpr int KD = ${kd};  // 16-wide chunks of the head dim (Q·Kᵀ reduction)
constexpr int NT = ${nt};  // 8-key score tiles per warp's key tile
constexpr int DT = ${dt};  // 8-wide output column tiles
constexpr int SPLITS = ${splits};  // warps per query tile, each over its own bn keys of a step

MIGX_GLOBAL void ${kname}(${params}) {
    migx::kernel_entry();
    __shared__ __attribute__((aligned(16))) unsigned char smem[${smem}];
    unsigned short* k_s = (unsigned short*)smem;  // [block_keys][d + PAD]
    unsigned short* v_s = k_s + ${v_s_offset};  // [block_keys][dv + PAD]
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int warp = threadIdx.x / 32, split = warp % SPLITS;
    const ${it} bh = blockIdx.x / ${row_blocks};
    const ${it} row0 = (blockIdx.x % ${row_blocks}) * ${rows} + (warp / SPLITS) * 16;
    ${batch_lines}
    const ${it} q_base = ${q_base}, k_base = ${k_base}, v_base = ${v_base};
    const bool aligned = ((${aligned}) & 15ull) == 0;
    (void)aligned;
    (void)split;
    unsigned qa[KD][4];
    #pragma unroll
    for (int kc = 0; kc < KD; ++kc) {
        #pragma unroll
        for (int r = 0; r < 4; ++r) {
            const ${it} row = row0 + g + (r & 1) * 8;
            const ${it} c = kc * 16 + 2 * t + (r >> 1) * 8;
            const ${it} off = q_base + row * ${q_row_stride} + c * ${q_col_stride};
            const unsigned lo = row < ${m} ? p${q}[off].bits : 0;
            const unsigned hi = row < ${m} ? p${q}[off + ${q_col_stride}].bits : 0;
            qa[kc][r] = lo | (hi << 16);
        }
    }
    float m_run[2] = {-migx::inf_f(), -migx::inf_f()}, l_run[2] = {0.0f, 0.0f};  // rows g, g + 8
    float o[DT][4];
    #pragma unroll
    for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    ${k_decl} ${v_decl}
    ${k_fetch0}
    ${v_fetch0}
    ${pf_decl}
    ${mask_fetch0}
    const unsigned short* k_w = k_s + split * ${k_split_offset};  // this warp's keys of the step
    const unsigned short* v_w = v_s + split * ${v_split_offset};
    for (int j0 = 0; j0 < ${n}; j0 += ${block_keys}) {
        __syncthreads();
        ${k_put}
        ${v_put}
        __syncthreads();
        if (j0 + ${block_keys} < ${n}) {
            ${k_fetch_next}
            ${v_fetch_next}
        }
        const int jw = j0 + split * ${bn};  // first key of this warp's share
        if (jw >= ${n}) continue;  // warp-uniform: past the last key, this split has nothing left
        // Fragments first, then NT independent mma: one warp per scheduler is all the SM has
        // at these sizes, so consecutive tensor-core instructions must not wait on each other.
        float sc[NT][4];
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
        #pragma unroll
        for (int kc = 0; kc < KD; ++kc) {
            unsigned kb[NT][2];
            #pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const unsigned short* kr = k_w + (nt * 8 + g) * ${k_pitch} + kc * 16 + 2 * t;
                kb[nt][0] = *(const unsigned*)kr;
                kb[nt][1] = *(const unsigned*)(kr + 8);
            }
            #pragma unroll
            for (int nt = 0; nt < NT; ++nt) migx::mma_16816<${ty}>(sc[nt], qa[kc], kb[nt]);
        }
        float mx[2] = {-migx::inf_f(), -migx::inf_f()};
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                const ${it} row = row0 + g + (e >> 1) * 8;
                const ${it} j = jw + nt * 8 + 2 * t + (e & 1);
                float x = -migx::inf_f();
                if (row < ${m} && j < ${n}) {
                    const float s = sc[nt][e];
                    ${score_body}
                    x = ${score};
                }
                sc[nt][e] = x;
                mx[e >> 1] = migx::max_(mx[e >> 1], x);
            }
        }
        if (jw + ${block_keys} < ${n}) {
            ${mask_fetch_next}
        }
        float alpha[2];
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            // the row's four lanes (4g .. 4g+3) agree on its maximum
            mx[h] = migx::max_(mx[h], MIGX_SHFL_XOR32(mx[h], 1));
            mx[h] = migx::max_(mx[h], MIGX_SHFL_XOR32(mx[h], 2));
            const float m_new = migx::max_(m_run[h], mx[h]);
            // A row whose keys so far are all masked (-inf) has nothing to rescale yet.
            alpha[h] = m_new == -migx::inf_f() ? 1.0f : expf(m_run[h] - m_new);
            m_run[h] = m_new;
            l_run[h] *= alpha[h];  // this lane's share of the row sum; lanes are summed at the end
        }
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float x = sc[nt][e];
                const float p = x == -migx::inf_f() ? 0.0f : expf(x - m_run[e >> 1]);
                sc[nt][e] = p;
                l_run[e >> 1] += p;
            }
        }
        #pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
            o[dt][0] *= alpha[0]; o[dt][1] *= alpha[0]; o[dt][2] *= alpha[1]; o[dt][3] *= alpha[1];
        }
        #pragma unroll
        for (int kc = 0; kc < NT / 2; ++kc) {
            const unsigned pa[4] = {migx::pack2<${ty}>(sc[2 * kc][0], sc[2 * kc][1]),
                                    migx::pack2<${ty}>(sc[2 * kc][2], sc[2 * kc][3]),
                                    migx::pack2<${ty}>(sc[2 * kc + 1][0], sc[2 * kc + 1][1]),
                                    migx::pack2<${ty}>(sc[2 * kc + 1][2], sc[2 * kc + 1][3])};
            unsigned vb[DT][2];
            #pragma unroll
            for (int dt = 0; dt < DT; ++dt) migx::load_b_trans(vb[dt], v_w + kc * 16 * ${v_pitch} + dt * 8, ${v_pitch});
            #pragma unroll
            for (int dt = 0; dt < DT; ++dt) migx::mma_16816<${ty}>(o[dt], pa, vb[dt]);
        }
    }
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        l_run[h] += MIGX_SHFL_XOR32(l_run[h], 1);
        l_run[h] += MIGX_SHFL_XOR32(l_run[h], 2);
    }
    const ${it} o_base = ${o_base};
    ${write_out}
}
