/* check.c — tpx-train-check: compares tpx-train results, for the tests (not
 * installed). Exit 0 when within tolerance, 1 when not (printing the worst
 * difference), 2 on bad arguments or unreadable files.
 *
 *   steps  RESULT EXPECTED [CASE] TOL   per-step loss and grad_norm, relative;
 *          RESULT is tpx-train --format json output (its last line),
 *          EXPECTED the same or the fixtures' expected.json with CASE.
 *          CASE may be a path of keys under the case, split by '/'
 *          (qwen3moe/automodel/ep/2): an object there stands for its
 *          "steps", an array is the steps
 *   params A.safetensors B.safetensors TOL [GRADS LR WD STEPS]
 *          every tensor: ||a-b|| / ||b|| <= TOL (L2 over the tensor). With
 *          GRADS (B's run's --dump-grads) the elements whose gradient is
 *          Adam-ill-conditioned (nonzero, and below KAPPA times the
 *          tensor's RMS gradient at some step) are left out of that sum and
 *          held to Adam's bound instead; see ill_conditioned below
 *   grads  A.safetensors B.safetensors TOL
 *          two --dump-grads files: every gradient of step 0 (PARAM@0, from
 *          the same parameters in both runs) within TOL relative L2. Later
 *          steps start from parameters that differ in the ill-conditioned
 *          elements, so their gradients are not compared
 *   torch  A.safetensors EXPECTED CASE TOL
 *          per-tensor L2 norm and sum vs torch's params_after (relative to
 *          the L2 norm) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tpx/tpx.h>

static json_t *load_last_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL, *last = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&buf, &cap, f)) > 0)
    if (buf[0] == '{') {
      free(last);
      last = strdup(buf);
    }
  free(buf);
  fclose(f);
  json_t *j = last ? json_loads(last, 0, NULL) : NULL;
  free(last);
  if (!j)
    j = json_load_file(path, 0, NULL);
  return j;
}

/* |a - b| / |b|; infinite when either is not finite (a NaN must fail a
 * comparison, never vanish in fmax or a `>` test) */
static double rel(double a, double b) {
  if (!isfinite(a) || !isfinite(b))
    return INFINITY;
  return fabs(a - b) / fmax(fabs(b), 1e-12);
}

/* A JSON number (integer or real); NaN when absent, null or not a number. */
static double num(json_t *v) {
  return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A difference for the worst-so-far tests: NaN counts as infinite. */
static double nan_inf(double d) { return isnan(d) ? INFINITY : d; }

/* The steps of expected.json's case `path` (CASE[/KEY...]: each key one
 * level further down; an object ends at its "steps"); NULL when absent. */
static json_t *case_steps(json_t *e, const char *path) {
  json_t *node = json_object_get(e, "cases");
  char key[256];
  while (node && *path) {
    size_t n = strcspn(path, "/");
    if (n >= sizeof key)
      return NULL;
    memcpy(key, path, n);
    key[n] = 0;
    node = json_object_get(node, key);
    path += n + (path[n] == '/');
  }
  return json_is_object(node) ? json_object_get(node, "steps") : node;
}

static int cmd_steps(int argc, char **argv) {
  if (argc != 5 && argc != 6)
    return 2;
  double tol = atof(argv[argc - 1]);
  json_t *r = load_last_json(argv[2]), *e = load_last_json(argv[3]);
  if (!r || !e) {
    fprintf(stderr, "cannot read %s or %s\n", argv[2], argv[3]);
    json_decref(r);
    json_decref(e);
    return 2;
  }
  json_t *es = argc == 6 ? case_steps(e, argv[4]) : json_object_get(e, "steps");
  json_t *rs = json_object_get(r, "steps");
  if (!json_is_array(es) || !json_is_array(rs) ||
      json_array_size(es) != json_array_size(rs) || !json_array_size(rs)) {
    fprintf(stderr, "steps%s%s: missing or of different counts\n",
            argc == 6 ? " of case " : "", argc == 6 ? argv[4] : "");
    json_decref(r);
    json_decref(e);
    return 1;
  }
  double worst = 0;
  for (size_t i = 0; i < json_array_size(rs); i++) {
    json_t *a = json_array_get(rs, i), *b = json_array_get(es, i);
    double dl =
        rel(num(json_object_get(a, "loss")), num(json_object_get(b, "loss")));
    double dg = rel(num(json_object_get(a, "grad_norm")),
                    num(json_object_get(b, "grad_norm")));
    printf("step %zu: loss rel diff %.3g, grad_norm rel diff %.3g\n", i, dl,
           dg);
    worst = fmax(worst, fmax(dl, dg));
  }
  json_decref(r);
  json_decref(e);
  printf("worst %.3g (tolerance %.3g)\n", worst, tol);
  return worst <= tol ? 0 : 1;
}

/* A whole stored tensor as f32 (NULL with a message when unreadable);
 * *numel its element count. */
static float *read_all(const tpx_checkpoint_reader *rd, size_t i,
                       int64_t *numel) {
  tpx_checkpoint_tensor t;
  tpx_error e = {0};
  if (tpx_checkpoint_tensor_info(rd, i, &t, &e)) {
    fprintf(stderr, "%s\n", e.message);
    return NULL;
  }
  tpx_slice sl = {t.ndim, {0}, {0}};
  int64_t n = 1;
  for (int d = 0; d < t.ndim; d++) {
    sl.length[d] = t.shape[d];
    n *= t.shape[d];
  }
  float *d = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (d && tpx_checkpoint_read_slice(rd, (int64_t)i, &sl, TPX_DTYPE_F32, d,
                                     sizeof(float) * (size_t)(n ? n : 1), &e)) {
    fprintf(stderr, "%s\n", e.message);
    free(d);
    d = NULL;
  }
  *numel = n;
  return d;
}

static tpx_checkpoint_reader *open_ckpt(const char *path) {
  tpx_checkpoint_reader *rd = NULL;
  tpx_error e = {0};
  if (tpx_checkpoint_reader_create(path, NULL, &rd, &e))
    fprintf(stderr, "%s\n", e.message);
  return rd;
}

/* Parameters after K AdamW steps: which elements can two f32 runs agree on?
 *
 * Adam's step m_hat / (sqrt(v_hat) + eps) does not depend on the scale of
 * the gradient, so an element's step has the RELATIVE error of its own
 * gradient. f32 gradients carry an absolute error of about 1e-7..1e-6 of
 * the tensor's RMS gradient, whatever the summation order (torch f32 vs
 * f64: 4e-7..9e-7 relative L2 per tensor), so an element whose gradient is
 * 1e-6 of the RMS gets a step anywhere in [-lr, lr] in every correct run,
 * and one such element in a 64x64 weight can put the whole tensor 3e-4
 * apart. Such elements exist in real models: the low-frequency RoPE pairs
 * of Qwen2's k_proj.bias (a key bias rotated by nearly the identity adds
 * nearly the same q.b to every score of a row, which softmax ignores:
 * gradients 1e-7..1e-8 against 1e-3) and, by chance, single weights whose
 * gradient sums cancel. Above KAPPA = 3e-4 an element's gradient is
 * known to ~3e-3 relative or better, its step to ~3e-6, and the tensors
 * stay within ~1e-6 relative (measured <= 1.3e-6 on every mesh; 4e-6 with
 * KAPPA 1e-4, 3e-5 with KAPPA 3e-5: Qwen2's k_proj.bias again). About
 * 0.2-0.4% of the elements fall below it.
 *
 * What holds for the ill-conditioned elements is Adam's bound: at step t
 * |m_hat / sqrt(v_hat)| <= sqrt(sum_k a_k^2 / b_k) (Cauchy-Schwarz with
 * a_k, b_k the bias-corrected EMA weights), 1.0036 at t = 3 for betas
 * 0.9 / 0.999 (1.0014 at t = 2, 1.0 at t = 1), so step t moves an
 * element by at most lr (c_t + wd |theta|), and two runs differ by at most
 * twice the sum over the steps; |theta| <= |b| + 2 lr sum c_t. */
#define KAPPA 3e-4

/* ill[k] = 1 for the ill-conditioned elements of `name` from the gradient
 * dump g (steps tensors name@0..); returns their count, -1 on error */
static int64_t ill_conditioned(const tpx_checkpoint_reader *g, const char *name,
                               int64_t steps, int64_t n, unsigned char *ill) {
  double *ratio = malloc(sizeof(double) * (size_t)(n ? n : 1));
  unsigned char *nz = calloc((size_t)(n ? n : 1), 1);
  int64_t count = 0;
  if (!ratio || !nz) {
    free(ratio);
    free(nz);
    return -1;
  }
  for (int64_t i = 0; i < n; i++) ratio[i] = INFINITY;
  for (int64_t k = 0; k < steps; k++) {
    char gname[512];
    snprintf(gname, sizeof gname, "%s@%lld", name, (long long)k);
    int64_t gi = tpx_checkpoint_find(g, gname), gn = 0;
    float *gv = gi < 0 ? NULL : read_all(g, (size_t)gi, &gn);
    if (!gv || gn != n) {
      fprintf(stderr, "%s: missing or of another size in the gradient dump\n",
              gname);
      free(gv);
      free(ratio);
      free(nz);
      return -1;
    }
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)gv[i] * gv[i];
    double rms = sqrt(ss / (double)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
      if (gv[i] != 0)
        nz[i] = 1;
      double r = rms > 0 ? fabs(gv[i]) / rms : INFINITY;
      if (r < ratio[i])
        ratio[i] = r;
    }
    free(gv);
  }
  /* exactly zero at every step (an embedding row no token uses): no
   * Adam step at all in any run, so it is held to TOL with the rest */
  for (int64_t i = 0; i < n; i++) count += ill[i] = nz[i] && ratio[i] < KAPPA;
  free(ratio);
  free(nz);
  return count;
}

static int cmd_params(int argc, char **argv) {
  if (argc != 5 && argc != 9)
    return 2;
  double tol = atof(argv[4]);
  tpx_checkpoint_reader *ra = open_ckpt(argv[2]), *rb = open_ckpt(argv[3]);
  tpx_checkpoint_reader *rg = argc == 9 ? open_ckpt(argv[5]) : NULL;
  double lr = argc == 9 ? atof(argv[6]) : 0, wd = argc == 9 ? atof(argv[7]) : 0;
  int64_t steps = argc == 9 ? atoll(argv[8]) : 0;
  if (!ra || !rb || (argc == 9 && (!rg || steps <= 0))) {
    fprintf(stderr, "cannot read the dumps\n");
    tpx_checkpoint_reader_destroy(ra);
    tpx_checkpoint_reader_destroy(rb);
    tpx_checkpoint_reader_destroy(rg);
    return 2;
  }
  /* sum over the steps of Adam's bound on |m_hat / sqrt(v_hat)| */
  double csum = 0;
  for (int64_t t = 1; t <= steps; t++) {
    double c = 0;
    for (int64_t k = 1; k <= t; k++) {
      double a = 0.1 * pow(0.9, (double)(t - k)) / (1 - pow(0.9, (double)t));
      double w =
          0.001 * pow(0.999, (double)(t - k)) / (1 - pow(0.999, (double)t));
      c += a * a / w;
    }
    csum += sqrt(c);
  }
  double worst = 0, worst_all = 0, welem = 0, wratio = 0, wdiff_ill = 0;
  const char *wname = "", *wname_all = "", *wname_ill = "";
  int missing = 0;
  size_t count = 0, ill_tensors = 0;
  int64_t ill_total = 0;
  for (size_t i = 0; i < tpx_checkpoint_num_tensors(rb); i++) {
    tpx_checkpoint_tensor tb;
    tpx_checkpoint_tensor_info(rb, i, &tb, NULL);
    int64_t ia = tpx_checkpoint_find(ra, tb.name);
    if (ia < 0) {
      fprintf(stderr, "%s: missing in %s\n", tb.name, argv[2]);
      missing = 1;
      continue;
    }
    int64_t na, nb;
    float *a = read_all(ra, (size_t)ia, &na), *b = read_all(rb, i, &nb);
    unsigned char *ill = calloc((size_t)(nb > 0 ? nb : 1), 1);
    int64_t nill = 0;
    if (!a || !b || !ill || na != nb) {
      fprintf(stderr, "%s: unreadable or sizes differ\n", tb.name);
      missing = 1;
    } else if (rg &&
               (nill = ill_conditioned(rg, tb.name, steps, nb, ill)) < 0) {
      missing = 1;
    } else {
      double dd = 0, dd_all = 0, bb = 0;
      for (int64_t k = 0; k < na; k++) {
        double d = nan_inf((double)a[k] - b[k]);
        dd_all += d * d;
        bb += (double)b[k] * b[k];
        if (ill[k]) {
          double bound =
              2.0 * lr *
              (csum + (double)steps * wd * (fabs(b[k]) + 2.0 * csum * lr));
          double r = nan_inf(fabs(d) / bound);
          if (r > wratio) {
            wratio = r;
            wdiff_ill = fabs(d);
            wname_ill = tb.name;
          }
          continue;
        }
        dd += d * d;
        if (fabs(d) > welem)
          welem = fabs(d);
      }
      double d = nan_inf(sqrt(dd) / fmax(sqrt(bb), 1e-12)),
             d_all = nan_inf(sqrt(dd_all) / fmax(sqrt(bb), 1e-12));
      if (d > worst) {
        worst = d;
        wname = tb.name;
      }
      if (d_all > worst_all) {
        worst_all = d_all;
        wname_all = tb.name;
      }
      ill_total += nill;
      ill_tensors += nill > 0;
    }
    free(a);
    free(b);
    free(ill);
    count++;
  }
  printf("%zu tensors, worst relative L2 diff %.3g in %s (tolerance %.3g); "
         "worst element %.3g\n",
         count, worst, wname, tol, welem);
  if (rg) {
    printf("left out: %lld Adam-ill-conditioned elements (|grad| < %g x RMS at "
           "some step) in "
           "%zu tensors; worst |a-b| %.3g in %s, %.3g of Adam's bound\n",
           (long long)ill_total, KAPPA, ill_tensors, wdiff_ill, wname_ill,
           wratio);
    printf("(with them: worst relative L2 diff %.3g in %s)\n", worst_all,
           wname_all);
  }
  int rc = !missing && count && worst <= tol && wratio <= 1.0 ? 0 : 1;
  tpx_checkpoint_reader_destroy(ra);
  tpx_checkpoint_reader_destroy(rb);
  tpx_checkpoint_reader_destroy(rg);
  return rc;
}

static int cmd_grads(int argc, char **argv) {
  if (argc != 5)
    return 2;
  double tol = atof(argv[4]), worst = 0;
  tpx_checkpoint_reader *ra = open_ckpt(argv[2]), *rb = open_ckpt(argv[3]);
  const char *wname = "";
  int bad = !ra || !rb;
  size_t count = 0;
  for (size_t i = 0; !bad && i < tpx_checkpoint_num_tensors(rb); i++) {
    tpx_checkpoint_tensor tb;
    tpx_checkpoint_tensor_info(rb, i, &tb, NULL);
    size_t nl = strlen(tb.name);
    if (nl < 2 || strcmp(tb.name + nl - 2, "@0"))
      continue;
    int64_t ia = tpx_checkpoint_find(ra, tb.name), na = 0, nb = 0;
    float *a = ia < 0 ? NULL : read_all(ra, (size_t)ia, &na),
          *b = read_all(rb, i, &nb);
    if (!a || !b || na != nb) {
      fprintf(stderr, "%s: missing, unreadable or of another size in %s\n",
              tb.name, argv[2]);
      bad = 1;
    } else {
      double dd = 0, bb = 0;
      for (int64_t k = 0; k < na; k++) {
        double d = nan_inf((double)a[k] - b[k]);
        dd += d * d;
        bb += (double)b[k] * b[k];
      }
      double d = nan_inf(bb > 0 ? sqrt(dd / bb) : sqrt(dd));
      if (d > worst) {
        worst = d;
        wname = tb.name;
      }
      count++;
    }
    free(a);
    free(b);
  }
  printf("%zu gradients, worst relative L2 diff %.3g in %s (tolerance %.3g)\n",
         count, worst, wname, tol);
  tpx_checkpoint_reader_destroy(ra);
  tpx_checkpoint_reader_destroy(rb);
  return bad ? 2 : count && worst <= tol ? 0 : 1;
}

static int cmd_torch(int argc, char **argv) {
  if (argc != 6)
    return 2;
  double tol = atof(argv[5]);
  tpx_checkpoint_reader *ra = open_ckpt(argv[2]);
  json_t *e = json_load_file(argv[3], 0, NULL);
  json_t *pa = json_object_get(
      json_object_get(json_object_get(e, "cases"), argv[4]), "params_after");
  if (!ra || !json_is_object(pa)) {
    fprintf(stderr, "cannot read the dump or the case\n");
    return 2;
  }
  double worst = 0;
  const char *wname = "", *k;
  json_t *t;
  int missing = 0;
  json_object_foreach(pa, k, t) {
    int64_t ia = tpx_checkpoint_find(ra, k);
    if (ia < 0) {
      /* a tied alias torch lists under its own name */
      if (strcmp(k, "lm_head.weight")) {
        fprintf(stderr, "%s: missing\n", k);
        missing = 1;
      }
      continue;
    }
    int64_t n;
    float *a = read_all(ra, (size_t)ia, &n);
    if (!a) {
      missing = 1;
      continue;
    }
    double l2 = 0, sum = 0;
    for (int64_t i = 0; i < n; i++) {
      l2 += (double)a[i] * a[i];
      sum += a[i];
    }
    l2 = sqrt(l2);
    double el2 = num(json_object_get(t, "l2")),
           esum = num(json_object_get(t, "sum"));
    double d = fmax(rel(l2, el2), nan_inf(fabs(sum - esum) / fmax(el2, 1e-12)));
    json_t *first = json_object_get(t, "first");
    for (size_t i = 0; i < json_array_size(first) && (int64_t)i < n; i++)
      d = fmax(d, nan_inf(fabs(a[i] - num(json_array_get(first, i))) /
                          fmax(el2, 1e-12)));
    if (d > worst) {
      worst = d;
      wname = k;
    }
    free(a);
  }
  printf("worst per-tensor diff vs torch %.3g in %s (tolerance %.3g)\n", worst,
         wname, tol);
  tpx_checkpoint_reader_destroy(ra);
  json_decref(e);
  return !missing && worst <= tol ? 0 : 1;
}
int main(int argc, char **argv) {
  int rc = 2;
  if (argc > 1 && !strcmp(argv[1], "steps"))
    rc = cmd_steps(argc, argv);
  else if (argc > 1 && !strcmp(argv[1], "params"))
    rc = cmd_params(argc, argv);
  else if (argc > 1 && !strcmp(argv[1], "grads"))
    rc = cmd_grads(argc, argv);
  else if (argc > 1 && !strcmp(argv[1], "torch"))
    rc = cmd_torch(argc, argv);
  if (rc == 2)
    fprintf(stderr, "usage: see the top of examples/train/check.c\n");
  return rc;
}
