/* harness/harness_elf.c — list the symbols an ELF shared object exports, by
 * reading its dynamic symbol table (.dynsym) from the file. The harness uses
 * it for the "exports" check without running any plugin code (dlopen would
 * run the plugin's constructors). Bounds are checked everywhere: the file
 * may be anything, e.g. a text file named .so.
 *
 * Native ELF class only (64-bit on 64-bit hosts), as dlopen requires. */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/grow.h"
#include "harness/harness_internal.h"

#if UINTPTR_MAX > 0xffffffffu
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Shdr shdr_t;
typedef Elf64_Sym sym_t;
#define ELF_CLASS ELFCLASS64
#define ST_BIND ELF64_ST_BIND
#define ST_VIS ELF64_ST_VISIBILITY
#else
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Shdr shdr_t;
typedef Elf32_Sym sym_t;
#define ELF_CLASS ELFCLASS32
#define ST_BIND ELF32_ST_BIND
#define ST_VIS ELF32_ST_VISIBILITY
#endif

#define MAX_FILE (512u << 20)

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void tpx__elf_exports_free(char **names, size_t count) {
  for (size_t i = 0; i < count; i++) free(names[i]);
  free(names);
}

int tpx__elf_exports(const char *path, char ***names, size_t *count,
                     char *reason, size_t reason_size) {
  *names = NULL;
  *count = 0;
  /* through the one opener: a FIFO would block fopen forever */
  int fd;
  struct stat sb;
  tpx_error ferr = {0};
  FILE *f = NULL;
  if (tpx__file_open(path, &fd, &sb, &ferr) != TPX_OK) {
    snprintf(reason, reason_size, "%s", ferr.message);
    return -1;
  }
  f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    snprintf(reason, reason_size, "cannot open the file");
    return -1;
  }
  unsigned char *buf = NULL;
  size_t size = 0, cap = 0;
  for (;;) {
    if (size == cap) {
      if (cap >= MAX_FILE)
        break;
      if (TPX_GROW(buf, cap, size + 1, 65536) != 0) {
        free(buf);
        fclose(f);
        snprintf(reason, reason_size, "out of memory");
        return -1;
      }
    }
    size_t got = fread(buf + size, 1, cap - size, f);
    if (got == 0)
      break;
    size += got;
  }
  fclose(f);
  int rc = -1;
  char **v = NULL;
  size_t n = 0;
  const ehdr_t *eh = (const ehdr_t *)buf;
  if (size < sizeof *eh || memcmp(buf, ELFMAG, SELFMAG) != 0) {
    snprintf(reason, reason_size, "not an ELF file (no ELF magic)");
    goto out;
  }
  if (buf[EI_CLASS] != ELF_CLASS) {
    snprintf(reason, reason_size, "ELF class %d does not match the host's",
             buf[EI_CLASS]);
    goto out;
  }
  if (eh->e_type != ET_DYN) {
    snprintf(reason, reason_size, "not a shared object (ELF type %d)",
             (int)eh->e_type);
    goto out;
  }
  if (eh->e_shentsize != sizeof(shdr_t) || eh->e_shoff > size ||
      (size_t)eh->e_shnum * sizeof(shdr_t) > size - eh->e_shoff) {
    snprintf(reason, reason_size, "malformed ELF section table");
    goto out;
  }
  const shdr_t *sh = (const shdr_t *)(buf + eh->e_shoff);
  size_t cap_v = 0;
  for (size_t i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM)
      continue;
    if (sh[i].sh_link >= eh->e_shnum || sh[i].sh_entsize != sizeof(sym_t) ||
        sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset) {
      snprintf(reason, reason_size, "malformed .dynsym section");
      goto out;
    }
    const shdr_t *str = &sh[sh[i].sh_link];
    if (str->sh_offset > size || str->sh_size > size - str->sh_offset) {
      snprintf(reason, reason_size, "malformed .dynstr section");
      goto out;
    }
    const char *strtab = (const char *)buf + str->sh_offset;
    const sym_t *syms = (const sym_t *)(buf + sh[i].sh_offset);
    size_t nsym = sh[i].sh_size / sizeof(sym_t);
    for (size_t k = 1; k < nsym; k++) {
      const sym_t *s = &syms[k];
      int bind = ST_BIND(s->st_info);
      if (s->st_shndx == SHN_UNDEF || s->st_name == 0 ||
          s->st_name >= str->sh_size)
        continue;
      if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
        continue;
      if (ST_VIS(s->st_other) != STV_DEFAULT &&
          ST_VIS(s->st_other) != STV_PROTECTED)
        continue;
      const char *name = strtab + s->st_name;
      size_t len = strnlen(name, str->sh_size - s->st_name);
      if (len == str->sh_size - s->st_name || len == 0)
        continue;
      if (TPX_GROW(v, cap_v, n + 1, 32) != 0) {
        snprintf(reason, reason_size, "out of memory");
        goto out;
      }
      if (!(v[n] = strndup(name, len))) {
        snprintf(reason, reason_size, "out of memory");
        goto out;
      }
      n++;
    }
  }
  if (n)
    qsort(v, n, sizeof *v, cmp);
  *names = v;
  *count = n;
  v = NULL;
  n = 0;
  rc = 0;
out:
  tpx__elf_exports_free(v, n);
  free(buf);
  return rc;
}
