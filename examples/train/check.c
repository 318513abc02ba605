/* check.c — tpx-train-check: compares tpx-train results, for the tests (not
 * installed). Exit 0 when within tolerance, 1 when not (printing the worst
 * difference), 2 on bad arguments or unreadable files.
 *
 *   steps  RESULT EXPECTED [CASE] TOL   per-step loss and grad_norm, relative;
 *          RESULT is tpx-train --format json output (its last line),
 *          EXPECTED the same or the fixtures' expected.json with CASE
 *   params A.safetensors B.safetensors TOL
 *          every tensor: ||a-b|| / ||b|| <= TOL (L2 over the tensor; the
 *          worst single element is printed too: an element whose gradient
 *          is rounding noise gets an Adam step of up to lr either way, so
 *          elementwise bounds do not hold across summation orders)
 *   params A B TOL NOISY BOUND
 *          as above, but tensors whose name contains NOISY are only held to
 *          |a-b| <= BOUND elementwise: k_proj.bias, whose true gradient is
 *          0 (softmax ignores a per-row constant), so its Adam steps are
 *          rounding noise of size lr in every run
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
  if (!f) return NULL;
  char *buf = NULL, *last = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&buf, &cap, f)) > 0)
    if (buf[0] == '{') { free(last); last = strdup(buf); }
  free(buf);
  fclose(f);
  json_t *j = last ? json_loads(last, 0, NULL) : NULL;
  free(last);
  if (!j) j = json_load_file(path, 0, NULL);
  return j;
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-12); }

static int cmd_steps(int argc, char **argv) {
  if (argc != 5 && argc != 6) return 2;
  double tol = atof(argv[argc - 1]);
  json_t *r = load_last_json(argv[2]), *e = load_last_json(argv[3]);
  if (!r || !e) { fprintf(stderr, "cannot read %s or %s\n", argv[2], argv[3]); return 2; }
  json_t *es = argc == 6 ? json_object_get(json_object_get(json_object_get(e, "cases"), argv[4]), "steps")
                         : json_object_get(e, "steps");
  json_t *rs = json_object_get(r, "steps");
  if (!json_is_array(es) || !json_is_array(rs) || json_array_size(es) != json_array_size(rs) ||
      !json_array_size(rs)) {
    fprintf(stderr, "steps: missing or of different counts\n");
    return 1;
  }
  double worst = 0;
  for (size_t i = 0; i < json_array_size(rs); i++) {
    json_t *a = json_array_get(rs, i), *b = json_array_get(es, i);
    double dl = rel(json_real_value(json_object_get(a, "loss")), json_real_value(json_object_get(b, "loss")));
    double dg = rel(json_real_value(json_object_get(a, "grad_norm")), json_real_value(json_object_get(b, "grad_norm")));
    printf("step %zu: loss rel diff %.3g, grad_norm rel diff %.3g\n", i, dl, dg);
    worst = fmax(worst, fmax(dl, dg));
  }
  json_decref(r); json_decref(e);
  printf("worst %.3g (tolerance %.3g)\n", worst, tol);
  return worst <= tol ? 0 : 1;
}

/* A whole stored tensor as f32 (NULL with a message when unreadable);
 * *numel its element count. */
static float *read_all(const tpx_checkpoint_reader *rd, size_t i, int64_t *numel) {
  tpx_checkpoint_tensor t;
  tpx_error e = {0};
  if (tpx_checkpoint_tensor_info(rd, i, &t, &e)) { fprintf(stderr, "%s\n", e.message); return NULL; }
  tpx_slice sl = {t.ndim, {0}, {0}};
  int64_t n = 1;
  for (int d = 0; d < t.ndim; d++) { sl.length[d] = t.shape[d]; n *= t.shape[d]; }
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
  if (tpx_checkpoint_reader_create(path, NULL, &rd, &e)) fprintf(stderr, "%s\n", e.message);
  return rd;
}

static int cmd_params(int argc, char **argv) {
  if (argc != 5 && argc != 7) return 2;
  double tol = atof(argv[4]);
  const char *noisy = argc == 7 ? argv[5] : NULL;
  double bound = argc == 7 ? atof(argv[6]) : 0, wnoisy = 0;
  tpx_checkpoint_reader *ra = open_ckpt(argv[2]), *rb = open_ckpt(argv[3]);
  if (!ra || !rb) { fprintf(stderr, "cannot read the dumps\n"); return 2; }
  double worst = 0, welem = 0;
  const char *wname = "";
  int missing = 0;
  size_t count = 0;
  for (size_t i = 0; i < tpx_checkpoint_num_tensors(rb); i++) {
    tpx_checkpoint_tensor tb;
    tpx_checkpoint_tensor_info(rb, i, &tb, NULL);
    int64_t ia = tpx_checkpoint_find(ra, tb.name);
    if (ia < 0) { fprintf(stderr, "%s: missing in %s\n", tb.name, argv[2]); missing = 1; continue; }
    int64_t na, nb;
    float *a = read_all(ra, (size_t)ia, &na), *b = read_all(rb, i, &nb);
    if (!a || !b || na != nb) { fprintf(stderr, "%s: unreadable or sizes differ\n", tb.name); missing = 1; }
    else if (noisy && strstr(tb.name, noisy)) {
      for (int64_t k = 0; k < na; k++) wnoisy = fmax(wnoisy, fabs((double)a[k] - b[k]));
    } else {
      double dd = 0, bb = 0;
      for (int64_t k = 0; k < na; k++) {
        double d = (double)a[k] - b[k];
        dd += d * d;
        bb += (double)b[k] * b[k];
        if (fabs(d) > welem) welem = fabs(d);
      }
      double d = sqrt(dd) / fmax(sqrt(bb), 1e-12);
      if (d > worst) { worst = d; wname = tb.name; }
    }
    free(a); free(b);
    count++;
  }
  printf("%zu tensors, worst relative L2 diff %.3g in %s (tolerance %.3g); worst element %.3g\n",
         count, worst, wname, tol, welem);
  if (noisy) printf("tensors named *%s*: worst element %.3g (bound %.3g)\n", noisy, wnoisy, bound);
  int rc = !missing && count && worst <= tol && wnoisy <= bound ? 0 : 1;
  tpx_checkpoint_reader_destroy(ra); tpx_checkpoint_reader_destroy(rb);
  return rc;
}

static int cmd_torch(int argc, char **argv) {
  if (argc != 6) return 2;
  double tol = atof(argv[5]);
  tpx_checkpoint_reader *ra = open_ckpt(argv[2]);
  json_t *e = json_load_file(argv[3], 0, NULL);
  json_t *pa = json_object_get(json_object_get(json_object_get(e, "cases"), argv[4]), "params_after");
  if (!ra || !json_is_object(pa)) { fprintf(stderr, "cannot read the dump or the case\n"); return 2; }
  double worst = 0;
  const char *wname = "", *k;
  json_t *t;
  int missing = 0;
  json_object_foreach(pa, k, t) {
    int64_t ia = tpx_checkpoint_find(ra, k);
    if (ia < 0) {
      /* a tied alias torch lists under its own name */
      if (strcmp(k, "lm_head.weight")) { fprintf(stderr, "%s: missing\n", k); missing = 1; }
      continue;
    }
    int64_t n;
    float *a = read_all(ra, (size_t)ia, &n);
    if (!a) { missing = 1; continue; }
    double l2 = 0, sum = 0;
    for (int64_t i = 0; i < n; i++) { l2 += (double)a[i] * a[i]; sum += a[i]; }
    l2 = sqrt(l2);
    double el2 = json_real_value(json_object_get(t, "l2")), esum = json_real_value(json_object_get(t, "sum"));
    double d = fmax(rel(l2, el2), fabs(sum - esum) / fmax(el2, 1e-12));
    json_t *first = json_object_get(t, "first");
    for (size_t i = 0; i < json_array_size(first) && (int64_t)i < n; i++)
      d = fmax(d, fabs(a[i] - json_real_value(json_array_get(first, i))) / fmax(el2, 1e-12));
    if (d > worst) { worst = d; wname = k; }
    free(a);
  }
  printf("worst per-tensor diff vs torch %.3g in %s (tolerance %.3g)\n", worst, wname, tol);
  tpx_checkpoint_reader_destroy(ra); json_decref(e);
  return !missing && worst <= tol ? 0 : 1;
}
int main(int argc, char **argv) {
  int rc = 2;
  if (argc > 1 && !strcmp(argv[1], "steps")) rc = cmd_steps(argc, argv);
  else if (argc > 1 && !strcmp(argv[1], "params")) rc = cmd_params(argc, argv);
  else if (argc > 1 && !strcmp(argv[1], "torch")) rc = cmd_torch(argc, argv);
  if (rc == 2) fprintf(stderr, "usage: see the top of examples/train/check.c\n");
  return rc;
}
