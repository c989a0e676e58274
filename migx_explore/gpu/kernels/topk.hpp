// topk.hpp: the single-launch radix-select top-k (gpu/codegen/topk.py fills the ${...} slots and
// assembles the sections; a list slot alone on its line takes lines; see gpu/codegen/templates.py).
// prologue: hist holds three 256-bin buffers (see topk.py's _select); MIGX_OUT(i, w) writes output
// i from word w, its value from the key (from memory where the key lost it). keys_shared: each key
// computed once into shared memory, the top digit's histogram counted on the way; every load of
// the thread is issued before the first is used (one memory latency, not one a key: the
// histogram's warp collectives would otherwise keep them apart). helpers: the float-to-key map and
// its inverse, warp scans, the histogram add, the digit search every warp runs, the survivor
// slots and the bitonic compare-exchange.
// @template kernel
${helpers}

MIGX_GLOBAL void ${name}(${params}) {
    migx::kernel_entry();
    ${body}
}
// @template prologue
constexpr int K = ${k}, P = ${width}, NT = ${threads};
const int t = threadIdx.x;
${clock_start}
__shared__ __align__(16) unsigned int hist[768];
__shared__ unsigned long long win[P];
__shared__ unsigned long long pool_s[${pool}];
__shared__ unsigned int s_m;
unsigned int m_surv;
#define MIGX_OUT(i, w) { const int jj = (int)~(unsigned int)(w); float f = migx_topk_unkey(${flip}(unsigned int)((w) >> 32)); if (migx_topk_lossy(f)) f = (float)migx::load(p0, base0 + jj * ${xs}); migx::store(p${po}, base${po} + (i) * ${value_stride}, f); migx::store(p${pi}, base${pi} + (i) * ${index_stride}, (long long)jj); }
for (int b = t; b < 768; b += blockDim.x) hist[b] = 0u;
if (t == 0) s_m = 0u;
__syncthreads();
// @template spread
__shared__ bool s_last;
unsigned int* ticket = (unsigned int*)p1;
unsigned long long* ws = (unsigned long long*)p2;
const int cnt = ${n} - (int)${start} < ${chunk} ? ${n} - (int)${start} : ${chunk};
#define MIGX_SURV(i, w) (ws[${slot} + (blockIdx.x % ${parts}) * ${cap} + (i)] = (w))
// @template keys_shared
unsigned int* keys_s = (unsigned int*)pool_s;
bool first_done = true;
float xv[${per}];
#pragma unroll
for (int r = 0; r < ${per}; ++r) {
    const int j = r * ${threads} + t;
    xv[r] = j < ${count} ? ${load} : 0.0f;
}
#pragma unroll
for (int r = 0; r < ${per}; ++r) {
    const int j = r * ${threads} + t;
    unsigned int bin = 256u;
    if (j < ${count}) { const unsigned int u = ${flip}migx_topk_key(xv[r]);
        keys_s[j] = u; bin = u >> 24; }
    migx_hist_add(hist, bin);
}
__syncthreads();
${clock}
#define MIGX_WORD(j) (((unsigned long long)keys_s[(j)] << 32) | ${low})
// @template select
{
    const unsigned int want0 = ${count} < K ? (unsigned int)(${count}) : (unsigned int)K;
    ${passes}
}
// @template helpers
MIGX_DEVICE unsigned int migx_topk_key(float f) {
    if (f != f) f = __int_as_float(0x7f800000);  // NaN ranks as +inf (ties with it by index)
    if (f == 0.0f) f = 0.0f;                     // -0 equals +0
    const unsigned int u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float a key came from, except where the key lost it (NaN read as +inf, -0 as +0): the
// caller loads those from memory instead.
MIGX_DEVICE float migx_topk_unkey(unsigned int k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

MIGX_DEVICE bool migx_topk_lossy(float f) {
    const unsigned int a = __float_as_uint(f) & 0x7fffffffu;
    return a == 0u || a == 0x7f800000u;
}

// A word another block wrote before its ticket: read from L2 (never a stale L1 line), and
// unlike a volatile read free to be in flight with the thread's other loads.
MIGX_DEVICE unsigned long long migx_topk_ldcg(const unsigned long long* p) {
#if defined(MIGX_CUDA)
    return __ldcg(p);
#else
    return *(const volatile unsigned long long*)p;
#endif
}

MIGX_DEVICE unsigned int migx_shfl_up_u(unsigned int v, int d) {
#if defined(MIGX_CUDA)
    return __shfl_up_sync(0xffffffffu, v, d, MIGX_WARP_SIZE);
#else
    return __shfl_up(v, d, MIGX_WARP_SIZE);
#endif
}

// Inclusive sum over the lanes up to this one.
MIGX_DEVICE unsigned int migx_warp_inclusive_sum(unsigned int x) {
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
#pragma unroll
    for (int d = 1; d < MIGX_WARP_SIZE; d <<= 1) {
        const unsigned int y = migx_shfl_up_u(x, d);
        if (lane >= d) x += y;
    }
    return x;
}

// hist[bin] += 1 for this lane's bin (bin >= 256: none). Every lane of the warp calls it (the
// callers' loops have the same trip count in every thread). Scores share their top bits and
// same-address shared atomics serialise, so the lanes sharing the first valid lane's bin add
// once through it; the others add one each (later digits spread over the bins). Grouping every
// bin with __match_any_sync was slower (docs/results/issue28_topk_survivors_h100.md).
MIGX_DEVICE void migx_hist_add(unsigned int* hist, unsigned int bin) {
#if defined(MIGX_CUDA)
    const unsigned int valid = __ballot_sync(0xffffffffu, bin < 256u);
    if (valid == 0u) return;
    const int leader = __ffs(valid) - 1;
    const unsigned int lead = __shfl_sync(0xffffffffu, bin, leader);
    const unsigned int same = __ballot_sync(0xffffffffu, bin == lead);
    if (bin == lead) {
        if ((int)(threadIdx.x % 32) == leader) atomicAdd(&hist[bin], (unsigned int)__popc(same));
    } else if (bin < 256u) {
        atomicAdd(&hist[bin], 1u);
    }
#else
    if (bin < 256u) atomicAdd(&hist[bin], 1u);
#endif
}

// The digit of the want-th word from the top in a 256-bin histogram: its bin, the count of
// the bins above it and its own count. Every warp computes it (the same answer in every
// thread), so no barrier broadcasts it. A lane holds a run of bins, the top lane the top run.
MIGX_DEVICE void migx_topk_digit(const unsigned int* h, unsigned int want, unsigned int& sel, unsigned int& acc,
                                 unsigned int& cnt) {
    constexpr int per = 256 / MIGX_WARP_SIZE;
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
    const int top = 255 - lane * per;
    unsigned int v[per], own = 0u;
#if defined(MIGX_CUDA)
    // two 16-byte loads: the lane's eight contiguous bins without bank conflicts
    const uint4 lo = ((const uint4*)h)[(top - 7) / 4], hi = ((const uint4*)h)[(top - 3) / 4];
    v[0] = hi.w; v[1] = hi.z; v[2] = hi.y; v[3] = hi.x; v[4] = lo.w; v[5] = lo.z; v[6] = lo.y; v[7] = lo.x;
#else
#pragma unroll
    for (int b = 0; b < per; ++b) v[b] = h[top - b];
#endif
#pragma unroll
    for (int b = 0; b < per; ++b) own += v[b];
    const unsigned int upto = migx_warp_inclusive_sum(own);
    const bool mine = upto >= want && upto - own < want;  // exactly one lane: upto grows with the lane
    unsigned int s = 0u, a = upto - own, c = 0u;
    if (mine) {
        bool found = false;
#pragma unroll
        for (int b = 0; b < per; ++b) {
            if (found) continue;
            if (a + v[b] >= want) { found = true; s = (unsigned int)(top - b); c = v[b]; }
            else a += v[b];
        }
    }
#if defined(MIGX_CUDA)
    const int src = __ffs(__ballot_sync(0xffffffffu, mine)) - 1;
    sel = __shfl_sync(0xffffffffu, s, src); acc = __shfl_sync(0xffffffffu, a, src);
    cnt = __shfl_sync(0xffffffffu, c, src);
#else
    if (!mine) a = 0u;  // a sum over the warp picks the one lane's values
#pragma unroll
    for (int m = 1; m < MIGX_WARP_SIZE; m <<= 1) {
        s += MIGX_SHFL_XOR(s, m); a += MIGX_SHFL_XOR(a, m); c += MIGX_SHFL_XOR(c, m);
    }
    sel = s; acc = a; cnt = c;
#endif
}

// This lane's slot in a list counted by *n when keep (every lane of the warp calls it).
MIGX_DEVICE unsigned int migx_topk_slot(bool keep, unsigned int* n) {
#if defined(MIGX_CUDA)
    const unsigned int bal = __ballot_sync(0xffffffffu, keep);
    if (bal == 0u) return 0u;
    const int lane = threadIdx.x % 32, leader = __ffs(bal) - 1;
    unsigned int base = 0u;
    if (lane == leader) base = atomicAdd(n, (unsigned int)__popc(bal));
    return __shfl_sync(0xffffffffu, base, leader) + (unsigned int)__popc(bal & ((1u << lane) - 1u));
#else
    return keep ? atomicAdd(n, 1u) : 0u;
#endif
}

MIGX_DEVICE unsigned long long migx_shfl_xor_u64(unsigned long long v, int m) {
    const unsigned int lo = MIGX_SHFL_XOR((unsigned int)v, m), hi = MIGX_SHFL_XOR((unsigned int)(v >> 32), m);
    return ((unsigned long long)hi << 32) | lo;
}

// One compare-exchange of a descending bitonic sort: element i of a run of `size` against its
// partner i ^ stride; the lower of the two keeps the larger value in descending runs.
MIGX_DEVICE unsigned long long migx_bitonic_pick(unsigned long long v, unsigned long long o, int i, int size,
                                                 int stride) {
    const bool keep_max = ((i & stride) == 0) == ((i & size) == 0);
    return keep_max ? (v > o ? v : o) : (v < o ? v : o);
}
