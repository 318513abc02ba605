/* plugin/elf_peek.c — a look at a candidate plugin file without loading it:
 * is it an ELF shared object for this machine, and does its dynamic symbol
 * table define the two required entry points? A file that fails is refused
 * from its bytes alone, without the load probe's child process (about 2 ms
 * each): TPX_PLUGIN_PATH pointing at a directory of ordinary libraries, or
 * thousands of junk files, stays cheap.
 *
 * Only what is certain is judged: a file without section headers or
 * without a .dynsym (stripped to the bone) goes on to the probe and dlopen,
 * which say what is wrong with it. Every offset is checked against the
 * file's size; the file is read (pread), never mapped, so one that shrinks
 * meanwhile cannot crash the host. Not the loading (loader.c) and not the trust
 * check (trust.c). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/plugin_internal.h"

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#else
#define HOST_MACHINE 0 /* not checked */
#endif

/* The header, for this machine; NULL or the reason it is not. */
static const char *check_header(const ElfW(Ehdr) * h, size_t len) {
  const unsigned char cls = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
  const uint16_t one = 1;
  const unsigned char data =
      *(const unsigned char *)&one == 1 ? ELFDATA2LSB : ELFDATA2MSB;
  if (len < EI_NIDENT || memcmp(h->e_ident, ELFMAG, SELFMAG) != 0)
    return "not an ELF file (no ELF magic number); not loaded";
  if (len < sizeof *h)
    return "not an ELF file (too short for an ELF header); not loaded";
  if (h->e_ident[EI_CLASS] != cls)
    return sizeof(void *) == 8 ? "a 32-bit ELF file; not loaded"
                               : "a 64-bit ELF file; not loaded";
  if (h->e_ident[EI_DATA] != data)
    return "an ELF file of the other byte order; not loaded";
  if (h->e_type != ET_DYN)
    return "an ELF file but not a shared object; not loaded";
  if (HOST_MACHINE && h->e_machine != HOST_MACHINE)
    return "an ELF shared object for another machine; not loaded";
  return NULL;
}

/* 1 when the table defines `name`. */
static int defines(const ElfW(Sym) * sym, size_t nsym, const char *str,
                   size_t strsize, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < nsym; i++) {
    if (sym[i].st_shndx == SHN_UNDEF || sym[i].st_name >= strsize ||
        strsize - sym[i].st_name <= n)
      continue;
    if (memcmp(str + sym[i].st_name, name, n + 1) == 0)
      return 1;
  }
  return 0;
}

/* `len` bytes at `off` of `fd`, malloc'd; NULL when they cannot be read
 * whole. */
static void *read_at(int fd, uint64_t off, size_t len) {
  void *buf = malloc(len ? len : 1);
  size_t got = 0;
  while (buf && got < len) {
    ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      free(buf);
      return NULL;
    }
    got += (size_t)n;
  }
  return buf;
}

/* The largest symbol or string table read to judge the symbols (e_shnum
 * is 16 bits: the section headers are bounded anyway); beyond it the file
 * goes on to the probe unjudged. */
#define MAX_TABLE (64u << 20)

/* 0: both entry points defined, or the file cannot be judged; -1 with the
 * reason when the dynamic symbol table lacks one. */
static int check_symbols(int fd, const ElfW(Ehdr) * h, uint64_t len,
                         char *reason, size_t size) {
  if (h->e_shoff == 0 || h->e_shentsize != sizeof(ElfW(Shdr)) ||
      h->e_shnum == 0 || h->e_shoff > len ||
      h->e_shnum > (len - h->e_shoff) / sizeof(ElfW(Shdr)))
    return 0;
  ElfW(Shdr) *sh = read_at(fd, h->e_shoff, h->e_shnum * sizeof *sh);
  if (!sh)
    return 0;
  int rc = 0;
  for (size_t i = 0; i < h->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM)
      continue;
    const ElfW(Shdr) *st = sh[i].sh_link < h->e_shnum ? &sh[sh[i].sh_link] : 0;
    if (!st || sh[i].sh_entsize != sizeof(ElfW(Sym)) ||
        sh[i].sh_size > MAX_TABLE || st->sh_size > MAX_TABLE ||
        sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset ||
        st->sh_offset > len || st->sh_size > len - st->sh_offset)
      break;
    ElfW(Sym) *sym = read_at(fd, sh[i].sh_offset, sh[i].sh_size);
    char *str = read_at(fd, st->sh_offset, st->sh_size);
    if (sym && str) {
      size_t nsym = sh[i].sh_size / sizeof *sym;
      int reg =
          defines(sym, nsym, str, st->sh_size, TPX_PLUGIN_REGISTER_SYMBOL);
      int get =
          defines(sym, nsym, str, st->sh_size, TPX_PLUGIN_GET_PLAN_SYMBOL);
      if (!reg || !get) {
        (void)tpx__plugin_missing_entry(reg, get, reason, size);
        rc = -1;
      }
    }
    free(sym);
    free(str);
    break;
  }
  free(sh);
  return rc;
}

int tpx__plugin_elf_peek(const char *path, const struct stat *st, char *reason,
                         size_t size) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(reason, size, "cannot be opened: %s", strerror(errno));
    return -1;
  }
  ElfW(Ehdr) h;
  memset(&h, 0, sizeof h);
  ssize_t n;
  do n = pread(fd, &h, sizeof h, 0);
  while (n < 0 && errno == EINTR);
  const char *why = check_header(&h, n > 0 ? (size_t)n : 0);
  int rc = 0;
  if (why) {
    snprintf(reason, size, "%s", why);
    rc = -1;
  } else {
    rc = check_symbols(fd, &h, (uint64_t)st->st_size, reason, size);
  }
  close(fd);
  return rc;
}
