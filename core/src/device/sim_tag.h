/* device/sim_tag.h — the sim memory space's pointer tags (private; also
 * used by tests to read and write sim buffers).
 *
 * A sim "device pointer" is a host pointer XOR TPX__SIM_TAG: bits 48..62
 * set, so on x86-64 (47-bit user addresses) and aarch64 (48-bit) it is
 * non-canonical and any host load or store through it faults. NULL stays
 * NULL. Pointer arithmetic within a buffer commutes with the tag (offsets
 * never carry into bit 48). Integer ops only (uintptr_t), so UBSan sees no
 * invalid pointer arithmetic. */
#ifndef TPX_DEVICE_SIM_TAG_H
#define TPX_DEVICE_SIM_TAG_H

#include <stdint.h>

#define TPX__SIM_TAG ((uintptr_t)0x5a5aULL << 48)

static inline void *tpx__sim_tag(const void *p) {
  return p ? (void *)((uintptr_t)p ^ TPX__SIM_TAG) : NULL;
}
static inline void *tpx__sim_untag(const void *p) {
  return p ? (void *)((uintptr_t)p ^ TPX__SIM_TAG) : NULL;
}
/* 1 when p carries the tag (a sim pointer), 0 for NULL and host pointers. */
static inline int tpx__sim_is_tagged(const void *p) {
  return ((uintptr_t)p & TPX__SIM_TAG) == TPX__SIM_TAG;
}

#endif /* TPX_DEVICE_SIM_TAG_H */
