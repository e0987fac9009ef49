#pragma once
#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: one wrapper per option used. */

/* Whether closing the last connection checkpoints the write-ahead log (on: 0, the default). */
static inline int rh_sqlite3_no_checkpoint_on_close(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on, (int *)0);
}
