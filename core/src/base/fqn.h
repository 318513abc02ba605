/* base/fqn.h — the one home of the dotted-name helpers every part uses on
 * module / parameter FQNs and architecture strings: the last atom, "is this
 * atom a layer index", and the generalized form with layer indices as '*'
 * (one line per layer stack in a diagnostic or a report). Internal. */
#ifndef TPX_BASE_FQN_H
#define TPX_BASE_FQN_H

#include <stddef.h>
#include <stdint.h>

/* 1 when `s` is a non-empty run of ASCII digits (a ModuleList index). */
int tpx__fqn_is_digits(const char *s);

/* The last dotted atom of `fqn` (all of it when there is no dot); a pointer
 * into `fqn`. */
const char *tpx__fqn_last_atom(const char *fqn);

/* The bare class name of an architecture string: "pkg.mod.<Class>" ->
 * "<Class>"; a pointer into `arch`. */
const char *tpx__fqn_bare_arch(const char *arch);

/* `fqn` with every all-digit atom replaced by '*' into `out` (`size` bytes,
 * truncated to fit, always terminated); the length written. */
size_t tpx__fqn_generalize(const char *fqn, char *out, size_t size);

/* The same, in a new malloc'd string (never truncated); NULL when out of
 * memory. The caller frees it. */
char *tpx__fqn_generalize_dup(const char *fqn);

/* A template of `fqn`: its all-digit atoms of under 18 characters, the
 * first `max_nums` of them, are parsed into `nums` and replaced by `mark`
 * in `out` (`size` bytes, truncated, terminated); the count parsed. */
int tpx__fqn_template(const char *fqn, char *out, size_t size, char mark,
                      int64_t *nums, int max_nums);

#endif /* TPX_BASE_FQN_H */
