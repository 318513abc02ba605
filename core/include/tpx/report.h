/* tpx/report.h — the planning report: tpx-report/1 JSON
 * (docs/REPORT_FORMAT.md) and the text form for a person.
 *
 * Built from a tpx_sharding plus what selection knew (the source of the plan,
 * the plugin, the trace, and selection-time diagnostics such as
 * heads-not-divisible). The report always carries the applied plan, also
 * when validation failed and at tp == 1.
 *
 * Additions to the base tpx-report/1 fields (docs/REPORT_FORMAT.md):
 * "selection.upstream" (always,
 * TPX_UPSTREAM_VERSION) and "selection.strategy" (an object of the strategy
 * lines, when given); the text form prints them as "Upstream:" and
 * "Strategy:" lines under the plan source.
 *
 * Not a printer: the functions return malloc'd strings; the CLI prints. */
#ifndef TPX_REPORT_H
#define TPX_REPORT_H

#include <stddef.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/memory.h"
#include "tpx/select.h"
#include "tpx/sharding.h"

TPX_BEGIN_DECLS

typedef struct tpx_report_options {
  size_t struct_size;
  const char *plan_source; /* "custom" | "plugin" | "hf" | "default"; NULL
                              = "custom" */
  const char *plugin_name; /* may be NULL */
  const char *plugin_path; /* may be NULL */
  const char *function;    /* may be NULL */
  int sequence_parallel;
  size_t num_trace;
  const char *const *trace;             /* selection trace lines */
  const tpx_diag_list *selection_diags; /* listed before the sharding's; may
                                           be NULL */
  int indent;                           /* JSON indent (0 = compact) */
  /* Added after `indent` (a caller whose struct_size ends at `indent` gets
   * none): the upstream strategy's properties as "key=value" lines, from
   * tpx_selection_strategy (name, tensor_parallel, activation_checkpointing,
   * mp_param_dtype, mp_reduce_dtype, mp_output_dtype, ...). */
  size_t num_strategy;
  const char *const *strategy;
  /* Training memory per rank (tpx/memory.h): every per_rank item gets
   * `memory`; NULL = the defaults (adamw, no activations). */
  const tpx_memory_options *memory;
  /* >= 0: every parameter gets local_shape, global_offset and local_bytes
   * of this rank's slice (JSON); -1 = none. */
  int64_t slices_rank;
  /* The selection the plan came from (tpx/select.h), handed over whole;
   * NULL = none. It supplies what the fields above leave unset (NULL / 0):
   * plan_source, plugin_name, plugin_path, function, the trace and the
   * strategy lines. Borrowed during the call. Added after slices_rank: an
   * older, shorter struct_size means none. */
  const tpx_selection *selection;
} tpx_report_options;

#define TPX_REPORT_OPTIONS_INIT                                                \
  {                                                                            \
    sizeof(tpx_report_options), NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, 2,   \
        0, NULL, NULL, -1, NULL                                                \
  }

/* Which upstream release's behaviour the selection, FSDP units and reports
 * reproduce (validate_tp_mesh at tp > 1 for every plan, before choosing it;
 * untied input and output embeddings as FSDP units of their own). Plans
 * themselves follow docs/SEMANTICS.md "Family plans". */
#define TPX_UPSTREAM_VERSION "NeMo Automodel 0.7.0"

/* tpx-report/1 JSON. *out is malloc'd; free() it. `opts` may be NULL. */
TPX_API tpx_status tpx_report_json(const tpx_sharding *sh,
                                   const tpx_report_options *opts, char **out,
                                   tpx_error *err);
/* The text report. *out is malloc'd; free() it. */
TPX_API tpx_status tpx_report_text(const tpx_sharding *sh,
                                   const tpx_report_options *opts, char **out,
                                   tpx_error *err);
/* The report as one self-contained HTML page (inline CSS and SVG, no
 * script or network): verdict, diagnostics, per-rank memory as stacked bars,
 * the module tree with styles, every parameter's block map by rank (hover
 * for offsets and bytes), collectives per styled module. *out is malloc'd;
 * free() it. */
TPX_API tpx_status tpx_report_html(const tpx_sharding *sh,
                                   const tpx_report_options *opts, char **out,
                                   tpx_error *err);
/* The first screen of the text report alone: verdict, model, mesh, plan
 * source, per-rank memory, the errors (with the warnings that follow from
 * them folded) and the count of other warnings. *out is malloc'd. */
TPX_API tpx_status tpx_report_summary(const tpx_sharding *sh,
                                      const tpx_report_options *opts,
                                      char **out, tpx_error *err);
/* 1 when neither the selection diagnostics nor the sharding hold an error. */
TPX_API int tpx_report_ok(const tpx_sharding *sh,
                          const tpx_report_options *opts);

/* "1.50 GiB", "12.0 MiB", "512 B" into buf; returns buf. */
TPX_API const char *tpx_format_bytes(int64_t bytes, char *buf, size_t size);

TPX_END_DECLS

#endif /* TPX_REPORT_H */
