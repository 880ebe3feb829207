// CPU kernels of subaudit's training engine, loaded with ctypes by subaudit.engine.kernels.
//
// What a DP-SGD audit does R times per step, written so that one run's numbers depend on
// that run alone: every loop over a run's records, parameters and draws has a fixed order,
// and no floating-point operation is reassociated or contracted (the library is built with
// -ffp-contract=off and without -ffast-math; sums run in 16 logical lanes held in GCC
// vectors of the build's width, so an AVX-512 build and an SSE2 one give the same bits):
//
//  * random streams: four xoroshiro128++ lanes (Blackman and Vigna 2018) seeded by
//    splitmix64, with uniforms of 24 bits and standard normals by the 256-layer ziggurat of
//    Marsaglia and Tsang (2000) on 52-bit integers (numpy's construction; _ziggurat.h), with
//    AVX2 the four lanes of a stream drawn side by side in one vector (the same integers and
//    exact operations, so the same bits);
//  * the sum of a run's clipped per-example gradients of a Tanh MLP (a linear head is the
//    one-layer case) over its sampled records: logits, softmax cross-entropy, backward
//    pass, the per-example norm over all parameters, Opacus' clip factor
//    min(1, C / (norm + 1e-6)), times 1 / (expected batch size); a sparse first layer (CSR
//    inputs, e.g. one-hot attributes) costs its non-zeros only;
//  * Gaussian noise drawn into the privatised gradient and the SGD or Adam step, fused in
//    one pass over the parameters (torch.optim's formulas);
//  * whole trainings of runs one after another (the above, the Poisson draws and the
//    canaries), so that a run's parameters and optimiser state stay in the core's cache;
//  * a dense linear head's softmax and clipping between torch's matrix products.
// float32 uses rational / polynomial tanh and exp (Eigen's, Cephes'), float64 libm's.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "_ziggurat.h"

namespace {

// ---------------------------------------------------------------- random streams

// xoroshiro128++ (Blackman and Vigna 2018): one lane of a stream.
struct Lane {
    uint64_t a, b;
};

// A stream is four lanes; value j of a draw comes from lane j % 4, so that four independent
// state chains run side by side (one chain is latency-bound).
constexpr int LANES = 4;
struct Stream {
    Lane lane[LANES];
};

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

inline uint64_t next_u64(Lane &st) {
    const uint64_t s0 = st.a;
    uint64_t s1 = st.b;
    const uint64_t result = rotl(s0 + s1, 17) + s0;
    s1 ^= s0;
    st.a = rotl(s0, 49) ^ s1 ^ (s1 << 21);
    st.b = rotl(s1, 28);
    return result;
}

inline double next_double(Lane &st) { return (double)(next_u64(st) >> 11) * 0x1.0p-53; }

// The ziggurat's rare rejection steps (0.7% of draws), from the first integer r on.
__attribute__((noinline)) double normal_slow(Lane *st, uint64_t r) {
    for (;;) {
        const int idx = (int)(r & 0xff);
        const int sign = (int)((r >> 8) & 1);
        const uint64_t rabs = (r >> 9) & 0x000fffffffffffffULL;
        double x = (double)(int64_t)rabs * zig_wi[idx];
        if (sign) x = -x;
        if (rabs < zig_ki[idx]) return x;
        if (idx == 0) {  // the tail beyond R (Marsaglia 1964), as numpy
            for (;;) {
                const double xx = -std::log1p(-next_double(*st)) / ZIG_R;
                const double yy = -std::log1p(-next_double(*st));
                if (yy + yy > xx * xx) return sign ? -(ZIG_R + xx) : ZIG_R + xx;
            }
        }
        if ((zig_fi[idx - 1] - zig_fi[idx]) * next_double(*st) + zig_fi[idx] < std::exp(-0.5 * x * x))
            return x;
        r = next_u64(*st);
    }
}

// One standard normal: 99.3% of draws return after one integer, a multiply and a compare.
inline double normal(Lane &st) {
    const uint64_t r = next_u64(st);
    const int idx = (int)(r & 0xff);
    const uint64_t rabs = (r >> 9) & 0x000fffffffffffffULL;
    double x = (double)(int64_t)rabs * zig_wi[idx];
    uint64_t bits;  // the sign by its bit, not a branch (a coin flip mispredicts half the time)
    std::memcpy(&bits, &x, sizeof bits);
    bits ^= ((r >> 8) & 1) << 63;
    std::memcpy(&x, &bits, sizeof x);
    if (__builtin_expect(rabs < zig_ki[idx], 1)) return x;
    Lane t = st;  // a copy, so that st stays in registers on the fast path
    x = normal_slow(&t, r);
    st = t;
    return x;
}

// n values of a stream from position j0 of the current draw (value j from lane j % LANES),
// one lane at a time (the builds without AVX2, and the last n % LANES values).
template <typename T>
inline void fill_normal_lanes(Stream *stream, T *out, int64_t n, int64_t j0) {
    Lane l[LANES];
    for (int k = 0; k < LANES; k++) l[k] = stream->lane[(j0 + k) % LANES];
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        out[i] = (T)normal(l[0]);
        out[i + 1] = (T)normal(l[1]);
        out[i + 2] = (T)normal(l[2]);
        out[i + 3] = (T)normal(l[3]);
    }
    for (int k = 0; i < n; i++, k++) out[i] = (T)normal(l[k]);
    for (int k = 0; k < LANES; k++) stream->lane[(j0 + k) % LANES] = l[k];
}

#if defined(__AVX2__)
// The same draws with the four lanes side by side in one vector: each lane's integers, table
// entries and accepted values are those of normal() (integer operations, an exact int-to-double
// conversion, one multiply, a sign flip), and a lane whose value is rejected takes
// normal_slow() from the same state, so every build gives the same bits.  The ziggurat's two
// tables as one of pairs: a lane's entries in one 16-byte load (Zen 4's gathers cost more
// than the rest of a draw).
struct ZigPair {
    double w;
    uint64_t k;
};
struct ZigPairs {
    alignas(64) ZigPair e[256];
    ZigPairs() {
        for (int i = 0; i < 256; i++) e[i] = ZigPair{zig_wi[i], zig_ki[i]};
    }
};
const ZigPairs zig_pairs;

template <int K>
inline __m256i rotl4(__m256i x) {
#if defined(__AVX512VL__)
    return _mm256_rol_epi64(x, K);
#else
    return _mm256_or_si256(_mm256_slli_epi64(x, K), _mm256_srli_epi64(x, 64 - K));
#endif
}

inline void store4(float *o, __m256d x) { _mm_storeu_ps(o, _mm256_cvtpd_ps(x)); }
inline void store4(double *o, __m256d x) { _mm256_storeu_pd(o, x); }

// Lane k of a vector of four 64-bit integers set to v (the others kept), in registers: a
// round trip through memory would stall the lanes' next draws on a failed store forwarding.
template <int k>
inline __m256i set_lane(__m256i x, uint64_t v) {
#if defined(__AVX512VL__)
    return _mm256_mask_set1_epi64(x, (__mmask8)(1 << k), (long long)v);
#else
    return _mm256_blend_epi32(x, _mm256_set1_epi64x((long long)v), 3 << (2 * k));
#endif
}

// Lane k of a group whose fast path rejected: normal_slow from the lane's state after its
// first integer r, as normal() does.
template <int k, typename T>
inline void reject_lane(__m256i &a, __m256i &b, __m256i r, T *o) {
    Lane t{(uint64_t)_mm256_extract_epi64(a, k), (uint64_t)_mm256_extract_epi64(b, k)};
    o[k] = (T)normal_slow(&t, (uint64_t)_mm256_extract_epi64(r, k));
    a = set_lane<k>(a, t.a);
    b = set_lane<k>(b, t.b);
}

// A group of which some lane rejected (bit k of ok clear): the accepted values, then the
// rejected lanes' draws.
template <typename T>
__attribute__((noinline)) void reject_lanes(__m256i &a, __m256i &b, __m256i r, __m256d x, int ok, T *o) {
    store4(o, x);
    if (!(ok & 1)) reject_lane<0>(a, b, r, o);
    if (!(ok & 2)) reject_lane<1>(a, b, r, o);
    if (!(ok & 4)) reject_lane<2>(a, b, r, o);
    if (!(ok & 8)) reject_lane<3>(a, b, r, o);
}

template <typename T>
inline void fill_normal(Stream *stream, T *out, int64_t n, int64_t j0) {
    alignas(32) uint64_t la[LANES], lb[LANES];
    for (int k = 0; k < LANES; k++) {
        la[k] = stream->lane[(j0 + k) % LANES].a;
        lb[k] = stream->lane[(j0 + k) % LANES].b;
    }
    __m256i a = _mm256_load_si256((const __m256i *)la), b = _mm256_load_si256((const __m256i *)lb);
    const __m256i low8 = _mm256_set1_epi64x(0xff), low52 = _mm256_set1_epi64x(0x000fffffffffffffLL),
                  exp52 = _mm256_set1_epi64x(0x4330000000000000LL), one = _mm256_set1_epi64x(1);
    const __m256d two52 = _mm256_set1_pd(0x1p52);
    const char *pairs = (const char *)zig_pairs.e;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        // next_u64 of each lane
        const __m256i s0 = a, s1 = _mm256_xor_si256(b, a);
        const __m256i r = _mm256_add_epi64(rotl4<17>(_mm256_add_epi64(s0, b)), s0);
        a = _mm256_xor_si256(_mm256_xor_si256(rotl4<49>(s0), s1), _mm256_slli_epi64(s1, 21));
        b = rotl4<28>(s1);
        // each lane's (wi, ki): entries 0, 2 in A and 1, 3 in B, then unpacked
        const __m256i off = _mm256_slli_epi64(_mm256_and_si256(r, low8), 4);
        const __m128i o01 = _mm256_castsi256_si128(off), o23 = _mm256_extracti128_si256(off, 1);
        const __m256i A = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_load_si128((const __m128i *)(pairs + _mm_cvtsi128_si64(o01)))),
            _mm_load_si128((const __m128i *)(pairs + _mm_cvtsi128_si64(o23))), 1);
        const __m256i B = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_load_si128((const __m128i *)(pairs + _mm_extract_epi64(o01, 1)))),
            _mm_load_si128((const __m128i *)(pairs + _mm_extract_epi64(o23, 1))), 1);
        const __m256d wi = _mm256_castsi256_pd(_mm256_unpacklo_epi64(A, B));
        const __m256i ki = _mm256_unpackhi_epi64(A, B);
        const __m256i rabs = _mm256_and_si256(_mm256_srli_epi64(r, 9), low52);
        // (double) rabs exactly (rabs < 2^52): the double 2^52 + rabs by its bits, minus 2^52
        const __m256d big = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(rabs, exp52)), two52);
        const __m256i sign = _mm256_slli_epi64(_mm256_and_si256(_mm256_srli_epi64(r, 8), one), 63);
        const __m256d x = _mm256_xor_pd(_mm256_mul_pd(big, wi), _mm256_castsi256_pd(sign));
        // rabs < ki (both below 2^63: the signed compare is the unsigned one)
#if defined(__AVX512VL__)
        const int ok = (int)_mm256_cmpgt_epi64_mask(ki, rabs);
#else
        const int ok = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(ki, rabs)));
#endif
        if (__builtin_expect(ok == 0xf, 1))
            store4(out + i, x);
        else
            reject_lanes(a, b, r, x, ok, out + i);
    }
    _mm256_store_si256((__m256i *)la, a);
    _mm256_store_si256((__m256i *)lb, b);
    for (int k = 0; k < LANES; k++) stream->lane[(j0 + k) % LANES] = Lane{la[k], lb[k]};
    if (i < n) fill_normal_lanes(stream, out + i, n - i, j0 + i);
}
#else
template <typename T>
inline void fill_normal(Stream *stream, T *out, int64_t n, int64_t j0) {
    fill_normal_lanes(stream, out, n, j0);
}
#endif

// ---------------------------------------------------------------- arithmetic

// Eigen's rational approximation of tanh in float (a few ulp), in plain arithmetic so that
// it vectorises; double uses libm.
inline float tanh_(float x) {
    const float c = 7.90531110763549805f;
    x = x < -c ? -c : (x > c ? c : x);
    const float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    p = p * x;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return p / q;
}
inline double tanh_(double x) { return std::tanh(x); }

// exp in float by Cephes' expf (range reduction by ln 2 in two parts, degree-5 polynomial;
// within 2 ulp), in plain arithmetic so that it vectorises; double uses libm.  Inputs here
// are logits minus their maximum (<= 0); below -87 the result is about 1e-38, not 0.
inline float exp_(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln 2)
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t e = ((int32_t)n + 127) << 23;
    float scale;
    std::memcpy(&scale, &e, sizeof scale);
    return p * scale;
}
inline double exp_(double x) { return std::exp(x); }

// Sixteen values of T as N GCC vectors of the build's native width (one AVX-512 register,
// two AVX ones, four SSE ones): lane k of a 16-lane sum is the same number in every build,
// and the operations are elementwise IEEE ones, so every build gives the same bits.
#if defined(__AVX512F__)
constexpr int NATIVE_BYTES = 64;
#elif defined(__AVX__)
constexpr int NATIVE_BYTES = 32;
#else
constexpr int NATIVE_BYTES = 16;
#endif

template <typename T>
struct Simd {
    typedef T vec __attribute__((vector_size(NATIVE_BYTES), aligned(sizeof(T)), may_alias));
    static constexpr int W = NATIVE_BYTES / (int)sizeof(T);  // values per native vector
    static constexpr int N = 16 / W;                          // native vectors per 16 lanes
};
template <typename T>
using vec = typename Simd<T>::vec;
template <typename T>
inline vec<T> ld(const T *p) { return *(const vec<T> *)p; }
template <typename T>
inline void st(T *p, vec<T> v) { *(vec<T> *)p = v; }

// A 16-lane sum's value: lane k holds the elements i = k (mod 16) of the whole blocks, the
// tail adds to lanes 0, 1, ..., then a fixed tree.
template <typename T>
inline T finish(const vec<T> *acc, const T *a, const T *b, int64_t n) {
    constexpr int N = Simd<T>::N, W = Simd<T>::W;
    T t[16] = {};
    for (int64_t k = 0; k < n; k++) t[k] = a[k] * b[k];
    vec<T> v[N];
    for (int k = 0; k < N; k++) v[k] = acc[k] + ld(t + k * W);
    // The tree t[k] += t[k + s] for s = 8, 4, 2, 1: across native vectors while s >= W, then
    // within one by shuffles (lanes past s are never read again).
    for (int m = N / 2; m >= 1; m /= 2)
        for (int k = 0; k < m; k++) v[k] += v[k + m];
    vec<T> x = v[0];
    if constexpr (W == 16) x += __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    if constexpr (W == 16) x += __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    if constexpr (W == 8) x += __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 0, 0, 0);
    if constexpr (W == 16) x += __builtin_shufflevector(x, x, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    if constexpr (W == 8) x += __builtin_shufflevector(x, x, 2, 3, 0, 0, 0, 0, 0, 0);
    if constexpr (W == 4) x += __builtin_shufflevector(x, x, 2, 3, 0, 0);
    if constexpr (W == 16) x += __builtin_shufflevector(x, x, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    if constexpr (W == 8) x += __builtin_shufflevector(x, x, 1, 0, 0, 0, 0, 0, 0, 0);
    if constexpr (W == 4) x += __builtin_shufflevector(x, x, 1, 0, 0, 0);
    if constexpr (W == 2) x += __builtin_shufflevector(x, x, 1, 0);
    return x[0];
}

template <typename T>
inline T dot(const T *a, const T *b, int64_t n) {
    constexpr int N = Simd<T>::N, W = Simd<T>::W;
    vec<T> acc[N] = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < N; k++) acc[k] += ld(a + i + k * W) * ld(b + i + k * W);
    return finish(acc, a + i, b + i, n - i);
}

template <typename T>
inline void axpy(T *y, T a, const T *x, int64_t n) {
    constexpr int W = Simd<T>::W;
    int64_t i = 0;
    for (; i + W <= n; i += W) st(y + i, ld(y + i) + a * ld(x + i));
    for (; i < n; i++) y[i] += a * x[i];
}

// z[o + g] = b[o + g] + dot(W[o + g, :], a) for the G rows from o (W row-major, in columns):
// their accumulator chains overlap; each row's value is dot()'s, bit for bit.
template <int G, typename T>
inline void rows_dot(const T *Wm, const T *bias, const T *a, T *z, int64_t o, int64_t in) {
    constexpr int N = Simd<T>::N, W = Simd<T>::W;
    vec<T> c[G][N] = {};
    int64_t i = 0;
    for (; i + 16 <= in; i += 16)
        for (int k = 0; k < N; k++) {
            const vec<T> x = ld(a + i + k * W);
            for (int g = 0; g < G; g++) c[g][k] += ld(Wm + (o + g) * in + i + k * W) * x;
        }
    for (int g = 0; g < G; g++) z[o + g] = bias[o + g] + finish(c[g], Wm + (o + g) * in + i, a + i, in - i);
}

// z = b + W a (W row-major, out x in), four rows at a time, then two, then one.
template <typename T>
inline void matvec(const T *Wm, const T *bias, const T *a, T *z, int64_t out, int64_t in) {
    int64_t o = 0;
    for (; o + 4 <= out; o += 4) rows_dot<4>(Wm, bias, a, z, o, in);
    for (; o + 2 <= out; o += 2) rows_dot<2>(Wm, bias, a, z, o, in);
    for (; o < out; o++) rows_dot<1>(Wm, bias, a, z, o, in);
}

// y[0:n] += sum over j < m of c[j * cs] * row(j)[0:n], in order of j for every element: the
// same bits as m axpy() calls, in register tiles of 64 values stored once.
template <typename T, typename Row>
inline void axpy_rows(T *y, const T *c, int64_t cs, Row row, int64_t m, int64_t n) {
    constexpr int W = Simd<T>::W, M = 64 / W;
    int64_t lo = 0;
    for (; lo + 64 <= n; lo += 64) {
        vec<T> acc[M];
        for (int k = 0; k < M; k++) acc[k] = ld(y + lo + k * W);
        for (int64_t j = 0; j < m; j++) {
            const T cj = c[j * cs];
            const T *x = row(j) + lo;
            for (int k = 0; k < M; k++) acc[k] += cj * ld(x + k * W);
        }
        for (int k = 0; k < M; k++) st(y + lo + k * W, acc[k]);
    }
    for (; lo + W <= n; lo += W) {
        vec<T> acc = ld(y + lo);
        for (int64_t j = 0; j < m; j++) acc += c[j * cs] * ld(row(j) + lo);
        st(y + lo, acc);
    }
    for (int64_t j = 0; j < m; j++) {
        const T cj = c[j * cs];
        const T *x = row(j);
        for (int64_t i = lo; i < n; i++) y[i] += cj * x[i];
    }
}

// b (cols x rows) = a (rows x cols) transposed: 4 x 4 blocks by shuffles (exact copies).
template <typename T>
void transpose(const T *a, T *b, int64_t rows, int64_t cols) {
    typedef T v4 __attribute__((vector_size(4 * sizeof(T)), aligned(sizeof(T)), may_alias));
    typedef int64_t i4 __attribute__((vector_size(4 * sizeof(int64_t))));
    typedef int32_t j4 __attribute__((vector_size(4 * sizeof(int32_t))));
    typedef typename std::conditional<sizeof(T) == 8, i4, j4>::type mask;
    const int64_t r4 = rows - rows % 4, c4 = cols - cols % 4;
    for (int64_t i0 = 0; i0 < r4; i0 += 16)  // 16 x 16 tiles: an output line is written at once
        for (int64_t j0 = 0; j0 < c4; j0 += 16)
            for (int64_t i = i0; i < (i0 + 16 < r4 ? i0 + 16 : r4); i += 4)
                for (int64_t j = j0; j < (j0 + 16 < c4 ? j0 + 16 : c4); j += 4) {
                    const T *r0 = a + i * cols + j;
                    const v4 x0 = *(const v4 *)r0, x1 = *(const v4 *)(r0 + cols), x2 = *(const v4 *)(r0 + 2 * cols),
                             x3 = *(const v4 *)(r0 + 3 * cols);
                    const v4 t0 = __builtin_shuffle(x0, x1, mask{0, 4, 1, 5}),
                             t1 = __builtin_shuffle(x0, x1, mask{2, 6, 3, 7}),
                             t2 = __builtin_shuffle(x2, x3, mask{0, 4, 1, 5}),
                             t3 = __builtin_shuffle(x2, x3, mask{2, 6, 3, 7});
                    T *o = b + j * rows + i;
                    *(v4 *)o = __builtin_shuffle(t0, t2, mask{0, 1, 4, 5});
                    *(v4 *)(o + rows) = __builtin_shuffle(t0, t2, mask{2, 3, 6, 7});
                    *(v4 *)(o + 2 * rows) = __builtin_shuffle(t1, t3, mask{0, 1, 4, 5});
                    *(v4 *)(o + 3 * rows) = __builtin_shuffle(t1, t3, mask{2, 3, 6, 7});
                }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = (i < r4 ? c4 : 0); j < cols; j++) b[j * rows + i] = a[i * cols + j];
}

// G[o, :] += sum over k < B of d[k * ds + o] * a(k)[0:n] for o < out (G row-major, out x n),
// each element summed over k in order: the same bits as out x B axpy() calls.  Blocks of four
// outputs by four native vectors, so that each loaded row feeds sixteen accumulators.
template <typename T, typename A>
inline void rank_updates(T *G, int64_t out, int64_t n, int64_t B, const T *d, int64_t ds, A a) {
    constexpr int W = Simd<T>::W, TILE = 4 * W;
    int64_t o = 0;
    for (; o + 4 <= out; o += 4) {
        T *g0 = G + o * n, *g1 = g0 + n, *g2 = g1 + n, *g3 = g2 + n;
        int64_t lo = 0;
        for (; lo + TILE <= n; lo += TILE) {
            vec<T> c0[4], c1[4], c2[4], c3[4];
            for (int v = 0; v < 4; v++) {
                c0[v] = ld(g0 + lo + v * W);
                c1[v] = ld(g1 + lo + v * W);
                c2[v] = ld(g2 + lo + v * W);
                c3[v] = ld(g3 + lo + v * W);
            }
            for (int64_t k = 0; k < B; k++) {
                const T *dk = d + k * ds + o, *ak = a(k) + lo;
                const T e0 = dk[0], e1 = dk[1], e2 = dk[2], e3 = dk[3];
                for (int v = 0; v < 4; v++) {
                    const vec<T> x = ld(ak + v * W);
                    c0[v] += e0 * x;
                    c1[v] += e1 * x;
                    c2[v] += e2 * x;
                    c3[v] += e3 * x;
                }
            }
            for (int v = 0; v < 4; v++) {
                st(g0 + lo + v * W, c0[v]);
                st(g1 + lo + v * W, c1[v]);
                st(g2 + lo + v * W, c2[v]);
                st(g3 + lo + v * W, c3[v]);
            }
        }
        for (; lo + W <= n; lo += W) {   // the columns past the last tile: a vector at a time
            vec<T> c0 = ld(g0 + lo), c1 = ld(g1 + lo), c2 = ld(g2 + lo), c3 = ld(g3 + lo);
            for (int64_t k = 0; k < B; k++) {
                const T *dk = d + k * ds + o;
                const vec<T> x = ld(a(k) + lo);
                c0 += dk[0] * x;
                c1 += dk[1] * x;
                c2 += dk[2] * x;
                c3 += dk[3] * x;
            }
            st(g0 + lo, c0);
            st(g1 + lo, c1);
            st(g2 + lo, c2);
            st(g3 + lo, c3);
        }
        for (int64_t k = 0; k < B; k++) {   // then a value at a time
            const T *dk = d + k * ds + o, *ak = a(k);
            for (int64_t i = lo; i < n; i++) {
                g0[i] += dk[0] * ak[i];
                g1[i] += dk[1] * ak[i];
                g2[i] += dk[2] * ak[i];
                g3[i] += dk[3] * ak[i];
            }
        }
    }
    for (; o < out; o++) axpy_rows(G + o * n, d + o, ds, a, B, n);  // the last rows one at a time
}

// A thread's scratch memory, kept between calls: a fresh block of this size every step
// costs more in page faults than the work it holds.
inline void *scratch(size_t bytes) {
    thread_local void *block = nullptr;
    thread_local size_t size = 0;
    if (bytes > size) {
        std::free(block);
        block = std::malloc(bytes);
        size = bytes;
    }
    return block;
}

// ---------------------------------------------------------------- DP-SGD

// The records every run samples from: a dense table (rows x d), or its CSR form.
template <typename T>
struct Table {
    int64_t rows;
    const T *x;            // (rows, d), or null with CSR
    const int64_t *ptr;    // CSR row pointers (rows + 1), or null
    const int64_t *col;
    const T *val;
    const int64_t *y;      // labels (rows)
    const T *xsq;          // ||x||^2 + 1 (rows): the first layer's weight and bias
};

// The network of one run: its parameter tensors (weight (out, in), bias (out) per layer),
// gradients and Adam moments, as pointers into the run-batched (R, ...) tensors.
template <typename T>
struct Net {
    int L;
    const int64_t *sizes;  // (L + 1): d, hidden..., K
    T *W[16], *b[16], *G[16], *gb[16], *mW[16], *mb[16], *vW[16], *vb[16];

    Net(int L_, const int64_t *sizes_, T *const *params, T *const *grads, T *const *m, T *const *v, int64_t r)
        : L(L_), sizes(sizes_) {
        for (int l = 0; l < L; l++) {
            const int64_t nw = sizes[l + 1] * sizes[l], nb = sizes[l + 1];
            W[l] = params[2 * l] + r * nw;
            b[l] = params[2 * l + 1] + r * nb;
            G[l] = grads[2 * l] + r * nw;
            gb[l] = grads[2 * l + 1] + r * nb;
            mW[l] = m ? m[2 * l] + r * nw : nullptr;
            mb[l] = m ? m[2 * l + 1] + r * nb : nullptr;
            vW[l] = v ? v[2 * l] + r * nw : nullptr;
            vb[l] = v ? v[2 * l + 1] + r * nb : nullptr;
        }
    }
    int tensors() const { return 2 * L; }
    int64_t size(int t) const { return t % 2 ? sizes[t / 2 + 1] : sizes[t / 2 + 1] * sizes[t / 2]; }
    T *param(int t) const { return t % 2 ? b[t / 2] : W[t / 2]; }
    T *grad(int t) const { return t % 2 ? gb[t / 2] : G[t / 2]; }
    T *mom1(int t) const { return t % 2 ? mb[t / 2] : mW[t / 2]; }
    T *mom2(int t) const { return t % 2 ? vb[t / 2] : vW[t / 2]; }
};

// One run's gradients (overwritten) = scale * the sum over its records with weight[i] != 0,
// in record order, of the clipped per-example gradients.  First every sampled record's
// forward and backward pass (keeping its activations and its deltas times its clip
// factor), then each gradient element summed over the records in order.
template <typename T>
void clipped_sum_run(const Net<T> &net, const Table<T> &tab, const uint8_t *weight, T clip, T scale) {
    const int L = net.L;
    const int64_t *sizes = net.sizes;
    const T eps = (T)1e-6;
    const bool sparse = tab.ptr != nullptr;
    const int64_t d0 = sizes[0], h0 = sizes[1], rows = tab.rows;
    int64_t off[17];  // where layer l's outputs start in a record's slice (L <= 16)
    off[0] = 0;
    for (int l = 1; l <= L; l++) off[l] = off[l - 1] + sizes[l];
    const int64_t total = off[L];
    const int64_t wide = sparse ? d0 * h0 : 0;
    // A sparse first layer's gradient is summed column by column: per column its entries of
    // the picked records (their rank in the batch and value), in record order.
    const int64_t nnz = sparse ? (tab.ptr[rows] + 1) / 2 * 2 : 0, ncols = sparse ? d0 + 1 : 0;  // even: int64s follow
    T *acts = (T *)scratch(sizeof(T) * (2 * rows * total + 2 * wide + nnz) +
                           sizeof(int64_t) * (rows + 2 * ncols + nnz));
    T *deltas = acts + rows * total, *w0t = deltas + rows * total, *g0t = w0t + wide, *ent_val = g0t + wide;
    int64_t *picked = (int64_t *)(ent_val + nnz), *col_start = picked + rows, *col_next = col_start + ncols,
            *ent_rank = col_next + ncols;

    if (sparse) transpose(net.W[0], w0t, h0, d0);
    int64_t B = 0;
    for (int64_t i = 0; i < rows; i++) {
        if (!weight[i]) continue;
        picked[B] = i;
        T *act = acts + B * total, *del = deltas + B * total;
        B++;
        // Forward.
        const T *xi = sparse ? nullptr : tab.x + i * d0;
        for (int l = 0; l < L; l++) {
            const int64_t in = sizes[l], out = sizes[l + 1];
            T *z = act + off[l];
            if (l == 0 && sparse) {
                const int64_t *cols = tab.col + tab.ptr[i];
                std::memcpy(z, net.b[0], sizeof(T) * out);
                axpy_rows(z, tab.val + tab.ptr[i], 1, [&](int64_t k) { return w0t + cols[k] * out; },
                          tab.ptr[i + 1] - tab.ptr[i], out);
            } else {
                matvec(net.W[l], net.b[l], l == 0 ? xi : act + off[l - 1], z, out, in);
            }
            if (l < L - 1)
                for (int64_t o = 0; o < out; o++) z[o] = tanh_(z[o]);
        }
        // Softmax cross-entropy: delta = softmax(logits) - one_hot(y).
        const int64_t K = sizes[L];
        const T *p = act + off[L - 1];
        T *dl = del + off[L - 1];
        T mx = p[0];
        for (int64_t k = 1; k < K; k++) mx = p[k] > mx ? p[k] : mx;
        for (int64_t k = 0; k < K; k++) dl[k] = exp_(p[k] - mx);
        T sum = 0;
        for (int64_t k = 0; k < K; k++) sum += dl[k];
        for (int64_t k = 0; k < K; k++) dl[k] = dl[k] / sum;
        dl[tab.y[i]] += (T)-1;
        // Backward, and the squared per-example norm over all parameters:
        // sum_l ||delta_l||^2 (||a_{l-1}||^2 + 1).
        T sq = 0;
        for (int l = L - 1; l >= 0; l--) {
            const int64_t in = sizes[l], out = sizes[l + 1];
            const T *d = del + off[l];
            if (l > 0) {
                const T *a = act + off[l - 1], *Wl = net.W[l];
                T *dprev = del + off[l - 1];
                std::memset(dprev, 0, sizeof(T) * in);
                axpy_rows(dprev, d, 1, [&](int64_t o) { return Wl + o * in; }, out, in);
                for (int64_t j = 0; j < in; j++) dprev[j] *= (T)1 - a[j] * a[j];
                sq += dot(d, d, out) * (dot(a, a, in) + (T)1);
            } else {
                sq += dot(d, d, out) * tab.xsq[i];
            }
        }
        T c = clip / (std::sqrt(sq) + eps);
        c = (c > (T)1 ? (T)1 : c) * scale;
        for (int64_t k = 0; k < total; k++) del[k] *= c;
    }
    // Gradients: G_l[o, :] = sum over the records of (c delta_l[o]) a_{l-1}, in order.
    const T one = 1;
    for (int l = 0; l < L; l++) {
        const int64_t in = sizes[l], out = sizes[l + 1];
        T *g = net.G[l], *gbl = net.gb[l];
        const T *dl = deltas + off[l];
        std::memset(gbl, 0, sizeof(T) * out);
        axpy_rows(gbl, &one, 0, [&](int64_t k) { return dl + k * total; }, B, out);
        if (l == 0 && sparse) {
            // g0t[c, :] = sum over the picked records k with an entry (c, v), in order, of
            // v (c delta_0 of k): per element the additions of axpy() record after record
            // into zeros, a column's row of g0t summed in registers and stored once.
            std::memset(col_start, 0, sizeof(int64_t) * ncols);
            for (int64_t k = 0; k < B; k++)
                for (int64_t q = tab.ptr[picked[k]]; q < tab.ptr[picked[k] + 1]; q++) col_start[tab.col[q] + 1]++;
            for (int64_t c = 0; c < d0; c++) col_start[c + 1] += col_start[c];
            std::memcpy(col_next, col_start, sizeof(int64_t) * ncols);
            for (int64_t k = 0; k < B; k++)
                for (int64_t q = tab.ptr[picked[k]]; q < tab.ptr[picked[k] + 1]; q++) {
                    const int64_t e = col_next[tab.col[q]]++;
                    ent_rank[e] = k;
                    ent_val[e] = tab.val[q];
                }
            for (int64_t c = 0; c < d0; c++) {
                T *row = g0t + c * out;
                const int64_t e0 = col_start[c];
                std::memset(row, 0, sizeof(T) * out);
                axpy_rows(row, ent_val + e0, 1, [&](int64_t j) { return dl + ent_rank[e0 + j] * total; },
                          col_start[c + 1] - e0, out);
            }
            transpose(g0t, g, d0, h0);
            continue;
        }
        std::memset(g, 0, sizeof(T) * out * in);
        if (l == 0) {
            rank_updates(g, out, in, B, dl, total, [&](int64_t k) { return tab.x + picked[k] * d0; });
        } else {
            const T *a = acts + off[l - 1];
            rank_updates(g, out, in, B, dl, total, [&](int64_t k) { return a + k * total; });
        }
    }
}

// A dense linear head's middle, for runs [r0, r1): z (rows, R, K) holds x W_r^T for every
// record and run; add the bias, and replace each (record, run) row by its softmax minus the
// one-hot label times its clip factor, weight and scale; gb[r] = the sum of those rows over
// the records, in order.  (The products around it are matrix products.)  A record's values
// of these runs are turned class-major (t[k][r]), so that every step, the per-run reductions
// over the classes too, is one vectorised pass over the runs; per (record, run) the
// operations and their order are those of clipped_sum_run's softmax and clipping.
template <typename T>
void softmax_clip(int64_t r0, int64_t r1, int64_t rows, int64_t R, int64_t K, T *z, const T *b, const int64_t *y,
                  const T *xsq, const T *weight, T clip, T scale, T *gb) {
    const T eps = (T)1e-6;
    const int64_t nr = r1 - r0, n = nr * K;   // a record's values of these runs: contiguous in z
    T *__restrict t = (T *)scratch(sizeof(T) * (2 * n + 2 * nr));
    T *__restrict gt = t + n, *__restrict acc = gt + n, *__restrict f = acc + nr;
    const T *bb = b + r0 * K;
    for (int64_t j = 0; j < n; j++) gt[j] = 0;
    for (int64_t i = 0; i < rows; i++) {
        T *p = z + (i * R + r0) * K;
        for (int64_t r = 0; r < nr; r++)
            for (int64_t k = 0; k < K; k++) t[k * nr + r] = p[r * K + k] + bb[r * K + k];
        for (int64_t r = 0; r < nr; r++) acc[r] = t[r];   // the maximum over the classes
        for (int64_t k = 1; k < K; k++) {
            const T *tk = t + k * nr;
            for (int64_t r = 0; r < nr; r++) acc[r] = tk[r] > acc[r] ? tk[r] : acc[r];
        }
        for (int64_t k = 0; k < K; k++) {
            T *tk = t + k * nr;
            for (int64_t r = 0; r < nr; r++) tk[r] = exp_(tk[r] - acc[r]);
        }
        for (int64_t r = 0; r < nr; r++) acc[r] = 0;      // the sum over the classes
        for (int64_t k = 0; k < K; k++) {
            const T *tk = t + k * nr;
            for (int64_t r = 0; r < nr; r++) acc[r] += tk[r];
        }
        for (int64_t k = 0; k < K; k++) {
            T *tk = t + k * nr;
            for (int64_t r = 0; r < nr; r++) tk[r] = tk[r] / acc[r];
        }
        {
            T *ty = t + y[i] * nr;
            for (int64_t r = 0; r < nr; r++) ty[r] += (T)-1;
        }
        for (int64_t r = 0; r < nr; r++) acc[r] = 0;      // the squared norm over the classes
        for (int64_t k = 0; k < K; k++) {
            const T *tk = t + k * nr;
            for (int64_t r = 0; r < nr; r++) acc[r] += tk[r] * tk[r];
        }
        const T xs = xsq[i];
        for (int64_t r = 0; r < nr; r++) f[r] = weight[(r0 + r) * rows + i];
        for (int64_t r = 0; r < nr; r++) {
            const T sq = acc[r] * xs;
            const T c = clip / (std::sqrt(sq) + eps);
            f[r] = (c > (T)1 ? (T)1 : c) * f[r] * scale;
        }
        for (int64_t k = 0; k < K; k++) {
            T *tk = t + k * nr, *gk = gt + k * nr;
            for (int64_t r = 0; r < nr; r++) {
                tk[r] *= f[r];
                gk[r] += tk[r];
            }
        }
        for (int64_t r = 0; r < nr; r++)
            for (int64_t k = 0; k < K; k++) p[r * K + k] = t[k * nr + r];
    }
    T *g = gb + r0 * K;
    for (int64_t r = 0; r < nr; r++)
        for (int64_t k = 0; k < K; k++) g[r * K + k] = gt[k * nr + r];
}

// The optimiser: SGD (p -= lr g) or Adam (torch.optim.Adam's update at step t).
template <typename T>
struct Optimiser {
    int adam;
    double lr, beta1, beta2, eps;
};

// One run's noise and optimiser step: its P noise values in parameter order (tensor by
// tensor), g += std_scale * noise, then the update.  Noise is drawn a block at a time so
// that the update itself vectorises.
template <typename T>
void noise_step_run(const Net<T> &net, Stream *st, T std_scale, const Optimiser<T> &opt, int64_t step) {
    constexpr int64_t BLOCK = 512;
    T z[BLOCK];
    const T s = std_scale, neg_lr = (T)-opt.lr;
    const double bc1 = 1.0 - std::pow(opt.beta1, (double)step), bc2 = 1.0 - std::pow(opt.beta2, (double)step);
    const T neg_step = (T)(-opt.lr / bc1), bc2_sqrt = (T)std::sqrt(bc2), w1 = (T)(1.0 - opt.beta1),
            b2 = (T)opt.beta2, w2 = (T)(1.0 - opt.beta2), e = (T)opt.eps;
    int64_t j0 = 0;  // position in the run's draw of P values
    for (int t = 0; t < net.tensors(); t++) {
        const int64_t n = net.size(t);
        T *pt = net.param(t), *gt = net.grad(t), *mt = net.mom1(t), *vt = net.mom2(t);
        for (int64_t lo = 0; lo < n; lo += BLOCK) {
            const int64_t len = n - lo < BLOCK ? n - lo : BLOCK;
            fill_normal(st, z, len, j0);
            j0 += len;
            T *p = pt + lo, *g = gt + lo;
            if (!opt.adam) {
                for (int64_t j = 0; j < len; j++) {
                    g[j] += s * z[j];
                    p[j] += neg_lr * g[j];
                }
                continue;
            }
            T *mm = mt + lo, *vv = vt + lo;
            for (int64_t j = 0; j < len; j++) {
                const T gj = g[j] + s * z[j];
                g[j] = gj;
                mm[j] += w1 * (gj - mm[j]);
                vv[j] = vv[j] * b2 + w2 * gj * gj;
                p[j] += neg_step * (mm[j] / (std::sqrt(vv[j]) / bc2_sqrt + e));
            }
        }
    }
}

// Uniforms on [0, 1) with 24 bits: value i of a draw from lane i % LANES.
inline void fill_uniform(Stream *st, float *o, int64_t n) {
    Lane l[LANES];
    for (int k = 0; k < LANES; k++) l[k] = st->lane[k];
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) o[i + k] = (float)(next_u64(l[k]) >> 40) * 0x1.0p-24f;
    for (int k = 0; i < n; i++, k++) o[i] = (float)(next_u64(l[k]) >> 40) * 0x1.0p-24f;
    for (int k = 0; k < LANES; k++) st->lane[k] = l[k];
}

// What a run's training needs beyond its network: the audit's records and canaries, the
// DP settings, and where to keep its parameters at the checkpoints.
template <typename T>
struct Audit {
    Table<T> tab;
    int64_t n, mc;               // data records; canaries per run (records n .. n + mc - 1)
    int input;                   // canaries are input records: table rows n + 2i (z), n + 2i + 1 (z')
    const uint8_t *bits;         // (R, mc): 1 = D (z)
    int draw;                    // 0: every record in every batch, no uniforms drawn
    float q, qc;                 // sampling rates of the data and of the canary records
    T clip, scale, std_scale;
    int64_t steps;
    int64_t ng;                  // gradient canary entries: canary, flat column, value per run
    const int64_t *g_canary, *g_col;
    const T *g_val;              // (R, ng), by the run's bit and times scale
    int64_t ns;                  // checkpoints (ascending step counts) and snapshots (ns, R, P)
    const int64_t *snap_steps;
    T *snap;
    int64_t R, P;
};

// Train run r for all its steps, one step after another, so that its parameters, gradients
// and optimiser state stay in the core's cache; its parameters at each checkpoint are copied
// into the snapshots.
template <typename T>
void train_run(const Net<T> &net, const Audit<T> &a, const Optimiser<T> &opt, Stream *mask_st,
               Stream *noise_st, int64_t r) {
    const int64_t n_records = a.n + a.mc;
    float *u = (float *)std::malloc(sizeof(float) * (n_records ? n_records : 1));
    uint8_t *weight = (uint8_t *)std::malloc(a.tab.rows ? a.tab.rows : 1);
    uint8_t *sampled = (uint8_t *)std::malloc(a.mc ? a.mc : 1);
    const uint8_t *bits = a.bits + r * a.mc;
    int64_t next = 0;
    auto snapshot = [&](int64_t t) {
        while (next < a.ns && a.snap_steps[next] == t) {
            T *dst = a.snap + (next * a.R + r) * a.P;
            for (int k = 0; k < net.tensors(); k++) {
                std::memcpy(dst, net.param(k), sizeof(T) * net.size(k));
                dst += net.size(k);
            }
            next++;
        }
    };
    snapshot(0);
    for (int64_t t = 0; t < a.steps; t++) {
        if (a.draw) fill_uniform(mask_st, u, n_records);
        for (int64_t i = 0; i < a.n; i++) weight[i] = !a.draw || u[i] < a.q;
        for (int64_t i = 0; i < a.mc; i++) {
            sampled[i] = !a.draw || u[a.n + i] < a.qc;
            if (a.input) {
                weight[a.n + 2 * i] = sampled[i] && bits[i];
                weight[a.n + 2 * i + 1] = sampled[i] && !bits[i];
            }
        }
        clipped_sum_run(net, a.tab, weight, a.clip, a.scale);
        for (int64_t j = 0; j < a.ng; j++) {
            if (!sampled[a.g_canary[j]]) continue;
            int64_t col = a.g_col[j], k = 0;
            while (col >= net.size(k)) col -= net.size(k++);
            net.grad(k)[col] += a.g_val[r * a.ng + j];
        }
        noise_step_run(net, noise_st, a.std_scale, opt, t + 1);
        snapshot(t + 1);
    }
    std::free(u);
    std::free(weight);
    std::free(sampled);
}

}  // namespace

extern "C" {

// ---- random streams (a Stream is LANES x 2 uint64 words)
int sa_stream_words() { return (int)(sizeof(Stream) / sizeof(uint64_t)); }

void sa_seed(Stream *st, uint64_t seed) {
    for (int k = 0; k < LANES; k++) {
        uint64_t w[2];
        for (int i = 0; i < 2; i++) {  // splitmix64
            seed += 0x9e3779b97f4a7c15ULL;
            uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            w[i] = z ^ (z >> 31);
        }
        st->lane[k] = Lane{w[0], w[1]};
    }
}

// Uniforms on [0, 1) with 24 bits, for runs [r0, r1) (row r of out, n each; stream r*stride).
void sa_uniform_f32(int64_t r0, int64_t r1, Stream *streams, int64_t stride, float *out, int64_t n) {
    for (int64_t r = r0; r < r1; r++) fill_uniform(streams + r * stride, out + r * n, n);
}

void sa_normal_f64(int64_t r0, int64_t r1, Stream *streams, int64_t stride, double *out, int64_t n) {
    for (int64_t r = r0; r < r1; r++) fill_normal(streams + r * stride, out + r * n, n, 0);
}

// float32 normals: the double draws, rounded.
void sa_normal_f32(int64_t r0, int64_t r1, Stream *streams, int64_t stride, float *out, int64_t n) {
    for (int64_t r = r0; r < r1; r++) fill_normal(streams + r * stride, out + r * n, n, 0);
}

// The draws of `steps` training steps of runs [r0, r1) and nothing else, as train_run makes
// them (uniforms from stream 2r, P normals a block at a time from stream 2r + 1): what the
// randomness of a training costs (subaudit bench).
void sa_draw_only_f32(int64_t r0, int64_t r1, Stream *streams, int64_t n_uniforms, int64_t P, int64_t steps) {
    float u[4096], z[512];
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < steps; t++) {
            for (int64_t lo = 0; lo < n_uniforms; lo += 4096)
                fill_uniform(streams + 2 * r, u, n_uniforms - lo < 4096 ? n_uniforms - lo : 4096);
            for (int64_t lo = 0; lo < P; lo += 512)
                fill_normal(streams + 2 * r + 1, z, P - lo < 512 ? P - lo : 512, lo);
        }
}

// ---- the C ABI's argument structures, filled by subaudit.engine.kernels through ctypes.
// Integers are int64 and reals double, so the layout has no padding to get wrong; the
// binding checks the sizes against sa_struct_sizes when it loads the library.

// A chunk's networks: 2L run-batched tensors (weight (R, out, in), bias (R, out) per layer)
// of parameters, gradients and, for Adam, first and second moments (else null).
struct SaNet {
    int64_t layers;
    const int64_t *sizes;  // L + 1: d, hidden..., K
    void *const *params, *const *grads, *const *m, *const *v;
};

// The records every run samples from: dense rows (rows x d) or CSR (ptr, col, val).
struct SaTable {
    int64_t rows;
    const void *x;
    const int64_t *ptr, *col;
    const void *val;
    const int64_t *y;
    const void *xsq;  // ||x||^2 + 1 per row
};

struct SaOptimiser {
    int64_t adam;  // 0: SGD, 1: Adam
    double lr, beta1, beta2, eps;
};

// What whole trainings need beyond the network and the records (see Audit).
struct SaAudit {
    int64_t n, mc, input;
    const uint8_t *bits;
    int64_t draw;
    double q, qc, clip, scale, std_scale;
    int64_t steps, ng;
    const int64_t *g_canary, *g_col;
    const void *g_val;
    int64_t ns;
    const int64_t *snap_steps;
    void *snap;
    int64_t R, P;
};

void sa_struct_sizes(int64_t *out) {
    out[0] = sizeof(SaNet);
    out[1] = sizeof(SaTable);
    out[2] = sizeof(SaOptimiser);
    out[3] = sizeof(SaAudit);
}

}  // extern "C"

namespace {

template <typename T>
Net<T> net_of(const SaNet *a, int64_t r) {
    return Net<T>((int)a->layers, a->sizes, (T *const *)a->params, (T *const *)a->grads, (T *const *)a->m,
                  (T *const *)a->v, r);
}

template <typename T>
Table<T> table_of(const SaTable *t) {
    return Table<T>{t->rows, (const T *)t->x, t->ptr, t->col, (const T *)t->val, t->y, (const T *)t->xsq};
}

template <typename T>
Optimiser<T> optimiser_of(const SaOptimiser *o) {
    return Optimiser<T>{(int)o->adam, o->lr, o->beta1, o->beta2, o->eps};
}

template <typename T>
void clipped_sum_runs(int64_t r0, int64_t r1, const SaNet *net, const SaTable *tab, const uint8_t *weight,
                      double clip, double scale) {
    const Table<T> t = table_of<T>(tab);
    for (int64_t r = r0; r < r1; r++)
        clipped_sum_run(net_of<T>(net, r), t, weight + r * tab->rows, (T)clip, (T)scale);
}

template <typename T>
void noise_step_runs(int64_t r0, int64_t r1, const SaNet *net, Stream *streams, int64_t stride, double std_scale,
                     const SaOptimiser *opt, int64_t step) {
    const Optimiser<T> o = optimiser_of<T>(opt);
    for (int64_t r = r0; r < r1; r++) noise_step_run(net_of<T>(net, r), streams + r * stride, (T)std_scale, o, step);
}

template <typename T>
void train_runs(int64_t r0, int64_t r1, const SaNet *net, const SaTable *tab, const SaOptimiser *opt,
                const SaAudit *a, Stream *streams) {
    const Audit<T> audit{table_of<T>(tab), a->n, a->mc, (int)a->input, a->bits, (int)a->draw, (float)a->q,
                         (float)a->qc, (T)a->clip, (T)a->scale, (T)a->std_scale, a->steps, a->ng, a->g_canary,
                         a->g_col, (const T *)a->g_val, a->ns, a->snap_steps, (T *)a->snap, a->R, a->P};
    const Optimiser<T> o = optimiser_of<T>(opt);
    for (int64_t r = r0; r < r1; r++)
        train_run(net_of<T>(net, r), audit, o, streams + 2 * r, streams + 2 * r + 1, r);
}

}  // namespace

extern "C" {

// ---- clipped per-example gradient sums of runs [r0, r1)
void sa_clipped_sum_f32(int64_t r0, int64_t r1, const SaNet *net, const SaTable *tab, const uint8_t *weight,
                        double clip, double scale) {
    clipped_sum_runs<float>(r0, r1, net, tab, weight, clip, scale);
}
void sa_clipped_sum_f64(int64_t r0, int64_t r1, const SaNet *net, const SaTable *tab, const uint8_t *weight,
                        double clip, double scale) {
    clipped_sum_runs<double>(r0, r1, net, tab, weight, clip, scale);
}

// ---- a dense linear head's softmax, clipping and bias sums, runs [r0, r1)
#define SA_SOFTMAX_CLIP(NAME, T)                                                                          \
    void NAME(int64_t r0, int64_t r1, int64_t rows, int64_t R, int64_t K, T *z, const T *b,               \
              const int64_t *y, const T *xsq, const T *weight, double clip, double scale, T *gb) {        \
        softmax_clip<T>(r0, r1, rows, R, K, z, b, y, xsq, weight, (T)clip, (T)scale, gb);                 \
    }
SA_SOFTMAX_CLIP(sa_softmax_clip_f32, float)
SA_SOFTMAX_CLIP(sa_softmax_clip_f64, double)

// ---- noise and optimiser step of runs [r0, r1) (noise stream of run r: streams[r * stride])
void sa_noise_step_f32(int64_t r0, int64_t r1, const SaNet *net, Stream *streams, int64_t stride,
                       double std_scale, const SaOptimiser *opt, int64_t step) {
    noise_step_runs<float>(r0, r1, net, streams, stride, std_scale, opt, step);
}
void sa_noise_step_f64(int64_t r0, int64_t r1, const SaNet *net, Stream *streams, int64_t stride,
                       double std_scale, const SaOptimiser *opt, int64_t step) {
    noise_step_runs<double>(r0, r1, net, streams, stride, std_scale, opt, step);
}

// ---- whole trainings of runs [r0, r1), one run after another (streams: (R, 2) mask, noise)
void sa_train_runs_f32(int64_t r0, int64_t r1, const SaNet *net, const SaTable *tab, const SaOptimiser *opt,
                       const SaAudit *audit, Stream *streams) {
    train_runs<float>(r0, r1, net, tab, opt, audit, streams);
}
void sa_train_runs_f64(int64_t r0, int64_t r1, const SaNet *net, const SaTable *tab, const SaOptimiser *opt,
                       const SaAudit *audit, Stream *streams) {
    train_runs<double>(r0, r1, net, tab, opt, audit, streams);
}

}  // extern "C"
