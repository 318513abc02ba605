/* norm_tree_ref.h — the norms' order of summation written plainly (one
 * loop per lane, no fast paths), as core/src/device/host_kernels.c and the
 * cuda kernels (ms_cuda_kernels.cu, "the norms") must both follow it: the
 * CI test holds the host kernel against it bit for bit (test_memspace.c),
 * tools/gpu-check.sh the device.
 *
 * Tiles of 4096 elements; in tile t, lane j (0..255) folds elements
 * t*4096 + j + 256*k, k = 0..15, in k order into an f64 starting at 0;
 * the 256 lane values meet in a binary tree (stride 128, 64, ..., 1); the
 * tile values are the next level's input, reduced alike down to one value;
 * then acc + that value (acc combined last). inf: max with NaN winning in
 * place of the sum, |g| in place of g^2. */
#ifndef TPX_TESTS_NORM_TREE_REF_H
#define TPX_TESTS_NORM_TREE_REF_H

#include <math.h>
#include <stdlib.h>

#define NTR_LANES 256
#define NTR_PER 16
#define NTR_TILE ((size_t)NTR_LANES * NTR_PER)

static inline double ntr_max(double a, double v) {
  return (v > a || isnan(v)) ? v : a;
}

/* One level: out[t] = tile t of in (level 0: `g` f32, else doubles). */
static inline void ntr_level(const float *g, const double *in, size_t n,
                             int inf, double *out) {
  double part[NTR_LANES];
  for (size_t t = 0; t * NTR_TILE < n; t++) {
    for (int j = 0; j < NTR_LANES; j++) {
      double a = 0.0;
      for (int k = 0; k < NTR_PER; k++) {
        size_t i = t * NTR_TILE + (size_t)k * NTR_LANES + (size_t)j;
        if (i >= n)
          break;
        double v = g ? (double)g[i] : in[i];
        if (inf)
          a = ntr_max(a, g ? fabs(v) : v);
        else
          a = g ? a + v * v : a + v;
      }
      part[j] = a;
    }
    for (int s = NTR_LANES / 2; s > 0; s >>= 1)
      for (int j = 0; j < s; j++)
        part[j] = inf ? ntr_max(part[j], part[j + s]) : part[j] + part[j + s];
    out[t] = part[0];
  }
}

/* acc combined with the tree over g[0..n) (n > 0); NAN if out of memory. */
static inline double tpx__norm_tree_ref(double acc, const float *g, size_t n,
                                        int inf) {
  size_t m = (n + NTR_TILE - 1) / NTR_TILE;
  double *a = malloc(m * sizeof *a), *b = malloc(m * sizeof *b);
  if (!a || !b) {
    free(a), free(b);
    return NAN;
  }
  ntr_level(g, NULL, n, inf, a);
  while (m > 1) {
    size_t next = (m + NTR_TILE - 1) / NTR_TILE;
    ntr_level(NULL, a, m, inf, b);
    double *t = a;
    a = b, b = t, m = next;
  }
  double total = a[0];
  free(a), free(b);
  return inf ? ntr_max(acc, total) : acc + total;
}

#endif /* TPX_TESTS_NORM_TREE_REF_H */
