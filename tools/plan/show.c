/* show.c — `tpx plan --show PATTERN`: each matching parameter drawn in the
 * terminal as a grid of its blocks, every cell labelled with the ranks that
 * hold it (ANSI colors per rank set when stdout is a tty). Parameters that
 * differ only by layer numbers and share shape, dtype and placements are
 * drawn once ("model.layers.{0..15}.mlp.up_proj.weight").
 *
 * Every block comes from tpx_sharding_local_slice: the cell boundaries are
 * the union of the ranks' slice boundaries along dims 0 and 1. Not the HTML
 * page (a separate command). */
#include <stdlib.h>
#include <string.h>

#include "plan_extra.h"

#define MAX_ATOMS 32
#define MAX_CELLS 16   /* rows / columns drawn; more are elided */
#define MAX_WORLD 4096 /* ranks scanned per parameter */
#define LABEL_MAX 18

/* Split a dotted name in place; returns the number of atoms. */
static int split(char *s, char **atoms) {
  int n = 0;
  for (char *p = s;; p++) {
    if (n == MAX_ATOMS)
      return -1;
    atoms[n++] = p;
    p = strchr(p, '.');
    if (!p)
      break;
    *p = '\0';
  }
  return n;
}

static int matches(const char *pattern, const char *fqn) {
  char pb[512], fb[512];
  char *pa[MAX_ATOMS], *fa[MAX_ATOMS];
  if (strlen(pattern) >= sizeof pb || strlen(fqn) >= sizeof fb)
    return 0;
  strcpy(pb, pattern);
  strcpy(fb, fqn);
  int np = split(pb, pa), nf = split(fb, fa);
  if (np < 0 || np != nf)
    return 0;
  for (int i = 0; i < np; i++)
    if (!tpx_match_atom(pa[i], fa[i]))
      return 0;
  return 1;
}

/* fqn with numeric atoms replaced by "#", numbers into nums. */
static int templ(const char *fqn, char *out, size_t size, int64_t *nums,
                 int maxn) {
  int n = 0;
  size_t o = 0;
  for (const char *p = fqn; *p && o + 2 < size;) {
    const char *q = p;
    int digits = 1;
    while (*q && *q != '.') digits &= (*q >= '0' && *q <= '9'), q++;
    if (digits && q > p && n < maxn && q - p < 18) {
      nums[n++] = strtoll(p, NULL, 10);
      out[o++] = '#';
    } else {
      for (const char *c = p; c < q && o + 2 < size; c++) out[o++] = *c;
    }
    if (*q == '.')
      out[o++] = '.';
    p = *q ? q + 1 : q;
  }
  out[o] = '\0';
  return n;
}

typedef struct {
  char key[768]; /* template + shape + dtype + placements */
  char tmpl[512];
  int64_t first; /* parameter drawn */
  int nnum;
  int64_t *nums; /* [count * nnum] */
  size_t count, cap;
} group_t;

static void print_numbers(FILE *out, int64_t *v, size_t n) {
  /* sorted unique, as {a..b} when contiguous */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
      int64_t t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (!u || v[u - 1] != v[i])
      v[u++] = v[i];
  if (u == 1)
    fprintf(out, "%lld", (long long)v[0]);
  else if (v[u - 1] - v[0] + 1 == (int64_t)u)
    fprintf(out, "{%lld..%lld}", (long long)v[0], (long long)v[u - 1]);
  else {
    fprintf(out, "{");
    for (size_t i = 0; i < u && i < 8; i++)
      fprintf(out, "%s%lld", i ? "," : "", (long long)v[i]);
    if (u > 8)
      fprintf(out, ",...+%zu", u - 8);
    fprintf(out, "}");
  }
}

static void print_name(FILE *out, const group_t *g) {
  int k = 0;
  for (const char *p = g->tmpl; *p; p++) {
    if (*p == '#' && k < g->nnum) {
      int64_t *v = malloc(g->count * sizeof *v);
      if (!v)
        return;
      for (size_t i = 0; i < g->count; i++) v[i] = g->nums[i * g->nnum + k];
      print_numbers(out, v, g->count);
      free(v);
      k++;
    } else {
      fputc(*p, out);
    }
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorted unique boundaries of dim d over the ranks' slices, 0 and n
 * included; returns the count. */
static size_t bounds(const tpx_slice *sl, int64_t world, int d, int64_t n,
                     int64_t *out) {
  size_t k = 0;
  out[k++] = 0;
  out[k++] = n;
  for (int64_t r = 0; r < world; r++) {
    if (tpx_slice_numel(&sl[r]) == 0)
      continue;
    out[k++] = sl[r].offset[d];
    out[k++] = sl[r].offset[d] + sl[r].length[d];
  }
  qsort(out, k, sizeof *out, cmp_i64);
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (!u || out[u - 1] != out[i])
      out[u++] = out[i];
  return u;
}

/* "0-3,8,12-15" from a sorted rank list, cut to fit `size`. */
static void rank_label(const int64_t *r, size_t n, char *buf, size_t size) {
  size_t o = 0;
  buf[0] = '\0';
  if (!n) {
    snprintf(buf, size, "-");
    return;
  }
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
    char part[48];
    if (j == i)
      snprintf(part, sizeof part, "%s%lld", i ? "," : "", (long long)r[i]);
    else
      snprintf(part, sizeof part, "%s%lld-%lld", i ? "," : "", (long long)r[i],
               (long long)r[j]);
    if (o + strlen(part) + 1 > size - 4) { /* room for ",.." */
      snprintf(buf + o, size - o, "..");
      return;
    }
    o += (size_t)snprintf(buf + o, size - o, "%s", part);
    i = j + 1;
  }
}

/* ANSI 256-color backgrounds, readable with black text. */
static const int palette[] = {153, 186, 217, 151, 223, 189, 159, 194,
                              225, 229, 195, 252, 180, 146, 108, 174};

static void draw(FILE *out, const tpx_sharding *sh, int64_t p, int color) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  int64_t world = tpx_mesh_world_size(mesh);
  tpx_param_info pi;
  if (tpx_model_param(model, p, &pi, NULL) != TPX_OK)
    return;
  if (world > MAX_WORLD) {
    fprintf(out,
            "  (%lld ranks: too many to draw; use --rank R --format "
            "json)\n",
            (long long)world);
    return;
  }
  tpx_slice *sl = calloc((size_t)world, sizeof *sl);
  int64_t *rb = malloc((2 * (size_t)world + 2) * sizeof *rb);
  int64_t *cb = malloc((2 * (size_t)world + 2) * sizeof *cb);
  int64_t *who = malloc((size_t)world * sizeof *who);
  if (!sl || !rb || !cb || !who)
    goto out;
  for (int64_t r = 0; r < world; r++)
    if (tpx_sharding_local_slice(sh, p, r, &sl[r], NULL) != TPX_OK)
      goto out;
  /* dims drawn: rows = dim 0, columns = dim 1 (a 1-D tensor is one row of
   * dim-0 blocks; a scalar one cell) */
  int rd = pi.ndim >= 2 ? 0 : -1, cd = pi.ndim >= 2 ? 1 : pi.ndim == 1 ? 0 : -1;
  size_t nr = 2, nc = 2;
  rb[0] = cb[0] = 0;
  rb[1] = rd >= 0 ? pi.shape[rd] : 1;
  cb[1] = cd >= 0 ? pi.shape[cd] : 1;
  if (rd >= 0)
    nr = bounds(sl, world, rd, pi.shape[rd], rb);
  if (cd >= 0)
    nc = bounds(sl, world, cd, pi.shape[cd], cb);
  int other_split = 0;
  for (int64_t r = 0; r < world; r++)
    for (int d = 2; d < pi.ndim; d++)
      if (tpx_slice_numel(&sl[r]) &&
          (sl[r].offset[d] != 0 || sl[r].length[d] != pi.shape[d]))
        other_split = 1;
  size_t rows = nr > 1 ? nr - 1 : 1, cols = nc > 1 ? nc - 1 : 1;
  size_t rshow = rows > MAX_CELLS ? MAX_CELLS : rows;
  size_t cshow = cols > MAX_CELLS ? MAX_CELLS : cols;
  /* labels first, to size the columns */
  char(*lab)[LABEL_MAX + 1] = calloc(rshow * cshow, sizeof *lab);
  int *col = calloc(rshow * cshow, sizeof *col);
  if (!lab || !col) {
    free(lab);
    free(col);
    goto out;
  }
  char sets[MAX_CELLS * MAX_CELLS][LABEL_MAX + 1];
  size_t nsets = 0;
  int width = 4;
  for (size_t i = 0; i < rshow; i++)
    for (size_t j = 0; j < cshow; j++) {
      size_t n = 0;
      for (int64_t r = 0; r < world; r++) {
        if (!tpx_slice_numel(&sl[r]))
          continue;
        int in = 1;
        if (rd >= 0)
          in &= sl[r].offset[rd] <= rb[i] &&
                rb[i] < sl[r].offset[rd] + sl[r].length[rd];
        if (cd >= 0)
          in &= sl[r].offset[cd] <= cb[j] &&
                cb[j] < sl[r].offset[cd] + sl[r].length[cd];
        if (in)
          who[n++] = r;
      }
      char *l = lab[i * cshow + j];
      rank_label(who, n, l, LABEL_MAX + 1);
      if ((int)strlen(l) > width)
        width = (int)strlen(l);
      size_t s = 0;
      while (s < nsets && strcmp(sets[s], l)) s++;
      if (s == nsets)
        strcpy(sets[nsets++], l);
      col[i * cshow + j] = (int)s;
    }
  /* header: column ranges */
  char rng[48];
  for (size_t j = 0; j < cshow; j++) {
    int w = snprintf(rng, sizeof rng, "%lld:%lld", (long long)cb[j],
                     (long long)cb[j + 1]);
    if (w > width)
      width = w;
  }
  int rw = 15;
  fprintf(out, "  %*s", rw, rd >= 0 ? "dim0 \\ dim1" : "");
  for (size_t j = 0; j < cshow; j++) {
    snprintf(rng, sizeof rng, "%lld:%lld", (long long)cb[j],
             (long long)cb[j + 1]);
    fprintf(out, " %-*s", width, rng);
  }
  fprintf(out, "%s\n", cols > cshow ? " ..." : "");
  for (size_t i = 0; i < rshow; i++) {
    if (rd >= 0)
      snprintf(rng, sizeof rng, "%lld:%lld", (long long)rb[i],
               (long long)rb[i + 1]);
    else
      snprintf(rng, sizeof rng, "%s", "");
    fprintf(out, "  %*s", rw, rng);
    for (size_t j = 0; j < cshow; j++) {
      const char *l = lab[i * cshow + j];
      if (color)
        fprintf(out, " \033[30;48;5;%dm%-*s\033[0m",
                palette[col[i * cshow + j] % 16], width, l);
      else
        fprintf(out, " %-*s", width, l);
    }
    fprintf(out, "%s\n", cols > cshow ? " ..." : "");
  }
  if (rows > rshow)
    fprintf(out, "  %*s (%zu more row blocks)\n", rw, "...", rows - rshow);
  if (cols > cshow)
    fprintf(out, "  %*s (%zu more column blocks)\n", rw, "", cols - cshow);
  if (other_split)
    fprintf(out,
            "  %*s dims >= 2 are split too: a cell lists every rank "
            "holding part of it\n",
            rw, "");
  free(lab);
  free(col);
out:
  free(sl);
  free(rb);
  free(cb);
  free(who);
}

size_t plan_show(FILE *out, const tpx_sharding *sh, const char *pattern,
                 int color) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  size_t np = tpx_model_num_params(model), ng = 0, gcap = 0, drawn = 0;
  group_t *g = NULL;
  for (size_t p = 0; p < np; p++) {
    tpx_param_info pi;
    tpx_param_sharding ps;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK ||
        tpx_sharding_param(sh, (int64_t)p, &ps, NULL) != TPX_OK)
      continue;
    if (!matches(pattern, pi.fqn) &&
        !matches(pattern, tpx_model_module_fqn(model, pi.module)))
      continue;
    char key[768], tmpl[512];
    int64_t nums[8];
    int nn = templ(pi.fqn, tmpl, sizeof tmpl, nums, 8);
    int o = snprintf(key, sizeof key, "%s|%d|", tmpl, (int)pi.dtype);
    for (int d = 0; d < pi.ndim && o > 0 && (size_t)o < sizeof key; d++)
      o += snprintf(key + o, sizeof key - (size_t)o, "%lld,",
                    (long long)pi.shape[d]);
    const tpx_mesh *pm = tpx_sharding_param_mesh(sh, (int64_t)p);
    if (pm != mesh && o > 0 && (size_t)o < sizeof key)
      o += snprintf(key + o, sizeof key - (size_t)o, "|moe");
    for (int d = 0; d < tpx_mesh_ndim(pm) && o > 0 && (size_t)o < sizeof key;
         d++) {
      char b[48];
      tpx_placement_format(ps.placements[d], b, sizeof b);
      o += snprintf(key + o, sizeof key - (size_t)o, "|%s", b);
    }
    size_t k = 0;
    while (k < ng && strcmp(g[k].key, key)) k++;
    if (k == ng) {
      if (ng == gcap) {
        size_t c = gcap ? 2 * gcap : 16;
        group_t *ng2 = realloc(g, c * sizeof *g);
        if (!ng2)
          break;
        g = ng2;
        gcap = c;
      }
      memset(&g[ng], 0, sizeof g[ng]);
      snprintf(g[ng].key, sizeof g[ng].key, "%s", key);
      snprintf(g[ng].tmpl, sizeof g[ng].tmpl, "%s", tmpl);
      g[ng].first = (int64_t)p;
      g[ng].nnum = nn;
      ng++;
    }
    group_t *x = &g[k];
    if (x->count == x->cap) {
      size_t c = x->cap ? 2 * x->cap : 8;
      int64_t *v =
          realloc(x->nums, c * (size_t)(x->nnum ? x->nnum : 1) * sizeof *v);
      if (!v)
        break;
      x->nums = v;
      x->cap = c;
    }
    for (int i = 0; i < x->nnum; i++) x->nums[x->count * x->nnum + i] = nums[i];
    x->count++;
  }
  if (ng) {
    int64_t world = tpx_mesh_world_size(mesh), last = world - 1;
    fprintf(out, "Mesh");
    for (int d = 0; d < tpx_mesh_ndim(mesh); d++)
      fprintf(out, " %s=%lld", tpx_mesh_dim_name(mesh, d),
              (long long)tpx_mesh_dim_size(mesh, d));
    int64_t c[TPX_MESH_MAX_DIMS];
    if (tpx_mesh_coords(mesh, last, c, NULL) == TPX_OK) {
      fprintf(out, ", ranks row-major (rank %lld =", (long long)last);
      for (int d = 0; d < tpx_mesh_ndim(mesh); d++)
        fprintf(out, " %s %lld", tpx_mesh_dim_name(mesh, d), (long long)c[d]);
      fprintf(out, ")");
    }
    fprintf(out, "\n\n");
  }
  for (size_t k = 0; k < ng; k++) {
    tpx_param_info pi;
    tpx_param_sharding ps;
    if (tpx_model_param(model, g[k].first, &pi, NULL) != TPX_OK ||
        tpx_sharding_param(sh, g[k].first, &ps, NULL) != TPX_OK)
      continue;
    if (drawn)
      fputc('\n', out);
    if (color)
      fputs("\033[1m", out);
    print_name(out, &g[k]);
    if (color)
      fputs("\033[0m", out);
    fprintf(out, "  [");
    for (int d = 0; d < pi.ndim; d++)
      fprintf(out, "%s%lld", d ? ", " : "", (long long)pi.shape[d]);
    fprintf(out, "] %s", tpx_dtype_short_name(pi.dtype));
    if (g[k].count > 1)
      fprintf(out, " (%zu identical)", g[k].count);
    fprintf(out, "\n  placements:");
    const tpx_mesh *pm = tpx_sharding_param_mesh(sh, g[k].first);
    if (pm != mesh)
      fprintf(out, " (MoE mesh)");
    for (int d = 0; d < tpx_mesh_ndim(pm); d++) {
      char b[48];
      tpx_placement_format(ps.placements[d], b, sizeof b);
      fprintf(out, " %s=%s", tpx_mesh_dim_name(pm, d), b);
    }
    fprintf(out, "; cells: [start:end) of each dim, labelled with the "
                 "ranks holding them\n");
    draw(out, sh, g[k].first, color);
    drawn += g[k].count;
  }
  for (size_t k = 0; k < ng; k++) free(g[k].nums);
  free(g);
  return drawn;
}
