#pragma once
#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: one wrapper per option used. */

/* Whether closing the last connection checkpoints the write-ahead log (on: 0, the default). */
static inline int rh_sqlite3_no_checkpoint_on_close(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on, (int *)0);
}

/* The write-ahead log's length in frames after this connection's last commit, into *frames,
 * with SQLite's automatic checkpoint kept as it is by default (a passive checkpoint once the
 * log holds 1,000 frames): a hook replaces the default one. *frames must outlive the
 * connection. */
static inline int rh_sqlite3_wal_count(void *frames, sqlite3 *db, const char *name, int count) {
    *(int *)frames = count;
    if (count >= 1000) sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, (int *)0, (int *)0);
    return SQLITE_OK;
}

static inline void rh_sqlite3_count_log_frames(sqlite3 *db, int *frames) {
    sqlite3_wal_hook(db, rh_sqlite3_wal_count, frames);
}
