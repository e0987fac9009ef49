/* SQLite's own system calls routed through the host's system-call seam, for failure sweeps
 * (SQLite's unix VFS lets each of its calls be replaced: sqlite3_vfs.xSetSystemCall). */
#pragma once

/* The kinds of call a gate is asked about (the seam's SystemCall kinds). */
enum rh_sqlite_call { RH_SQLITE_OPEN, RH_SQLITE_CREATE, RH_SQLITE_READ, RH_SQLITE_WRITE, RH_SQLITE_TRUNCATE, RH_SQLITE_UNLINK };

/* Asked before each call: the errno the call must fail with, or 0 to make it. Any thread. */
typedef int (*rh_sqlite_gate)(enum rh_sqlite_call kind);

/* Routes the default VFS's open, read, pread, pread64, write, pwrite, pwrite64, ftruncate
 * and unlink through gate, for the whole process, before the first connection opens.
 * fsync cannot be routed (SQLite calls it directly). Returns 0, or -1 when the VFS does not
 * let a call be replaced. Once per process; later calls change the gate only. */
int rh_sqlite_route_system_calls(rh_sqlite_gate gate);
