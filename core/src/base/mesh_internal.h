/* base/mesh_internal.h — the layout of tpx_mesh, shared inside core/src only.
 *
 * layout.c reads sizes and strides directly: tpx_layout_local_slice runs
 * millions of times while planning and must not go through checked getters. */
#ifndef TPX_BASE_MESH_INTERNAL_H
#define TPX_BASE_MESH_INTERNAL_H

#include <stdint.h>

#include "tpx/mesh.h"

/* A flattened view over real dims dims[0..ndims), increasing mesh order. */
typedef struct tpx__mesh_view {
  char name[TPX_MESH_NAME_MAX];
  int ndims;
  int dims[TPX_MESH_MAX_DIMS];
  int64_t size;
} tpx__mesh_view;

struct tpx_mesh {
  int ndim;
  int64_t world;
  char names[TPX_MESH_MAX_DIMS][TPX_MESH_NAME_MAX];
  int64_t sizes[TPX_MESH_MAX_DIMS];
  /* rank = sum(coords[i] * strides[i]); the last dim has stride 1. */
  int64_t strides[TPX_MESH_MAX_DIMS];
  tpx__mesh_view *views; /* owned; nviews entries, capacity cap_views */
  int nviews;
  size_t cap_views;
};

#endif /* TPX_BASE_MESH_INTERNAL_H */
