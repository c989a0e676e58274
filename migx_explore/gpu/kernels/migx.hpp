// migx.hpp: the one header every generated kernel includes. One dialect for hiprtc and nvrtc:
// vendor differences are selected on __HIPCC_RTC__ / __CUDACC_RTC__ here and nowhere else.
// No standard headers (hiprtc puts std in __hip_internal) and no CUB: reductions are written here.
// The host passes the warp size (-DMIGX_WARP_SIZE=32|64): warpSize is not constexpr on ROCm 7.
#pragma once

#ifndef MIGX_WARP_SIZE
#error "compile with -DMIGX_WARP_SIZE=<32|64>"
#endif

#if defined(__HIPCC_RTC__) || defined(__HIPCC__)
#define MIGX_HIP 1
#define MIGX_SHFL_XOR(v, m) __shfl_xor((v), (m), MIGX_WARP_SIZE)
#define MIGX_SHFL32(v, src) __shfl((v), (src), 32)
#define MIGX_SHFL_XOR32(v, m) __shfl_xor((v), (m), 32)
#elif defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define MIGX_CUDA 1
#define MIGX_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m), MIGX_WARP_SIZE)
#define MIGX_SHFL32(v, src) __shfl_sync(0xffffffffu, (v), (src), 32)
#define MIGX_SHFL_XOR32(v, m) __shfl_xor_sync(0xffffffffu, (v), (m), 32)
#else
#error "migx.hpp is compiled by hiprtc or nvrtc"
#endif

#define MIGX_GLOBAL extern "C" __global__
#define MIGX_DEVICE __device__ __forceinline__

namespace migx {

// Programmatic dependent launch (sm_90 and later). The CUDA host may launch a kernel while the
// kernel before it in the stream is still running (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_
// SERIALIZATION), so its block scheduling and set-up overlap the other's tail.
// kernel_wait(): wait until the previous grid has finished and its writes are visible (a no-op
// when the launch was an ordinary one).
MIGX_DEVICE void kernel_wait() {
#if defined(MIGX_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// kernel_entry_early(): let the next grid start launching, which is safe because that grid waits
// in turn before it reads anything. A kernel that first reads data no kernel writes (a GEMM's
// constant weights) begins with this, loads those, then calls kernel_wait() before anything else
// is read or written; the fake backend checks that such a kernel calls kernel_wait().
MIGX_DEVICE void kernel_entry_early() {
#if defined(MIGX_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Every other generated kernel calls this first: both, the wait first.
MIGX_DEVICE void kernel_entry() {
    kernel_wait();
    kernel_entry_early();
}

typedef long long i64;
typedef unsigned long long u64;

// ---- 16-bit float storage types ----------------------------------------------------------------
// Stored as raw bits and converted through float, so no vendor fp16/bf16 header is needed.
struct half_t { unsigned short bits; };
struct bf16_t { unsigned short bits; };

MIGX_DEVICE float bits_to_float(unsigned int u) { return __int_as_float((int)u); }
MIGX_DEVICE unsigned int float_to_bits(float f) { return (unsigned int)__float_as_int(f); }

MIGX_DEVICE float to_float(half_t h) {
#if defined(MIGX_CUDA)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
#else
    return (float)__builtin_bit_cast(_Float16, h.bits);
#endif
}
MIGX_DEVICE half_t to_half(float f) {
    half_t h;
#if defined(MIGX_CUDA)
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
    h.bits = __builtin_bit_cast(unsigned short, (_Float16)f);
#endif
    return h;
}
MIGX_DEVICE float to_float(bf16_t b) { return bits_to_float(((unsigned int)b.bits) << 16); }
MIGX_DEVICE bf16_t to_bf16(float f) {
    unsigned int u = float_to_bits(f);
    bf16_t b;
    if ((u & 0x7fffffffu) > 0x7f800000u) { b.bits = (unsigned short)((u >> 16) | 0x40u); return b; }  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    b.bits = (unsigned short)(u >> 16);
    return b;
}

// ---- OCP fp8 e4m3fn storage (quantize_fp8) ----------------------------------------------------
// 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN, finite range
// +-448. Converted through float in software (integer ops only), as ml_dtypes does on the host:
// round to nearest even; values past the range (and infinities) become NaN.
struct fp8e4m3_t { unsigned char bits; };

MIGX_DEVICE float to_float(fp8e4m3_t v) {
    const unsigned int s = (v.bits & 0x80u) << 24, e = (v.bits >> 3) & 0xFu, m = v.bits & 0x7u;
    if (e == 0xFu && m == 0x7u) return bits_to_float(s | 0x7fc00000u);
    if (e == 0) return bits_to_float(s | float_to_bits((float)m * 0.001953125f));  // m * 2^-9
    return bits_to_float(s | ((e + 120u) << 23) | (m << 20));
}
MIGX_DEVICE fp8e4m3_t to_fp8e4m3(float f) {
    const unsigned int u = float_to_bits(f);
    const unsigned char sign = (unsigned char)((u >> 24) & 0x80u);
    const unsigned int a = u & 0x7fffffffu;
    fp8e4m3_t r;
    if (a > 0x43e80000u) { r.bits = (unsigned char)(sign | 0x7Fu); return r; }  // NaN, inf, |f| > 464
    if (a < 0x3c800000u) {  // below 2^-6: subnormal, a multiple of 2^-9 (rounded to nearest even)
        const float q = bits_to_float(a) * 512.0f;
        int n = (int)q;
        const float rem = q - (float)n;
        if (rem > 0.5f || (rem == 0.5f && (n & 1))) ++n;
        r.bits = (unsigned char)(sign | n);  // n == 8 is the smallest normal's encoding
        return r;
    }
    unsigned int e = (a >> 23) - 120u, m = a & 0x7fffffu;
    unsigned int keep = m >> 20, rest = m & 0xfffffu;
    if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) ++keep;
    if (keep == 8u) { keep = 0; ++e; }
    r.bits = (unsigned char)(sign | (e << 3) | keep);
    return r;
}

// load(): storage type -> compute type; store(): compute type -> storage type.
template <class T> MIGX_DEVICE T load(const T* p, i64 i) { return p[i]; }
MIGX_DEVICE float load(const half_t* p, i64 i) { return to_float(p[i]); }
MIGX_DEVICE float load(const bf16_t* p, i64 i) { return to_float(p[i]); }
MIGX_DEVICE float load(const fp8e4m3_t* p, i64 i) { return to_float(p[i]); }
template <class T, class U> MIGX_DEVICE void store(T* p, i64 i, U v) { p[i] = (T)v; }
template <class U> MIGX_DEVICE void store(half_t* p, i64 i, U v) { p[i] = to_half((float)v); }
template <class U> MIGX_DEVICE void store(bf16_t* p, i64 i, U v) { p[i] = to_bf16((float)v); }
template <class U> MIGX_DEVICE void store(fp8e4m3_t* p, i64 i, U v) { p[i] = to_fp8e4m3((float)v); }

// ---- scalar helpers ----------------------------------------------------------------------------
MIGX_DEVICE float inf_f() { return bits_to_float(0x7f800000u); }
MIGX_DEVICE float nan_f() { return bits_to_float(0x7fc00000u); }
MIGX_DEVICE double inf_d() { return __longlong_as_double(0x7ff0000000000000ll); }
template <class T> MIGX_DEVICE T max_(T a, T b) { return a > b ? a : b; }
template <class T> MIGX_DEVICE T min_(T a, T b) { return a < b ? a : b; }
MIGX_DEVICE float max_(float a, float b) { return fmaxf(a, b); }
MIGX_DEVICE float min_(float a, float b) { return fminf(a, b); }
MIGX_DEVICE double max_(double a, double b) { return fmax(a, b); }
MIGX_DEVICE double min_(double a, double b) { return fmin(a, b); }
template <class T> MIGX_DEVICE bool isnan_(T x) { return x != x; }
template <class T> MIGX_DEVICE bool isinf_(T x) { return x == x && (x - x) != (x - x); }
template <class T> MIGX_DEVICE T sign_(T x) { return (T)((x > (T)0) - (x < (T)0)); }

// Python-style modulo (sign of the divisor), numpy.mod semantics.
MIGX_DEVICE float pymod(float a, float b) { float r = fmodf(a, b); return (r != 0.f && ((r < 0.f) != (b < 0.f))) ? r + b : r; }
MIGX_DEVICE double pymod(double a, double b) { double r = fmod(a, b); return (r != 0. && ((r < 0.) != (b < 0.))) ? r + b : r; }
template <class T> MIGX_DEVICE T pymod(T a, T b) { if (b == 0) return 0; T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
template <class T> MIGX_DEVICE T cmod(T a, T b) { return b == 0 ? 0 : a % b; }
template <class T> MIGX_DEVICE T idiv(T a, T b) { return b == 0 ? 0 : a / b; }

// float -> integer conversion as numpy's reference does it: truncate, NaN -> 0, saturate.
template <class I> MIGX_DEVICE I sat_int(double x, double lo, double hi) {
    if (x != x) return (I)0;
    x = trunc(x);
    return (I)(x < lo ? lo : (x > hi ? hi : x));
}

// float -> narrower float as MIGraphX's convert does it: finite values beyond the target's range
// become its largest finite value of that sign (an HF mask's -3.4e38 becomes -65504 in half, not
// -inf); infinities too where `inf_too` (ONNX's saturating fp8 cast); NaN passes through.
template <class T> MIGX_DEVICE T sat_float(T x, T m, bool inf_too) {
    if (x > m) return (inf_too || !isinf_(x)) ? m : x;
    if (x < -m) return (inf_too || !isinf_(x)) ? -m : x;
    return x;
}

// ---- reductions --------------------------------------------------------------------------------
struct op_sum { template <class T> MIGX_DEVICE T operator()(T a, T b) const { return a + b; } };
struct op_prod { template <class T> MIGX_DEVICE T operator()(T a, T b) const { return a * b; } };
struct op_max { template <class T> MIGX_DEVICE T operator()(T a, T b) const { return max_(a, b); } };
struct op_min { template <class T> MIGX_DEVICE T operator()(T a, T b) const { return min_(a, b); } };
struct op_or { template <class T> MIGX_DEVICE T operator()(T a, T b) const { return (T)(a || b); } };
struct op_and { template <class T> MIGX_DEVICE T operator()(T a, T b) const { return (T)(a && b); } };

// Atomic read-modify-write of a 4- or 8-byte value with any reduction functor (a CAS loop;
// scatter reductions with repeated indices accumulate, as numpy's ufunc.at does).
template <int N> struct word_of;
template <> struct word_of<4> { typedef unsigned int type; };
template <> struct word_of<8> { typedef unsigned long long type; };
template <class T, class Op> MIGX_DEVICE void atomic_apply(T* p, T v, Op op) {
    typedef typename word_of<sizeof(T)>::type W;
    union U { T t; W w; };
    W* addr = (W*)p;
    W old = *addr, assumed;
    do {
        assumed = old;
        U cur, next;
        cur.w = assumed;
        next.t = op(cur.t, v);
        old = atomicCAS(addr, assumed, next.w);
    } while (old != assumed);
}

template <class Op, class T> MIGX_DEVICE T warp_reduce(T v, Op op) {
#pragma unroll
    for (int m = MIGX_WARP_SIZE / 2; m > 0; m >>= 1) v = op(v, (T)MIGX_SHFL_XOR(v, m));
    return v;
}

// Every thread of the block gets the result. The block size must be a multiple of the warp size;
// `smem` holds one slot per warp. The leading barrier lets consecutive reductions reuse `smem`.
template <class Op, class T> MIGX_DEVICE T block_reduce(T v, Op op, T* smem) {
    v = warp_reduce(v, op);
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
    const int warp = threadIdx.x / MIGX_WARP_SIZE;
    const int nwarps = blockDim.x / MIGX_WARP_SIZE;
    __syncthreads();
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    T r = smem[0];
    for (int w = 1; w < nwarps; ++w) r = op(r, smem[w]);
    return r;
}

// Arg-reduction: (value, index) pairs; ties keep the lower index (or the higher one when last).
template <class T> MIGX_DEVICE bool arg_better(T v, i64 i, T bv, i64 bi, bool largest, bool last) {
    if (bi < 0) return i >= 0;  // an empty slot loses to any element
    if (i < 0) return false;
    if (v == bv) return last ? i > bi : i < bi;
    return largest ? v > bv : v < bv;
}

template <class T> MIGX_DEVICE void block_argreduce(T& v, i64& idx, bool largest, bool last, T* sv, i64* si) {
#pragma unroll
    for (int m = MIGX_WARP_SIZE / 2; m > 0; m >>= 1) {
        T ov = MIGX_SHFL_XOR(v, m);
        i64 oi = MIGX_SHFL_XOR(idx, m);
        if (arg_better(ov, oi, v, idx, largest, last)) { v = ov; idx = oi; }
    }
    const int lane = threadIdx.x % MIGX_WARP_SIZE;
    const int warp = threadIdx.x / MIGX_WARP_SIZE;
    const int nwarps = blockDim.x / MIGX_WARP_SIZE;
    __syncthreads();
    if (lane == 0) { sv[warp] = v; si[warp] = idx; }
    __syncthreads();
    v = sv[0];
    idx = si[0];
    for (int w = 1; w < nwarps; ++w)
        if (arg_better(sv[w], si[w], v, idx, largest, last)) { v = sv[w]; idx = si[w]; }
}

// ---- 16x8x16 matrix tiles (mma.sync m16n8k16 fragments) -----------------------------------------
// A group of 32 lanes (a warp on NVIDIA, half a wave on AMD) multiplies a 16x16 A tile (row-major)
// by a 16x8 B tile into a 16x8 fp32 accumulator. Lane l = 4g + t holds, as in the PTX ISA:
//   a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]
//   b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
//   d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..2t+1]
// each 32-bit word being two 16-bit values (the lower index in the low half). On sm_80+ one
// tensor-core instruction (not volatile: a pure register operation the compiler may schedule);
// elsewhere the same arithmetic through shuffles (slow, for correctness).
template <class T> MIGX_DEVICE float lo_f(unsigned w) { T v; v.bits = (unsigned short)(w & 0xffffu); return to_float(v); }
template <class T> MIGX_DEVICE float hi_f(unsigned w) { T v; v.bits = (unsigned short)(w >> 16); return to_float(v); }
template <class T> MIGX_DEVICE unsigned pack2(float lo, float hi);
template <> MIGX_DEVICE unsigned pack2<half_t>(float lo, float hi) {
    return (unsigned)to_half(lo).bits | ((unsigned)to_half(hi).bits << 16);
}
template <> MIGX_DEVICE unsigned pack2<bf16_t>(float lo, float hi) {
    return (unsigned)to_bf16(lo).bits | ((unsigned)to_bf16(hi).bits << 16);
}
template <class T> MIGX_DEVICE float dot2(unsigned a, unsigned b) { return lo_f<T>(a) * lo_f<T>(b) + hi_f<T>(a) * hi_f<T>(b); }

#if defined(MIGX_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MIGX_MMA_16816 1
template <class T> MIGX_DEVICE void mma_16816(float* d, const unsigned* a, const unsigned* b);
template <> MIGX_DEVICE void mma_16816<half_t>(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> MIGX_DEVICE void mma_16816<bf16_t>(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#else
template <class T> MIGX_DEVICE void mma_16816(float* d, const unsigned* a, const unsigned* b) {
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        // lane 4g + s holds A rows g, g+8 at k = 2s.., 2s+8..; lane 4n + s holds B column n there
        const unsigned a0 = MIGX_SHFL32(a[0], 4 * g + s), a1 = MIGX_SHFL32(a[1], 4 * g + s);
        const unsigned a2 = MIGX_SHFL32(a[2], 4 * g + s), a3 = MIGX_SHFL32(a[3], 4 * g + s);
        const unsigned b00 = MIGX_SHFL32(b[0], 8 * t + s), b01 = MIGX_SHFL32(b[1], 8 * t + s);
        const unsigned b10 = MIGX_SHFL32(b[0], 8 * t + 4 + s), b11 = MIGX_SHFL32(b[1], 8 * t + 4 + s);
        d[0] += dot2<T>(a0, b00) + dot2<T>(a2, b01);
        d[1] += dot2<T>(a0, b10) + dot2<T>(a2, b11);
        d[2] += dot2<T>(a1, b00) + dot2<T>(a3, b01);
        d[3] += dot2<T>(a1, b10) + dot2<T>(a3, b11);
    }
}
#endif

// The B fragment of a 16x8 tile stored row-major (k rows of `stride` 16-bit elements from `p`,
// 16-byte aligned rows): b[0] = B[2t..2t+1][g], b[1] = B[2t+8..][g]. ldmatrix.trans on sm_80+.
MIGX_DEVICE void load_b_trans(unsigned* b, const unsigned short* p, int stride) {
#if defined(MIGX_MMA_16816)
    const unsigned short* row = p + (threadIdx.x % 16) * stride;
    unsigned addr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(addr));
#else
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    b[0] = (unsigned)p[(2 * t) * stride + g] | ((unsigned)p[(2 * t + 1) * stride + g] << 16);
    b[1] = (unsigned)p[(2 * t + 8) * stride + g] | ((unsigned)p[(2 * t + 9) * stride + g] << 16);
#endif
}

// ---- asynchronous 16-byte copies global -> shared (gpu/codegen/gemm_mma.py's pipeline) ----------
// cp.async on sm_80+: the copy runs while the thread goes on, so several chunks of a GEMM's
// operands are in flight at once; `full` false writes zeros (src-size 0: nothing is read).
// Elsewhere a plain copy, so the pipeline is correct everywhere and only overlaps where it can.
MIGX_DEVICE void copy16_async(void* dst, const void* src, bool full) {
#if defined(MIGX_MMA_16816)
    unsigned addr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(addr), "l"(src), "r"(full ? 16 : 0) : "memory");
#else
    *reinterpret_cast<uint4*>(dst) = full ? *reinterpret_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);
#endif
}
MIGX_DEVICE void copy_async_commit() {
#if defined(MIGX_MMA_16816)
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Wait until at most N committed groups of this thread are still in flight.
template <int N> MIGX_DEVICE void copy_async_wait() {
#if defined(MIGX_MMA_16816)
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// ---- rows in registers (gpu/codegen/reduce_rows.py) ---------------------------------------------
// A reduction over a group of G consecutive lanes (G a power of two up to 32): the xor partners
// stay inside the group, so groups sharing a warp reduce at once and every lane gets its group's
// result, with no shared memory and no barrier.
template <int G, class Op, class T> MIGX_DEVICE T group_reduce(T v, Op op) {
#pragma unroll
    for (int m = G / 2; m > 0; m >>= 1) v = op(v, (T)MIGX_SHFL_XOR(v, m));
    return v;
}

// V consecutive elements to or from floats, in accesses of up to 16 bytes (p aligned to
// min(16, V * sizeof(T)) bytes; the generator checks the pointers at run time).
template <int B> struct raw_bytes;
template <> struct raw_bytes<2> { typedef unsigned short type; };
template <> struct raw_bytes<4> { typedef unsigned type; };
template <> struct raw_bytes<8> { typedef uint2 type; };
template <> struct raw_bytes<16> { typedef uint4 type; };
MIGX_DEVICE float to_float(float f) { return f; }
template <class T> MIGX_DEVICE T from_float(float f);
template <> MIGX_DEVICE float from_float<float>(float f) { return f; }
template <> MIGX_DEVICE half_t from_float<half_t>(float f) { return to_half(f); }
template <> MIGX_DEVICE bf16_t from_float<bf16_t>(float f) { return to_bf16(f); }

template <int V, class T> MIGX_DEVICE void load_vec(const T* p, float* d) {
    constexpr int B = V * (int)sizeof(T) < 16 ? V * (int)sizeof(T) : 16;
    constexpr int N = B / (int)sizeof(T);
    typedef typename raw_bytes<B>::type W;
#pragma unroll
    for (int c = 0; c < V; c += N) {
        const W w = *reinterpret_cast<const W*>(p + c);
        const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
        for (int q = 0; q < N; ++q) d[c + q] = to_float(e[q]);
    }
}
template <int V, class T> MIGX_DEVICE void store_vec(T* p, const float* s) {
    constexpr int B = V * (int)sizeof(T) < 16 ? V * (int)sizeof(T) : 16;
    constexpr int N = B / (int)sizeof(T);
    typedef typename raw_bytes<B>::type W;
#pragma unroll
    for (int c = 0; c < V; c += N) {
        W w;
        T* e = reinterpret_cast<T*>(&w);
#pragma unroll
        for (int q = 0; q < N; ++q) e[q] = from_float<T>(s[c + q]);
        *reinterpret_cast<W*>(p + c) = w;
    }
}

}  // namespace migx
