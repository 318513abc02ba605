/* model/expert_fold.h — per-expert checkpoint tensors folded onto the fused
 * 3-D expert parameters of transformers-5 MoE modules (private, used by the
 * safetensors reader and the text report). */
#ifndef TPX_MODEL_EXPERT_FOLD_H
#define TPX_MODEL_EXPERT_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/error.h"
#include "tpx/layout.h"
#include "tpx/model.h"

/* Folding state of one safetensors load: how many per-expert slices each
 * fused parameter received. Zero-initialise; free with
 * tpx__expert_fold_free. */
typedef struct tpx__expert_fold {
  int64_t *counts;      /* [num_params of the model when the first fold ran] */
  unsigned char **seen; /* [n]: per fused parameter, one flag per slice
                           (expert e's gate at 2e, up at 2e+1; down at e),
                           so a slice given twice is not counted twice */
  size_t n;
  size_t folded; /* checkpoint tensors folded (or renamed) so far */
} tpx__expert_fold;

/* If checkpoint tensor `name` is one expert's slice of a fused parameter the
 * model holds (…experts.{e}.gate_proj|up_proj|down_proj.weight, Mixtral's
 * …block_sparse_moe.experts.{e}.w1|w3|w2.weight) or Mixtral's renamed
 * router (…block_sparse_moe.gate.weight -> …mlp.gate.weight), check its
 * shape and dtype against that slice and set *folded = 1; otherwise
 * *folded = 0 and nothing is checked. A slice of the wrong shape or dtype is
 * a TPX_VALIDATION error naming both tensors (`file` is the checkpoint
 * file), and so is a slice that an earlier tensor already gave (e.g.
 * experts.0.gate_proj and experts.0.w1). */
tpx_status tpx__expert_fold_try(tpx__expert_fold *f, const tpx_model *model,
                                const char *name, const int64_t *shape,
                                int ndim, tpx_dtype dtype, const char *file,
                                int *folded, tpx_error *err);
/* After every tensor: each fused parameter that received slices must have
 * received all of them (2 per expert for gate_up_proj, 1 for down_proj). */
tpx_status tpx__expert_fold_finish(const tpx__expert_fold *f,
                                   const tpx_model *model, tpx_error *err);
void tpx__expert_fold_free(tpx__expert_fold *f);

/* The mapping in one sentence, for reports; NULL when the model holds no
 * fused expert parameter. */
const char *tpx__expert_fold_note(const tpx_model *model);

/* The same for parameters whose recorded sources are stored transposed
 * (tpx_model_add_param_source); NULL when none is. */
const char *tpx__fold_sources_note(const tpx_model *model);

/* Naming schemes of per-expert checkpoint tensors. */
enum {
  TPX__EXPERT_NAMES_HF = 1,
  TPX__EXPERT_NAMES_MIXTRAL = 2,
  /* the sources the conversion rules fused the parameter from, as
   * recorded by tpx__expert_fold_add_source (any MoE the rules describe,
   * or a concatenation such as bailing_hybrid's conv1d) */
  TPX__EXPERT_NAMES_RULES = 3
};

/* Records (fold_sources.c) that parameter `param` is stored, in part, as
 * checkpoint tensor `name` (copied) at `box` of it, transposed or not
 * (tpx_model_add_param_source says what the tensor's shape then is). A
 * parameter's sources come in a run; a name is a source once. No check of
 * the box here: tpx_model_add_param_source makes them. */
tpx_status tpx__expert_fold_add_source(tpx_model *model, int64_t param,
                                       const char *name, const tpx_slice *box,
                                       int transpose, tpx_error *err);
/* The number of recorded sources of `param` (0: none) and the index of the
 * first in *first. */
int64_t tpx__expert_fold_rules_find(const tpx_model *model, int64_t param,
                                    size_t *first);
/* The index in the model's recorded sources of the one named `name`, or
 * -1. */
int64_t tpx__fold_source_find(const tpx_model *model, const char *name);
/* The shape a source of box `box` is stored with, leading length-1 dims
 * left out (the last two kept when transposed) and the last two swapped
 * when transposed, into shape; its ndim. */
int tpx__fold_source_shape(const tpx_slice *box, int transpose, int64_t *shape);
/* 1 when a stored tensor of shape[ndim] fits box `box`: the box's lengths
 * (the last two swapped when transposed) with any number of leading
 * length-1 dims left out. */
int tpx__fold_source_fits(const tpx_slice *box, int transpose,
                          const int64_t *shape, int ndim);
/* split_sources.c: stored tensors bigger than their parameters, each
 * parameter's source box reaching past it (tpx_model_add_split_source,
 * tpx_model_add_param_source_box). */
struct tpx__fold_src;
/* fold_sources.c: source `first` (chained by `next`) names the tensor a new
 * source of `param` (box, transpose) names too: they must agree on the stored
 * shape and transposition, the parameters on dtype, and `param` must not hold
 * it already. *last gets the chain's end. */
tpx_status tpx__fold_source_share(const tpx_model *model, int64_t param,
                                  int64_t first, const tpx_slice *box,
                                  int transpose, const char *name,
                                  int64_t *last, tpx_error *err);
/* What of its box source `src` fills of its parameter (*in_param) and where
 * that lies in the stored tensor (*in_stored, its own dims); 0 when
 * nothing. */
int tpx__fold_source_part(const tpx_model *model,
                          const struct tpx__fold_src *src, tpx_slice *in_param,
                          tpx_slice *in_stored);
/* Every stored tensor shared by parameters or bigger than its parameter is
 * tiled by its parts (TPX_VALIDATION naming the tensor and parameters). */
tpx_status tpx__fold_check_stored(const tpx_model *model, tpx_error *err);
/* 1 when source i is a part of a bigger stored tensor: shared with other
 * parameters, or its box reaches past its parameter. */
int tpx__fold_source_is_part(const tpx_model *model, size_t i);
/* "'a' [0:4, 0:8], 'b' [4:6, 0:8], ..." of the parts of the stored tensor
 * whose first source is `first` (at most `max`), into buf; returns buf. */
const char *tpx__fold_parts_text(const tpx_model *model, int64_t first, int max,
                                 char *buf, size_t size);
/* For reports: how many stored tensors are cut into parameters, the
 * first one's parts, into buf; NULL when none is. */
const char *tpx__fold_split_note(const tpx_model *model, char *buf,
                                 size_t size);

/* "[o0:e0, o1:e1, ...]" of a box into buf; returns buf. */
const char *tpx__fold_box_text(char *buf, size_t size, const tpx_slice *box);

/* The checkpoint tensors parameter `param` is made of under naming scheme
 * `scheme`: 2E for …mlp.experts.gate_up_proj [E, 2I, H] (source 2e is
 * expert e's gate rows [0, I), 2e+1 its up rows [I, 2I)), E for
 * …mlp.experts.down_proj, 1 for …mlp.gate.weight under the Mixtral scheme
 * (the renamed router), 0 for any other parameter. */
int64_t tpx__expert_fold_num_sources(const tpx_model *model, int64_t param,
                                     int scheme);
/* Source k (0 <= k < count): its tensor name into name[size] and its box in
 * the parameter (param's ndim; the source tensor's shape is the box's
 * lengths without the leading length-1 expert dim for the fused experts,
 * the whole box for the router; *transpose (may be NULL) 1 when the
 * tensor holds the box transposed: only recorded sources are). */
tpx_status tpx__expert_fold_source(const tpx_model *model, int64_t param,
                                   int scheme, int64_t k, char *name,
                                   size_t size, tpx_slice *box, int *transpose,
                                   tpx_error *err);

#endif /* TPX_MODEL_EXPERT_FOLD_H */
