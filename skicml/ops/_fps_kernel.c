/*
 * C kernel of skicml::farthest_point_sample (see skicml/ops/_point_cloud.py).
 *
 * Plain C99 with no Python or torch headers: _point_cloud.py compiles it on
 * first use with the system compiler (-ffp-contract=off) and calls it through
 * ctypes, once per slice of clouds. The arithmetic is the reference's, in the
 * same order and the same dtype: d = (dx*dx + dy*dy) + dz*dz, the running
 * minimum, then the first maximum (lowest index on ties); so the indices are
 * the reference's bit for bit. No fused multiply-add may change a rounding,
 * hence -ffp-contract=off.
 *
 * Inputs are validated in Python: points is (n_clouds, n_points, 3)
 * contiguous, starts are in [0, n_points), n_samples <= n_points.
 *
 * Each step is two passes over the cloud: the distance update with the
 * running maximum, which the compiler vectorises, then the search for the
 * first index holding that maximum (which stops early). Keeping the
 * coordinates as three separate arrays (structure of arrays) lets the first
 * pass load four points per instruction. Its max reduction vectorises only
 * under -ffinite-math-only -fno-signed-zeros; both are safe here: no
 * infinity is ever formed (the first step stores the distances themselves,
 * not min(inf, d)), coordinates are finite (the op's contract), and squared
 * distances are never -0.
 */

#include <stdint.h>
#include <stdlib.h>

#define DEFINE_FPS(NAME, REAL)                                                    \
int64_t NAME(int64_t n_clouds, int64_t n_points, int64_t n_samples,              \
             const REAL *points, const int64_t *starts, int64_t *out)            \
{                                                                                 \
    REAL *work = (REAL *)malloc(4 * (size_t)n_points * sizeof(REAL));             \
    REAL *x, *y, *z, *dist;                                                       \
    int64_t c, i, j;                                                              \
    if (work == NULL && n_points > 0)                                             \
        return -1;                                                                \
    x = work;                                                                     \
    y = work + n_points;                                                          \
    z = work + 2 * n_points;                                                      \
    dist = work + 3 * n_points;                                                   \
    for (c = 0; c < n_clouds; ++c) {                                              \
        const REAL *p = points + c * n_points * 3;                                \
        int64_t *picked = out + c * n_samples;                                    \
        int64_t current = starts[c];                                              \
        for (j = 0; j < n_points; ++j) {                                          \
            x[j] = p[3 * j];                                                      \
            y[j] = p[3 * j + 1];                                                  \
            z[j] = p[3 * j + 2];                                                  \
        }                                                                         \
        for (i = 0; i < n_samples; ++i) {                                         \
            const REAL cx = x[current], cy = y[current], cz = z[current];         \
            REAL best = (REAL)0;                                                  \
            picked[i] = current;                                                  \
            if (i == 0) {                                                         \
                /* min(inf, d) = d: the first step needs no infinity. */          \
                for (j = 0; j < n_points; ++j) {                                  \
                    const REAL dx = x[j] - cx, dy = y[j] - cy, dz = z[j] - cz;    \
                    const REAL d = (dx * dx + dy * dy) + dz * dz;                 \
                    dist[j] = d;                                                  \
                    best = d > best ? d : best;                                   \
                }                                                                 \
            } else {                                                              \
                for (j = 0; j < n_points; ++j) {                                  \
                    const REAL dx = x[j] - cx, dy = y[j] - cy, dz = z[j] - cz;    \
                    const REAL d = (dx * dx + dy * dy) + dz * dz;                 \
                    const REAL m = d < dist[j] ? d : dist[j];                     \
                    dist[j] = m;                                                  \
                    best = m > best ? m : best;                                   \
                }                                                                 \
            }                                                                     \
            /* The reference's argmax: the first index holding the maximum. */    \
            for (j = 0; j < n_points && dist[j] != best; ++j) {                   \
            }                                                                     \
            current = j < n_points ? j : 0;                                       \
        }                                                                         \
    }                                                                             \
    free(work);                                                                   \
    return 0;                                                                     \
}

DEFINE_FPS(fps_float32, float)
DEFINE_FPS(fps_float64, double)
