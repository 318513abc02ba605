/* tpx/placement.h — DTensor-like placements: Shard(d), Replicate, Partial.
 *
 * A placement says how a tensor is laid out over one mesh dim. Shard(d)
 * splits tensor dim d with torch.chunk semantics (negative d counts from the
 * end and is normalised against the tensor rank when used). StridedShard is
 * FSDP2's _StridedShard(d, split_factor): the dim was first split by a later
 * mesh dim (TP) into split_factor pieces and each piece is split over this
 * mesh dim. Partial holds unreduced values with a reduce op.
 *
 * Joined says that a mesh dim is part of a flattened view that starts at an
 * earlier mesh dim: the placement of the view's first dim (the nearest
 * earlier dim that is not Joined) applies to the whole run of dims as to
 * one mesh dim whose size is their product and whose index is the rank's
 * row-major index over them. That is how a placement on a flattened
 * DeviceMesh view lays a tensor out: FSDP2 over "dp_shard_cp" puts Shard(0)
 * on dp_shard and Joined on cp, and rank (s, c) holds torch.chunk piece
 * s*cp + c of dp_shard*cp (docs/SEMANTICS.md "Context parallelism"). It is
 * never a TP style layout.
 *
 * Text forms: "replicate", "shard(-1)", "partial" (= sum), "partial(avg)",
 * "partial(max)", "partial(min)", "strided_shard(0,4)", "joined". */
#ifndef TPX_PLACEMENT_H
#define TPX_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/error.h"

TPX_BEGIN_DECLS

typedef enum tpx_placement_kind {
  TPX_REPLICATE = 0,
  TPX_SHARD = 1,
  TPX_PARTIAL = 2,
  TPX_STRIDED_SHARD = 3,
  TPX_JOINED = 4, /* part of the flattened view begun by an earlier dim */
} tpx_placement_kind;

typedef enum tpx_reduce_op {
  TPX_REDUCE_SUM = 0,
  TPX_REDUCE_AVG = 1,
  TPX_REDUCE_MAX = 2,
  TPX_REDUCE_MIN = 3,
} tpx_reduce_op;

/* Plain value. Zero-initialised it is Replicate. */
typedef struct tpx_placement {
  tpx_placement_kind kind;
  int32_t dim;          /* tensor dim for SHARD / STRIDED_SHARD; may be < 0 */
  tpx_reduce_op op;     /* for PARTIAL */
  int32_t split_factor; /* for STRIDED_SHARD (>= 1) */
} tpx_placement;

TPX_API tpx_placement tpx_placement_replicate(void);
TPX_API tpx_placement tpx_placement_shard(int32_t dim);
TPX_API tpx_placement tpx_placement_partial(tpx_reduce_op op);
TPX_API tpx_placement tpx_placement_strided_shard(int32_t dim,
                                                  int32_t split_factor);
TPX_API tpx_placement tpx_placement_joined(void);

/* True when the two are the same placement, comparing dims literally
 * (Shard(-1) != Shard(2), as torch compares them). */
TPX_API int tpx_placement_equal(tpx_placement a, tpx_placement b);

/* Normalise a shard dim against a tensor of `ndim` dims: -1 -> ndim-1.
 * TPX_OUT_OF_RANGE when not in [-ndim, ndim). Other kinds pass through. */
TPX_API tpx_status tpx_placement_normalize(tpx_placement p, int ndim,
                                           tpx_placement *out, tpx_error *err);

/* Parse a text form (surrounding whitespace allowed, case-insensitive
 * keyword). TPX_PARSE quoting the text on failure. */
TPX_API tpx_status tpx_placement_parse(const char *text, tpx_placement *out,
                                       tpx_error *err);
/* Write the text form into buf (always NUL-terminated when size > 0).
 * Returns the length it needed, as snprintf. "partial" for a sum. */
TPX_API int tpx_placement_format(tpx_placement p, char *buf, size_t size);

/* "sum", "avg", "max", "min"; a static string. */
TPX_API const char *tpx_reduce_op_name(tpx_reduce_op op);

TPX_END_DECLS

#endif /* TPX_PLACEMENT_H */
