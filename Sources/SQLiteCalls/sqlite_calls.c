#define _GNU_SOURCE
#include "rh_sqlite_calls.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

static rh_sqlite_gate gate;

/* The calls SQLite made before they were replaced, by name. */
static int (*real_open)(const char *, int, int);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_pread64)(int, void *, size_t, off64_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_unlink)(const char *);

/* 0 when the call may go on; else errno is set and the call fails. */
static int refused(enum rh_sqlite_call kind) {
    int number = gate ? gate(kind) : 0;
    if (number) errno = number;
    return number;
}

static int routed_open(const char *path, int flags, int mode) {
    return refused(flags & O_CREAT ? RH_SQLITE_CREATE : RH_SQLITE_OPEN) ? -1 : real_open(path, flags, mode);
}
static ssize_t routed_read(int fd, void *buffer, size_t count) { return refused(RH_SQLITE_READ) ? -1 : real_read(fd, buffer, count); }
static ssize_t routed_pread(int fd, void *buffer, size_t count, off_t at) {
    return refused(RH_SQLITE_READ) ? -1 : real_pread(fd, buffer, count, at);
}
static ssize_t routed_pread64(int fd, void *buffer, size_t count, off64_t at) {
    return refused(RH_SQLITE_READ) ? -1 : real_pread64(fd, buffer, count, at);
}
static ssize_t routed_write(int fd, const void *buffer, size_t count) {
    return refused(RH_SQLITE_WRITE) ? -1 : real_write(fd, buffer, count);
}
static ssize_t routed_pwrite(int fd, const void *buffer, size_t count, off_t at) {
    return refused(RH_SQLITE_WRITE) ? -1 : real_pwrite(fd, buffer, count, at);
}
static ssize_t routed_pwrite64(int fd, const void *buffer, size_t count, off64_t at) {
    return refused(RH_SQLITE_WRITE) ? -1 : real_pwrite64(fd, buffer, count, at);
}
static int routed_ftruncate(int fd, off_t length) { return refused(RH_SQLITE_TRUNCATE) ? -1 : real_ftruncate(fd, length); }
static int routed_unlink(const char *path) { return refused(RH_SQLITE_UNLINK) ? -1 : real_unlink(path); }

/* Replaces SQLite's call `name` with `routed`, keeping the one it had in *real. */
static int route(sqlite3_vfs *vfs, const char *name, void **real, void *routed) {
    sqlite3_syscall_ptr current = vfs->xGetSystemCall(vfs, name);
    if (current == NULL) return 0; /* not a call of this build (pread64 on some) */
    *real = (void *)current;
    return vfs->xSetSystemCall(vfs, name, (sqlite3_syscall_ptr)routed) == SQLITE_OK ? 0 : -1;
}

int rh_sqlite_route_system_calls(rh_sqlite_gate new_gate) {
    static int routed;
    gate = new_gate;
    if (routed) return 0;
    sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
    if (vfs == NULL || vfs->iVersion < 3 || vfs->xSetSystemCall == NULL) return -1;
    int failed = 0;
    failed |= route(vfs, "open", (void **)&real_open, (void *)routed_open);
    failed |= route(vfs, "read", (void **)&real_read, (void *)routed_read);
    failed |= route(vfs, "pread", (void **)&real_pread, (void *)routed_pread);
    failed |= route(vfs, "pread64", (void **)&real_pread64, (void *)routed_pread64);
    failed |= route(vfs, "write", (void **)&real_write, (void *)routed_write);
    failed |= route(vfs, "pwrite", (void **)&real_pwrite, (void *)routed_pwrite);
    failed |= route(vfs, "pwrite64", (void **)&real_pwrite64, (void *)routed_pwrite64);
    failed |= route(vfs, "ftruncate", (void **)&real_ftruncate, (void *)routed_ftruncate);
    failed |= route(vfs, "unlink", (void **)&real_unlink, (void *)routed_unlink);
    routed = 1;
    return failed;
}
