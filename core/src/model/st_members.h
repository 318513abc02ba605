/* model/st_members.h — the members of a safetensors header's top-level
 * JSON object, found one at a time without building the document: each
 * value is then parsed on its own, so a header of a million tensors never
 * becomes one tree of a million objects (about 1 KB per tensor). Internal
 * to the model area. */
#ifndef TPX_MODEL_ST_MEMBERS_H
#define TPX_MODEL_ST_MEMBERS_H

#include <stddef.h>

typedef struct tpx__st_member {
  size_t key, key_len;     /* the key's bytes between its quotes */
  size_t value, value_len; /* the value's bytes */
  int plain; /* the key has no escape and only printable ASCII: its bytes
                are its text */
} tpx__st_member;

/* Reads the next member of the JSON object text[0..len). *pos starts at 0
 * and is advanced past each member. Returns 1 with *m filled, 0 at the end
 * of the object (nothing but whitespace may follow it), -1 when the text
 * is not shaped like one JSON object. Only the shape is checked (strings,
 * brackets, colons, commas): a value's own syntax is for whoever parses
 * it, and a text this refuses is for a full parser to name the fault of. */
int tpx__st_next_member(const char *text, size_t len, size_t *pos,
                        tpx__st_member *m);

#endif /* TPX_MODEL_ST_MEMBERS_H */
