/* dump.c — tpx-train's --dump-params and --dump-grads files: the gathered
 * parameters (or pre-clip gradients of every step) as one f32 safetensors
 * file that rank 0 writes, for the tests' comparisons (check.c), whole or
 * not at all (outfile.h). Every call is collective: each rank joins every
 * gather. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

/* Header of a safetensors file holding every non-tied parameter in f32:
 * once (steps 0, named as the parameters) or for each of `steps` steps k
 * (named PARAM@k, step-major). */
static char *dump_header(const tpx_model *model, int64_t steps, size_t *len) {
  size_t cap = 4096, n = 0;
  char *h = malloc(cap);
  int64_t off = 0;
  if (!h)
    return NULL;
  n += (size_t)snprintf(h, cap, "{");
  for (int64_t k = 0; k < (steps ? steps : 1); k++)
    for (size_t p = 0; p < tpx_model_num_params(model); p++) {
      tpx_param_info pi;
      tpx_model_param(model, (int64_t)p, &pi, NULL);
      if (pi.tied_to >= 0)
        continue;
      char dims[256] = "";
      int64_t numel = 1;
      for (int d = 0; d < pi.ndim; d++) {
        size_t dl = strlen(dims);
        snprintf(dims + dl, sizeof dims - dl, "%s%lld", d ? "," : "",
                 (long long)pi.shape[d]);
        numel *= pi.shape[d];
      }
      char item[1024], suffix[32] = "";
      if (steps)
        snprintf(suffix, sizeof suffix, "@%lld", (long long)k);
      int il = snprintf(item, sizeof item,
                        "%s\"%s%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_"
                        "offsets\":[%lld,%lld]}",
                        n > 1 ? "," : "", pi.fqn, suffix, dims, (long long)off,
                        (long long)(off + 4 * numel));
      off += 4 * numel;
      if (n + (size_t)il + 16 > cap) {
        char *nh = realloc(h, cap = 2 * cap + (size_t)il);
        if (!nh) {
          free(h);
          return NULL;
        }
        h = nh;
      }
      memcpy(h + n, item, (size_t)il);
      n += (size_t)il;
    }
  h[n++] = '}';
  while (n % 8) h[n++] = ' ';
  *len = n;
  return h;
}

/* Rank 0 opens `path` (a temporary renamed into place by tr_dump_close,
 * outfile.h) and writes the header (of `steps` steps, see dump_header);
 * the other ranks get an unopened *out and TPX_OK. */
tpx_status tr_dump_open(const char *path, const tpx_model *model, int64_t steps,
                        tr_rank *r, tr_file *out, tpx_error *err) {
  memset(out, 0, sizeof *out);
  if (!tr_rank_is_root(r))
    return TPX_OK;
  size_t hl = 0;
  char *h = dump_header(model, steps, &hl);
  unsigned char len8[8];
  for (int i = 0; i < 8; i++)
    len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  tpx_status s = TPX_OK;
  if (!h)
    s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  else if (!(s = tr_file_open(out, path, err)) &&
           (fwrite(len8, 1, 8, out->f) != 8 || fwrite(h, 1, hl, out->f) != hl))
    s = tpx_error_set(err, TPX_IO, "%s: cannot write: %s", path,
                      strerror(errno));
  free(h);
  return s;
}

/* Append every non-tied parameter (grads 0) or its gradient (grads 1),
 * gathered, to f (rank 0; f NULL elsewhere). Collective: every rank calls
 * it, and every rank joins each gather even after an error. A write error
 * (rank 0 alone) goes to *ws, not to the returned status, so it never
 * takes rank 0 out of collectives the other ranks still run. */
tpx_status tr_dump_append(tr_file *f, const tpx_model *model, tr_rank *r,
                          int grads, tpx_status s, tpx_status *ws,
                          tpx_error *err) {
  float *buf = NULL;
  for (size_t p = 0; p < tpx_model_num_params(model); p++) {
    tpx_param_info pi;
    tpx_model_param(model, (int64_t)p, &pi, NULL);
    if (pi.tied_to >= 0)
      continue;
    int64_t n = 1;
    for (int d = 0; d < pi.ndim; d++) n *= pi.shape[d];
    float *nb = realloc(buf, sizeof(float) * (size_t)(n ? n : 1));
    if (!nb) {
      s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      break;
    }
    buf = nb;
    tpx_status g =
        tr_rank_gather(r, (int64_t)p, grads, buf, err); /* collective */
    if (g && !s)
      s = g;
    if (f->f && !s && !*ws &&
        fwrite(buf, sizeof(float), (size_t)n, f->f) != (size_t)n)
      *ws = tpx_error_set(err, TPX_IO, "%s: cannot write: %s", f->path,
                          strerror(errno));
  }
  free(buf);
  return s;
}

tpx_status tr_dump_close(tr_file *f, tpx_status s, tpx_error *err) {
  if (s) {
    tr_file_discard(f); /* the final name keeps what it held */
    return s;
  }
  return tr_file_commit(f, err);
}

/* --dump-params: the gathered parameters after the last step, as an f32
 * safetensors file (rank 0 writes; every rank joins each gather). */
tpx_status tr_dump_params(const char *path, const tpx_model *model, tr_rank *r,
                          tpx_error *err) {
  tr_file f;
  tpx_status ws = tr_dump_open(path, model, 0, r, &f, err);
  tpx_status s = tr_dump_append(&f, model, r, 0, TPX_OK, &ws, err);
  return tr_dump_close(&f, s ? s : ws, err);
}
