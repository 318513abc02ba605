/* source_digest.c — "tpx.source" of the rank files: a digest of every byte
 * of the source checkpoint's files (headers and tensor data), so that rank
 * files cut from two checkpoints of one model (two training steps: the same
 * names and headers, other values) do not merge.
 *
 * Why the whole source, read once per run: every rank file of a run must
 * carry the same value, and a `--rank` run reads only its own slice (and
 * the kernel copies most of it without passing it through user space), so
 * no rank could digest the bytes it copies and agree with the others. Each
 * run instead reads the source's files once, sequentially, by pread (no
 * SIGBUS if one is truncated underneath: a short read names it), in chunks
 * of CHUNK bytes hashed by up to the reader's num_threads threads, while
 * the rank files are being written (rankfile_write.c waits for the value
 * before it seals the first file).
 *
 * The value: "xxh64:" + 16 hex digits, XXH64 (seed 0) of, for each source
 * file in the reader's order, its base name and a NUL, its size (8 bytes
 * little-endian) and the XXH64 of each of its CHUNK-byte chunks (8 bytes
 * little-endian each). It depends on the files' names and bytes only (not
 * on their directory, the mesh, the rank or the thread count). Not the run
 * id (rankfile_ids.c). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the state on the stack (libxxhash, Debian's libxxhash-dev) */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/rankfile_impl.h"

#define CHUNK ((int64_t)64 << 20) /* bytes of a chunk: a unit of work */
#define READ_SIZE ((size_t)1 << 20)

/* One chunk: bytes [off, off + len) of file `file`. */
typedef struct chunk {
  size_t file;
  int64_t off, len;
  uint64_t hash;
} chunk;

/* The digest job: what the hashing threads share; `next`, `stop`, `st`
 * and `err` under `lock`; the result under `done_lock`. */
struct tpx__source_digest {
  const tpx_checkpoint_reader *rd;
  chunk *chunks;
  size_t num_chunks, next;
  int stop; /* no more chunks: the run failed */
  pthread_mutex_t lock;
  tpx_status st;
  tpx_error err;
  pthread_t tids[64];
  size_t num_threads;
  pthread_mutex_t done_lock;
  int done;       /* threads joined, value or st final */
  char value[32]; /* "xxh64:" + 16 hex */
};

/* The XXH64 of chunk c, read with pread into buf (READ_SIZE bytes). */
static tpx_status hash_chunk(const tpx_checkpoint_reader *rd, chunk *c,
                             unsigned char *buf, tpx_error *err) {
  const char *path = rd->load.files[c->file].path;
  int fd = rd->fds[c->file];
  XXH64_state_t s;
  XXH64_reset(&s, 0);
  for (int64_t at = 0; at < c->len;) {
    size_t want =
        c->len - at < (int64_t)READ_SIZE ? (size_t)(c->len - at) : READ_SIZE;
    ssize_t r = pread(fd, buf, want, (off_t)(c->off + at));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return tpx_error_set(
          err, TPX_IO, "%s: cannot read it to digest the source: %s", path,
          r < 0 ? strerror(errno)
                : "the file is shorter than when it was opened");
    XXH64_update(&s, buf, (size_t)r);
    at += r;
  }
  c->hash = XXH64_digest(&s);
  return TPX_OK;
}

/* One hashing thread: takes the next chunk until none is left or a thread
 * failed. */
static void *hash_worker(void *arg) {
  tpx__source_digest *j = arg;
  unsigned char *buf = malloc(READ_SIZE);
  tpx_error err = {0};
  tpx_status st = buf ? TPX_OK
                      : tpx_error_set(&err, TPX_NO_MEMORY,
                                      "out of memory digesting the source");
  while (st == TPX_OK) {
    pthread_mutex_lock(&j->lock);
    size_t k = j->st == TPX_OK && !j->stop && j->next < j->num_chunks
                   ? j->next++
                   : SIZE_MAX;
    pthread_mutex_unlock(&j->lock);
    if (k == SIZE_MAX)
      break;
    st = hash_chunk(j->rd, &j->chunks[k], buf, &err);
  }
  free(buf);
  pthread_mutex_lock(&j->lock);
  if (st != TPX_OK && j->st == TPX_OK) {
    j->st = st;
    j->err = err;
  }
  pthread_mutex_unlock(&j->lock);
  return NULL;
}

static void put64(XXH64_state_t *s, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  XXH64_update(s, b, 8);
}

/* The digest of the chunk hashes (see the top of the file). */
static uint64_t combine(const tpx_checkpoint_reader *rd, const chunk *c,
                        size_t n) {
  XXH64_state_t s;
  XXH64_reset(&s, 0);
  size_t k = 0;
  for (size_t f = 0; f < rd->load.num_files; f++) {
    const char *path = rd->load.files[f].path;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    XXH64_update(&s, base, strlen(base) + 1);
    put64(&s, (uint64_t)rd->load.files[f].size);
    for (; k < n && c[k].file == f; k++) put64(&s, c[k].hash);
  }
  return XXH64_digest(&s);
}

tpx_status tpx__source_digest_start(const tpx_checkpoint_reader *rd,
                                    tpx__source_digest **out, tpx_error *err) {
  size_t n = 0;
  for (size_t f = 0; f < rd->load.num_files; f++)
    n += (size_t)((rd->load.files[f].size + CHUNK - 1) / CHUNK);
  tpx__source_digest *j = calloc(1, sizeof *j);
  chunk *c = calloc(n ? n : 1, sizeof *c);
  if (j == NULL || c == NULL) {
    free(j);
    free(c);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "out of memory digesting the source");
  }
  size_t k = 0;
  for (size_t f = 0; f < rd->load.num_files; f++)
    for (int64_t off = 0; off < rd->load.files[f].size; off += CHUNK) {
      int64_t left = rd->load.files[f].size - off;
      c[k++] = (chunk){f, off, left < CHUNK ? left : CHUNK, 0};
    }
  j->rd = rd;
  j->chunks = c;
  j->num_chunks = n;
  j->st = TPX_OK;
  pthread_mutex_init(&j->lock, NULL);
  pthread_mutex_init(&j->done_lock, NULL);
  /* none started (no threads to be had): finish hashes on its caller */
  size_t nt = tpx__ckpt_threads(rd, n);
  for (size_t i = 0; i < nt && i < 64; i++)
    if (pthread_create(&j->tids[j->num_threads], NULL, hash_worker, j) == 0)
      j->num_threads++;
  *out = j;
  return TPX_OK;
}

void tpx__source_digest_stop(tpx__source_digest *j) {
  if (j == NULL)
    return;
  pthread_mutex_lock(&j->lock);
  j->stop = 1;
  pthread_mutex_unlock(&j->lock);
}

tpx_status tpx__source_digest_finish(tpx__source_digest *j, char *out,
                                     size_t size, tpx_error *err) {
  pthread_mutex_lock(&j->done_lock);
  if (!j->done) {
    for (size_t i = 0; i < j->num_threads; i++) pthread_join(j->tids[i], NULL);
    hash_worker(j); /* what is left: all of it when no thread started */
    if (j->st == TPX_OK && j->next < j->num_chunks) /* stopped early */
      j->st = tpx_error_set(&j->err, TPX_IO, "the source digest was stopped");
    if (j->st == TPX_OK)
      snprintf(j->value, sizeof j->value, "xxh64:%016llx",
               (unsigned long long)combine(j->rd, j->chunks, j->num_chunks));
    j->done = 1;
  }
  pthread_mutex_unlock(&j->done_lock);
  if (j->st != TPX_OK)
    return tpx_error_set(err, j->st, "%s", j->err.message);
  snprintf(out, size, "%s", j->value);
  return TPX_OK;
}

void tpx__source_digest_destroy(tpx__source_digest *j) {
  if (j == NULL)
    return;
  tpx__source_digest_stop(j);
  char v[32];
  (void)tpx__source_digest_finish(j, v, sizeof v, NULL); /* joins */
  pthread_mutex_destroy(&j->lock);
  pthread_mutex_destroy(&j->done_lock);
  free(j->chunks);
  free(j);
}
