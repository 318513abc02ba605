/* diag.c — tpx_diag_list: an append-only list of diagnostics (level, code,
 * subject, message, fix). Each diagnostic's strings live in one allocation.
 *
 * Not a logger: nothing is printed; reports render the list. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "tpx/diag.h"

typedef struct diag_item {
  tpx_diag_level level;
  char *code, *subject, *message, *fix; /* all inside one block at `code` */
} diag_item;

struct tpx_diag_list {
  diag_item *items;
  size_t count, cap;
};

tpx_status tpx_diag_list_create(tpx_diag_list **out, tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_diag_list_create: NULL out");
  *out = calloc(1, sizeof **out);
  if (!*out)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (diag)");
  return TPX_OK;
}

void tpx_diag_list_destroy(tpx_diag_list *list) {
  if (!list)
    return;
  for (size_t i = 0; i < list->count; i++) free(list->items[i].code);
  free(list->items);
  free(list);
}

tpx_status tpx_diag_add(tpx_diag_list *list, tpx_diag_level level,
                        const char *code, const char *subject, const char *fix,
                        const char *fmt, ...) {
  if (!list || !code || !fmt)
    return TPX_INVALID_ARGUMENT; /* no err argument in this signature */
  if (!subject)
    subject = "";
  if (!fix)
    fix = "";
  va_list ap;
  va_start(ap, fmt);
  int mlen = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (mlen < 0)
    return TPX_INVALID_ARGUMENT;
  size_t lc = strlen(code) + 1, ls = strlen(subject) + 1, lm = (size_t)mlen + 1,
         lf = strlen(fix) + 1;
  if (TPX_GROW(list->items, list->cap, list->count + 1, 8))
    return TPX_NO_MEMORY;
  char *block = malloc(lc + ls + lm + lf);
  if (!block)
    return TPX_NO_MEMORY;
  diag_item *d = &list->items[list->count];
  d->level = level;
  d->code = block;
  memcpy(d->code, code, lc);
  d->subject = d->code + lc;
  memcpy(d->subject, subject, ls);
  d->message = d->subject + ls;
  va_start(ap, fmt);
  vsnprintf(d->message, lm, fmt, ap);
  va_end(ap);
  d->fix = d->message + lm;
  memcpy(d->fix, fix, lf);
  list->count++;
  return TPX_OK;
}

size_t tpx_diag_count(const tpx_diag_list *list) {
  return list ? list->count : 0;
}

tpx_status tpx_diag_get(const tpx_diag_list *list, size_t index, tpx_diag *out,
                        tpx_error *err) {
  if (!list || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_diag_get: NULL argument");
  if (index >= list->count)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "diagnostic %zu out of range (list has %zu)", index,
                         list->count);
  const diag_item *d = &list->items[index];
  out->level = d->level;
  out->code = d->code;
  out->subject = d->subject;
  out->message = d->message;
  out->fix = d->fix;
  return TPX_OK;
}

size_t tpx_diag_count_at_least(const tpx_diag_list *list,
                               tpx_diag_level level) {
  size_t n = 0;
  if (!list)
    return 0;
  for (size_t i = 0; i < list->count; i++)
    if (list->items[i].level >= level)
      n++;
  return n;
}

const char *tpx_diag_level_name(tpx_diag_level level) {
  switch (level) {
  case TPX_DIAG_INFO: return "info";
  case TPX_DIAG_WARNING: return "warning";
  case TPX_DIAG_ERROR: return "error";
  default: return "unknown";
  }
}
