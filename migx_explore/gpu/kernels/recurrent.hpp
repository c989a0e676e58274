// recurrent.hpp: one LSTM direction's whole recurrence in one block (gpu/codegen/recurrent.py fills
// the ${...} slots; a list slot alone on its line takes lines; see gpu/codegen/templates.py).
// h, c and the step's gates live in shared memory; R^T in registers where r_decl declares them.
// lstm_recurrences launches a block per direction: blockIdx.x is the direction in every offset.
// @template kernel

MIGX_GLOBAL __launch_bounds__(${threads}) void ${name}(${params}) {
    migx::kernel_entry();
    __shared__ float h_s[${state}], c_s[${state}], g_s[${gates}];
    const int t = threadIdx.x;
    for (int e = t; e < ${state}; e += ${threads}) {
        const int b = e / ${hidden}, j = e % ${hidden};
        h_s[e] = (float)migx::load(p3, ${h0_at});
        c_s[e] = (float)migx::load(p4, ${c0_at});
    }
    float bias_r[${cols}];
    ${r_decl}
    #pragma unroll
    for (int q = 0; q < ${cols}; ++q) {
        const int col = t + q * ${threads};
        bias_r[q] = col < ${g} ? (float)migx::load(p2, ${bias_at}) : 0.0f;
    ${r_load}
    }
    __syncthreads();
    for (int step = 0; step < ${seq}; ++step) {
        const int ts = ${ts};
    #pragma unroll
        for (int q = 0; q < ${cols}; ++q) {
            const int col = t + q * ${threads};
            if (col >= ${g}) continue;
            for (int b = 0; b < ${batch}; ++b) {
                float acc = (float)migx::load(p0, ${xw_at}) + bias_r[q];
                const float* hb = h_s + b * ${hidden};
    ${unroll}
                for (int k = 0; k < ${hidden}; ++k) acc += hb[k] * ${r_value};
                g_s[b * ${g} + col] = acc;
            }
        }
        __syncthreads();
        for (int e = t; e < ${state}; e += ${threads}) {
            const int b = e / ${hidden}, j = e % ${hidden};
            const float* gb = g_s + b * ${g};
            const float i = 1.0f / (1.0f + expf(-gb[j]));
            const float o = 1.0f / (1.0f + expf(-gb[${o_gate} + j]));
            const float f = 1.0f / (1.0f + expf(-gb[${f_gate} + j]));
            const float c = f * c_s[e] + i * tanhf(gb[${c_gate} + j]);
            const float h = o * tanhf(c);
            c_s[e] = c;
            h_s[e] = h;
            migx::store(p5, ${y_at}, h);
        }
        __syncthreads();
    }
    for (int e = t; e < ${state}; e += ${threads}) {
        const int b = e / ${hidden}, j = e % ${hidden};
        migx::store(p${c_last_param}, ${c_last_at}, c_s[e]);
        ${h_last}
    }
}
