/* base/file.h — the one way the library opens a file a user named (a
 * config, a safetensors file or index, a plan, a checkpoint's rank file):
 * without ever blocking, and only when it is a regular file. A FIFO would
 * block the open until a writer came (forever), a device such as /dev/zero
 * never ends, and a directory cannot be read. Internal. */
#ifndef TPX_BASE_FILE_H
#define TPX_BASE_FILE_H

#include <stddef.h>
#include <sys/stat.h>

#include "tpx/error.h"

/* Opens `path` read-only (close-on-exec) and fills *sb with its fstat.
 * The open itself cannot block (O_NONBLOCK, cleared again once the file is
 * known to be regular). Anything but a regular file is refused with
 * TPX_INVALID_ARGUMENT "PATH: not a regular file (a FIFO)" naming what it
 * is; a missing path is TPX_NOT_FOUND, another failure TPX_IO with the
 * system's reason.
 * *fd is -1 on failure. */
tpx_status tpx__file_open(const char *path, int *fd, struct stat *sb,
                          tpx_error *err);

/* Reads the whole regular file `path` into a malloc'd, NUL-terminated
 * buffer (*out, *len bytes, the NUL not counted); a file larger than
 * max_bytes is refused (TPX_OUT_OF_RANGE naming the path and the limit).
 * Errors name the path. */
tpx_status tpx__file_read(const char *path, size_t max_bytes, char **out,
                          size_t *len, tpx_error *err);

/* What a non-regular file is, for messages: "a FIFO", "a directory", ... */
const char *tpx__file_kind_name(mode_t mode);

#endif /* TPX_BASE_FILE_H */
