/* am_inkling_vit.c — Inkling's vision tower (InklingForConditionalGeneration,
 * model.vision_tower) as NeMo Automodel 0.7.0 builds it: a hierarchical MLP
 * whose stages fold time and space into channels. Its layer sizes come from
 * a plan of (time, height, width, channels) scales that Automodel computes
 * at construction from vision_config's patch_size, temporal_patch_size,
 * num_channels and num_hidden_layers: the prime factors of the patch sizes
 * give the candidate scales, and each stage boundary takes the scale whose
 * log-reduction is nearest an even split of log(patch elements) (with fewer
 * stages than scales, the cheapest increasing choice). This file computes
 * that plan in float32, as torch does, and declares encoder_layers.N
 * (projection, and a layer_norm on every stage but the last, whose output is
 * the text width) and final_norm; the checkpoint's names for them
 * (model.visual.layers.linear_N / norm_N) are declared as sources. */
#include <math.h>
#include <stddef.h>

#include "am.h"

#define MAXS 64 /* scales: 1 + prime factors of two integers */

typedef struct vit_plan {
  int64_t s[MAXS][4];
  size_t n;
} vit_plan;

static size_t prime_factors(int64_t v, int64_t *f, size_t max) {
  size_t n = 0;
  int64_t d;
  while (v % 2 == 0 && n < max) {
    f[n++] = 2;
    v /= 2;
  }
  for (d = 3; d * d <= v && n < max; d += 2)
    while (v % d == 0 && n < max) {
      f[n++] = d;
      v /= d;
    }
  if (v > 1 && n < max)
    f[n++] = v;
  return n;
}

/* The candidate scales: the base, the spatial ones, the temporal ones. */
static int candidates(int64_t patch, int64_t tps, int64_t chans, vit_plan *p) {
  int64_t f[MAXS], s = 1, t = 1, last;
  size_t n, i;
  p->n = 0;
  p->s[p->n][0] = p->s[p->n][1] = p->s[p->n][2] = 1;
  p->s[p->n++][3] = chans;
  n = prime_factors(patch, f, MAXS / 2 - 1);
  if (n == 0)
    return -1;
  for (i = n; i-- > 0;) {
    s *= f[i];
    p->s[p->n][0] = 1;
    p->s[p->n][1] = p->s[p->n][2] = s;
    p->s[p->n++][3] = (s * s * chans + 63) / 64 * 64;
  }
  last = s;
  n = prime_factors(tps, f, MAXS / 2 - 1);
  for (i = n; i-- > 0;) {
    t *= f[i];
    p->s[p->n][0] = t;
    p->s[p->n][1] = p->s[p->n][2] = last;
    p->s[p->n++][3] = last * last * chans * t * 64;
  }
  return 0;
}

/* torch.linspace(0, end, steps) in float32, as its CPU kernel fills it. */
static float linspace_at(float end, int64_t steps, int64_t i) {
  float step;
  if (steps == 1)
    return 0.0f;
  step = end / (float)(steps - 1);
  return i < steps / 2 ? step * (float)i : end - step * (float)(steps - i - 1);
}

/* Which scale each of the layers + 1 stage boundaries takes (idx). */
static void choose(const vit_plan *p, int64_t layers, double log_total,
                   size_t *idx) {
  const size_t rows = (size_t)layers + 1, cols = p->n;
  float cost[MAXS][MAXS], acc[MAXS][MAXS];
  size_t parent[MAXS][MAXS], r, c, k;
  for (r = 0; r < rows; r++)
    for (c = 0; c < cols; c++) {
      float red = (float)(p->s[c][0] * p->s[c][1] * p->s[c][2]);
      cost[r][c] = fabsf(
          linspace_at((float)log_total, (int64_t)rows, (int64_t)r) - logf(red));
    }
  if ((size_t)layers >= cols) {
    for (r = 0; r < rows; r++) {
      idx[r] = 0;
      for (c = 1; c < cols; c++)
        if (cost[r][c] < cost[r][idx[r]])
          idx[r] = c;
    }
  } else {
    for (c = 0; c < cols; c++) acc[0][c] = cost[0][c];
    for (r = 1; r < rows; r++)
      for (c = 0; c < cols; c++) {
        acc[r][c] = INFINITY;
        parent[r][c] = 0;
        if (c < r)
          continue;
        for (k = 1, parent[r][c] = 0; k < c; k++)
          if (acc[r - 1][k] < acc[r - 1][parent[r][c]])
            parent[r][c] = k;
        acc[r][c] = cost[r][c] + acc[r - 1][parent[r][c]];
      }
    idx[rows - 1] = 0;
    for (c = 1; c < cols; c++)
      if (acc[rows - 1][c] < acc[rows - 1][idx[rows - 1]])
        idx[rows - 1] = c;
    for (r = rows - 1; r > 0; r--) idx[r - 1] = parent[r][idx[r]];
  }
  idx[0] = 0;
  idx[rows - 1] = cols - 1;
}

static int has_sources(const tpx_plugin_host *host) {
  return host->struct_size > offsetof(tpx_plugin_host, skeleton_add_source) &&
         host->skeleton_add_source != NULL;
}

/* Stage l from scale a to scale b. */
static int stage(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const int64_t *a, const int64_t *b, int64_t l, int last,
                 int64_t text_hidden) {
  char f[TPXP_FQN_MAX], p[TPXP_FQN_MAX], src[TPXP_FQN_MAX];
  int64_t mult = (b[0] / a[0]) * (b[1] / a[1]) * (b[2] / a[2]);
  int64_t in = a[3] * mult, out = last ? text_hidden : b[3];
  const int64_t o[2] = {0, 0}, pw[2] = {out, in}, nw[1] = {out};
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "container"),
      TPXP_SK_LIN("projection", in, out, 0),
      TPXP_SK_WHEN(!last),
      TPXP_SK_NRM("layer_norm", out, 0),
  };
  tpxp_fmt(f, sizeof f, "model.vision_tower.encoder_layers.%lld", (long long)l);
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, rows, NULL));
  if (!has_sources(host))
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s.projection.weight", f);
  tpxp_fmt(src, sizeof src, "model.visual.layers.linear_%lld.weight",
           (long long)l);
  TPXP_CHK(host->skeleton_add_source(ctx, p, src, o, pw, 2, 0));
  if (last)
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s.layer_norm.weight", f);
  tpxp_fmt(src, sizeof src, "model.visual.layers.norm_%lld.weight",
           (long long)l);
  return host->skeleton_add_source(ctx, p, src, o, nw, 1, 0);
}

int am_sk_inkling_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         int64_t text_hidden) {
  int64_t patch, tps, chans, layers, l;
  vit_plan p;
  size_t idx[MAXS];
  const tpxp_key keys[] = {
      TPXP_KEY_Z("patch_size", &patch, 40),
      TPXP_KEY_Z("temporal_patch_size", &tps, 2),
      /* InklingVisionConfig stores these as n_channels / n_layers (its
       * attribute_map); either name is read. */
      {.key = "n_channels",
       .alt = "num_channels",
       .type = TPXP_KEY_SIZE,
       .out = &chans,
       .dflt_int = 3},
      TPXP_KEY_I_OR("n_layers", "num_hidden_layers", &layers, 24),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  if (candidates(patch, tps, chans, &p) != 0 || layers < 0 || layers + 1 > MAXS)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: InklingForConditionalGeneration: "
                     "vision_config.patch_size must be >= 2 and "
                     "num_hidden_layers in 0..%d",
                     MAXS - 1);
  TPXP_CHK(tpxp_sk_module(host, ctx, "model.vision_tower", "other"));
  TPXP_CHK(tpxp_sk_module(host, ctx, "model.vision_tower.encoder_layers",
                          "container"));
  if (layers > 0) {
    choose(&p, layers, log((double)(patch * patch * tps * chans)), idx);
    for (l = 0; l < layers; l++)
      TPXP_CHK(stage(host, ctx, p.s[idx[l]], p.s[idx[l + 1]], l,
                     l == layers - 1, text_hidden));
  }
  {
    const tpxp_sk_row rows[] = {TPXP_SK_NRM("final_norm", text_hidden, 0)};
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "model.vision_tower", rows, NULL));
  }
  if (has_sources(host)) {
    const int64_t o[1] = {0}, n[1] = {text_hidden};
    TPXP_CHK(host->skeleton_add_source(
        ctx, "model.vision_tower.final_norm.weight",
        "model.visual.final_norm.weight", o, n, 1, 0));
  }
  return TPX_PLUGIN_OK;
}
