/* tpx/match.h — resolving plan keys against a model's module tree, as
 * torch >= 2.9 parallelize_module does (docs/SEMANTICS.md "Plans and
 * matching").
 *
 * A key is split on "."; each atom is matched shell-style (fnmatch: `*`,
 * `?`, `[...]`, `[!...]`; case-sensitive; backslash is literal; never across
 * a dot) against the current module's children in insertion order, and every
 * matching child is recursed into with the rest of the key. The key ""
 * applies to the root module. Matches of one entry are listed in that walk
 * order (depth-first, children in insertion order).
 *
 * Diagnostics (tpx/diag.h), added to `diags` when it is not NULL:
 *  - warning "unmatched-key": a required entry matches no module (torch's
 *    parallelize_module warns and skips it; what it meant to style stays
 *    replicated); the message names the key and the deepest atom that
 *    failed, the fix suggests the closest existing child names, removing
 *    the key or marking the entry optional;
 *  - info "unmatched-key": the same for an optional entry;
 *  - error "duplicate-match": two entries resolve to the same module (torch
 *    would distribute it twice); one diagnostic per pair of entries, naming
 *    both keys, the first such module and how many more;
 *  - warning "replicated-by-omission": a parameter of a module no key covers
 *    (no key matches the module or any ancestor: torch's distribute_module
 *    places every submodule's parameters of a styled module), while a sibling
 * module (same parent) is sharded by a colwise / rowwise / vocab / gemma4 key
 * and holds a parameter of the same name and shape (e.g. v_proj left out next
 * to q_proj and k_proj). One diagnostic per generalized name (numeric atoms as
 * '*'), subject "model.layers.*.self_attn.v_proj.weight", with a count. Tied
 *    parameters (tied_to >= 0) are not reported.
 * Diagnostics are in entry order (unmatched / duplicate per entry), then the
 * omission warnings in module order.
 *
 * Not the application of styles to parameters (tpx/sharding). */
#ifndef TPX_MATCH_H
#define TPX_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/model.h"
#include "tpx/plan.h"

TPX_BEGIN_DECLS

typedef struct tpx_match tpx_match;

/* Resolve every entry of `plan` against `model`. Returns TPX_OK when the
 * walk completed, also when error-level diagnostics were recorded (check
 * tpx_diag_count_at_least(diags, TPX_DIAG_ERROR)); fails only on bad
 * arguments or out of memory. *out is a new match owned by the caller; it
 * does not reference plan or model after the call. */
TPX_API tpx_status tpx_match_plan(const tpx_plan *plan, const tpx_model *model,
                                  tpx_match **out, tpx_diag_list *diags,
                                  tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_match_destroy(tpx_match *m);

/* Number of plan entries the match was made for. */
TPX_API size_t tpx_match_entry_total(const tpx_match *m);
/* Modules matched by plan entry `entry` (0 when out of range). */
TPX_API size_t tpx_match_entry_count(const tpx_match *m, size_t entry);
/* The i-th module index matched by `entry`, in match order; -1 when out of
 * range. */
TPX_API int64_t tpx_match_entry_module(const tpx_match *m, size_t entry,
                                       size_t i);
/* The entry applied to `module` (the first one when several matched it), or
 * -1 when none / out of range. */
TPX_API int64_t tpx_match_module_entry(const tpx_match *m, int64_t module);

/* fnmatch of one name atom against one pattern atom with Python's fnmatch
 * rules (see above); both NUL-terminated. 1 on match. Exposed for tools and
 * tests. */
TPX_API int tpx_match_atom(const char *pattern, const char *name);
/* A dotted `pattern` against a dotted `fqn`, atom for atom with
 * tpx_match_atom (the same number of atoms; `*` never crosses a dot), as
 * fp32 and expert-parameter patterns are matched. 1 on match (0 also when
 * out of memory). */
TPX_API int tpx_match_fqn(const char *pattern, const char *fqn);

TPX_END_DECLS

#endif /* TPX_MATCH_H */
