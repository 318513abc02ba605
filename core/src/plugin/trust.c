/* plugin/trust.c — what a file must be before the registry opens it as a
 * plugin: a regular file (a FIFO named p.so would block the opener), an ELF
 * shared object of this machine's word size (junk is refused from its
 * bytes, elf_peek.c), and trusted: a plugin runs as the tpx user, so
 * nobody else may be able to change it.
 *
 * Trusted, as ssh (StrictModes) and sudo judge their files: the file and
 * the directory holding it (both the one it was found in and the one its
 * real path lies in) are owned by the caller's effective uid or by root,
 * and writable by no one else — not by others, and not by the group unless
 * the group is the owner's user-private group (named after the owner, with
 * no other member; umask 002 systems build group-writable files). A sticky
 * directory (1777, /tmp) is still writable by anyone: refused. Ancestors
 * above the holding directory are not checked.
 * TPX_PLUGIN_TRUST_ANY=1 switches the ownership and mode checks off.
 *
 * Not the loading itself (loader.c) nor the bookkeeping (registry.c). */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "plugin/plugin_internal.h"

int tpx__plugin_trust_any(void) {
  const char *v = getenv("TPX_PLUGIN_TRUST_ANY");
  return v && strcmp(v, "1") == 0;
}

/* The group of `st` is its owner's user-private group: the owner's
 * primary group, named after the owner, not root's, and listing nobody
 * else as a member. (The _r lookups: the host may have threads.) */
static int private_group(const struct stat *st) {
  if (st->st_gid == 0)
    return 0;
  char pbuf[4096], gbuf[16384];
  struct passwd pwd, *pw = NULL;
  struct group grp, *gr = NULL;
  if (getpwuid_r(st->st_uid, &pwd, pbuf, sizeof pbuf, &pw) != 0 || !pw ||
      pw->pw_gid != st->st_gid)
    return 0;
  if (getgrgid_r(st->st_gid, &grp, gbuf, sizeof gbuf, &gr) != 0 || !gr ||
      strcmp(gr->gr_name, pw->pw_name) != 0)
    return 0;
  for (char **m = gr->gr_mem; m && *m; m++)
    if (strcmp(*m, pw->pw_name) != 0)
      return 0;
  return 1;
}

static void owner_text(uid_t uid, char *buf, size_t size) {
  char pbuf[4096];
  struct passwd pwd, *pw = NULL;
  if (getpwuid_r(uid, &pwd, pbuf, sizeof pbuf, &pw) == 0 && pw)
    snprintf(buf, size, "%s (uid %lu)", pw->pw_name, (unsigned long)uid);
  else
    snprintf(buf, size, "uid %lu", (unsigned long)uid);
}

/* 0 when `st` (the file or directory `what` at `path`) is trusted; else -1
 * with the reason. */
static int trusted(const char *what, const char *path, const struct stat *st,
                   char *reason, size_t size) {
  const uid_t me = geteuid();
  const char *why = NULL, *fix = "chmod go-w";
  if (st->st_uid != me && st->st_uid != 0) {
    why = "is owned by someone else (only yours or root's are loaded)";
    fix = "chown it to you or root";
  } else if (st->st_mode & S_IWOTH) {
    why = st->st_mode & S_ISVTX ? "is writable by anyone (sticky or not)"
                                : "is writable by anyone";
  } else if ((st->st_mode & S_IWGRP) && !private_group(st)) {
    why = "is writable by its group";
  }
  if (!why)
    return 0;
  char owner[300];
  owner_text(st->st_uid, owner, sizeof owner);
  snprintf(reason, size,
           "untrusted: %s %s (mode %04o, owner %s) %s: someone else could run "
           "code as you through it; %s, or set TPX_PLUGIN_TRUST_ANY=1 to load "
           "it anyway",
           what, path, (unsigned)(st->st_mode & 07777), owner, why, fix);
  return -1;
}

/* The directory part of `path` ("." when there is none). */
static void dir_of(const char *path, char *buf, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(buf, size, ".");
  else if (slash == path)
    snprintf(buf, size, "/");
  else
    snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

static int trusted_dir(const char *file, char *reason, size_t size) {
  char dir[PATH_MAX];
  dir_of(file, dir, sizeof dir);
  struct stat st;
  if (stat(dir, &st) != 0) {
    snprintf(reason, size, "untrusted: its directory %s cannot be examined: %s",
             dir, strerror(errno));
    return -1;
  }
  return trusted("the directory", dir, &st, reason, size);
}

int tpx__plugin_vet(const char *path, const char *real, const struct stat *st,
                    int *untrusted, char *reason, size_t size) {
  *untrusted = 0;
  if (!S_ISREG(st->st_mode)) {
    snprintf(reason, size, "not a regular file (%s); not opened",
             tpx__file_kind_name(st->st_mode));
    return -1;
  }
  if (!tpx__plugin_trust_any()) {
    int bad = trusted("the file", path, st, reason, size) != 0 ||
              trusted_dir(path, reason, size) != 0;
    if (!bad && real && strcmp(real, path) != 0) {
      char d1[PATH_MAX], d2[PATH_MAX];
      dir_of(path, d1, sizeof d1);
      dir_of(real, d2, sizeof d2);
      bad = strcmp(d1, d2) != 0 && trusted_dir(real, reason, size) != 0;
    }
    if (bad) {
      *untrusted = 1;
      return -1;
    }
  }
  return tpx__plugin_elf_peek(path, st, reason, size);
}
