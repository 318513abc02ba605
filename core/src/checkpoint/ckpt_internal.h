/* checkpoint/ckpt_internal.h — shared by the files of the checkpoint area:
 * the reader object, and the geometry of a box inside a row-major tensor
 * (which byte runs of the file hold it). Not public. */
#ifndef TPX_CHECKPOINT_CKPT_INTERNAL_H
#define TPX_CHECKPOINT_CKPT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "device/elem.h"
#include "model/st_header.h"
#include "tpx/checkpoint.h"

struct tpx_checkpoint_reader {
  tpx__st_load load;
  int *fds;                   /* [load.num_files] */
  const unsigned char **maps; /* [load.num_files] with io mmap, else NULL */
  int num_threads;
  int io_method; /* TPX_CHECKPOINT_IO_PREAD or _MMAP */
  atomic_llong bytes_read, read_calls;
};

/* Threads to share `items` units of work on rd (reader.c): its thread
 * count, no more than the online CPUs or the items; at least 1. */
size_t tpx__ckpt_threads(const tpx_checkpoint_reader *rd, size_t items);

/* A box of a row-major tensor as equal runs of contiguous elements: run r
 * starts at element run_start(r) of the tensor; the box's elements, in
 * row-major box order, are runs [0, num_runs) each of run_elems. The
 * trailing dims the box covers fully are merged into the run, so a dim-0
 * slice (or the whole tensor) is one run and a dim-1 slice of a matrix is
 * one run per row. */
typedef struct tpx__box_runs {
  int outer;                           /* dims before the run dim */
  int64_t offset[TPX_MAX_TENSOR_DIMS]; /* box offsets of those dims */
  int64_t length[TPX_MAX_TENSOR_DIMS]; /* box lengths of those dims */
  int64_t stride[TPX_MAX_TENSOR_DIMS]; /* tensor element strides */
  int64_t first;                       /* element offset inside a row */
  int64_t run_elems, num_runs, numel;
} tpx__box_runs;

/* Checks `slice` against `shape` (same ndim, inside) and fills *out.
 * `what` names the tensor in errors. */
tpx_status tpx__box_runs_init(const int64_t *shape, int ndim,
                              const tpx_slice *slice, const char *what,
                              tpx__box_runs *out, tpx_error *err);
/* Element offset in the tensor of the start of run r. */
int64_t tpx__box_run_start(const tpx__box_runs *g, int64_t r);

/* dequant.c: how an FP8 weight read into floats is dequantized (its
 * `_scale_inv` in the same reader, widened to f32). scale NULL: it is not
 * (not F8, no scale, or not a float destination). */
typedef struct tpx__ckpt_dequant {
  float *scale; /* [the scale's numel], or NULL */
  int form;     /* 1: 128 x 128 blocks, 2: one per tensor, 3: per expert */
  int64_t rows, cols;                 /* the stored tensor's last two dims */
  int64_t off_lead, off_row, off_col; /* its place in the weight (rank file) */
  int64_t brows, bcols;               /* the weight's block grid */
  int64_t block;                      /* a block's rows and cols */
} tpx__ckpt_dequant;

/* 1 when an F8 weight can be dequantized into `d` (f64/f32/f16/bf16). */
int tpx__ckpt_dequant_target(tpx_dtype d);
/* Fills *dq for reading stored tensor t into `dtype` (all zero when there
 * is nothing to dequantize); TPX_VALIDATION naming the file, the weight
 * and its scale when the scale fits no form. Free with _free. */
tpx_status tpx__ckpt_dequant_init(const tpx_checkpoint_reader *rd,
                                  const tpx__st_tensor *t, tpx_dtype dtype,
                                  tpx__ckpt_dequant *dq, tpx_error *err);
void tpx__ckpt_dequant_free(tpx__ckpt_dequant *dq);

/* Reads box elements [e0, e1) of stored tensor `t` into dst (the element
 * e0 of the box lands at dst[0]) converting to `dtype`, dequantized by dq
 * when dq holds a scale (dq may be NULL). Thread-safe. */
tpx_status tpx__ckpt_read_elems(const tpx_checkpoint_reader *rd,
                                const tpx__st_tensor *t, const tpx__box_runs *g,
                                int64_t e0, int64_t e1, tpx_dtype dtype,
                                void *dst, const tpx__ckpt_dequant *dq,
                                tpx_error *err);

/* The stored tensor holding the model tensor `name`: under that name, or
 * under a name one of the model's name aliases gives it (a checkpoint in
 * the other naming); -1 when neither is stored. */
int64_t tpx__ckpt_find_param_name(const tpx_checkpoint_reader *rd,
                                  const tpx_model *model, const char *name);

/* 1 when tpx_checkpoint_convert can do from -> to (device/elem.h). */
#define tpx__ckpt_can_convert tpx__elem_can_convert

/* transpose.c: dst[j * dst_stride + i] = src[i * src_stride + j] for
 * i < rows, j < cols (elements of sz bytes; the buffers do not overlap). */
void tpx__ckpt_transpose(void *dst, int64_t dst_stride, const void *src,
                         int64_t src_stride, int64_t rows, int64_t cols,
                         size_t sz);

/* fold.c: tpx_checkpoint_param_source, and whether the stored tensor holds
 * its box transposed (*transpose, may be NULL). */
tpx_status tpx__ckpt_param_source(const tpx_checkpoint_reader *rd,
                                  const tpx_model *model, int64_t param,
                                  int64_t k, tpx_checkpoint_source *out,
                                  int *transpose, tpx_error *err);

/* How an FP8 weight the model knows (tpx_model_quantized) passes the
 * checks: TPX__FP8_CHECK, stored as it is (the model check); a dtype,
 * read into a buffer of that dtype (its own F8 dtype: the stored bytes;
 * f64/f32/f16/bf16: dequantized, dequant.c); TPX__FP8_FLOAT, read into
 * the buffers' floats (read_rank: dequantized). */
#define TPX__FP8_CHECK ((int)TPX_DTYPE_INVALID)
#define TPX__FP8_FLOAT (-1)

/* fold.c: a parameter read from several stored tensors (per-expert
 * tensors of a fused expert parameter, a renamed router). Check: every
 * source is stored with its box's shape and the parameter's dtype, or is
 * an FP8 weight `into` allows (above) (or the parameter is not stored:
 * TPX_NOT_FOUND). Read: the box `slice` of the parameter into dst (dense,
 * dtype), from the sources it intersects. */
tpx_status tpx__ckpt_check_sources(const tpx_checkpoint_reader *rd,
                                   const tpx_model *model, int64_t param,
                                   int into, tpx_error *err);
/* 1 when stored tensor `t` may stand for a parameter of another dtype
 * under `into` (above): an FP8 weight the model knows, read as itself. */
int tpx__ckpt_fp8_ok(const tpx_model *model, const tpx__st_tensor *t, int into);
tpx_status tpx__ckpt_read_folded(const tpx_checkpoint_reader *rd,
                                 const tpx_model *model, int64_t param,
                                 const tpx_slice *slice, tpx_dtype dtype,
                                 void *dst, size_t dst_bytes, tpx_error *err);

#endif /* TPX_CHECKPOINT_CKPT_INTERNAL_H */
