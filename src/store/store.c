/* SPDX-License-Identifier: MIT */
#include "store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

struct store {
        sqlite3 *db;
        pthread_mutex_t lock;
};

static int db_error(struct store *st, struct sbx_error *err, const char *what)
{
        int code = sqlite3_extended_errcode(st->db);
        int errnum = (code & 0xff) == SQLITE_CONSTRAINT ? EEXIST
                     : (code & 0xff) == SQLITE_FULL     ? ENOSPC
                     : (code & 0xff) == SQLITE_BUSY     ? EBUSY
                                                        : EIO;
        if (err) {
                err->code = errnum;
                snprintf(err->msg, sizeof(err->msg), "store: %s: %s", what, sqlite3_errmsg(st->db));
        }
        return -errnum;
}

static const char schema[] = "CREATE TABLE IF NOT EXISTS sandboxes ("
                             "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
                             "  deployment TEXT NOT NULL,"
                             "  account TEXT NOT NULL,"
                             "  name TEXT NOT NULL,"
                             "  class TEXT NOT NULL,"
                             "  image TEXT NOT NULL,"
                             "  state INTEGER NOT NULL,"
                             "  created_at INTEGER NOT NULL,"
                             "  last_active_at INTEGER NOT NULL,"
                             "  state_since INTEGER NOT NULL,"
                             "  slot INTEGER NOT NULL UNIQUE,"
                             "  network TEXT NOT NULL DEFAULT '',"
                             "  driver TEXT NOT NULL DEFAULT 'ns',"
                             "  UNIQUE (deployment, name));"
                             "CREATE TABLE IF NOT EXISTS accounts ("
                             "  account TEXT PRIMARY KEY,"
                             "  enabled INTEGER NOT NULL,"
                             "  max_sandboxes INTEGER NOT NULL DEFAULT 0);"
                             /* A sandbox's egress policy, in its text form
                              * (runtime/egress.h); none: no row. A table of
                              * its own, made by IF NOT EXISTS in every store,
                              * old ones too. */
                             "CREATE TABLE IF NOT EXISTS egress ("
                             "  id INTEGER PRIMARY KEY,"
                             "  policy TEXT NOT NULL);"
                             "CREATE TABLE IF NOT EXISTS shares ("
                             "  id TEXT PRIMARY KEY,"
                             "  deployment TEXT NOT NULL,"
                             "  name TEXT NOT NULL,"
                             "  sandbox_id INTEGER NOT NULL,"
                             "  port INTEGER NOT NULL,"
                             "  public INTEGER NOT NULL,"
                             "  created_at INTEGER NOT NULL,"
                             "  expires_at INTEGER NOT NULL);";

/* Bring a store made by an older sandboxd up to this schema. The schema
 * text above is always the newest, so a fresh store only gets its version
 * number.
 *   1  added sandboxes.network.
 *   2  sandboxes.state holds the manager's number instead of a name; the
 *      names version 1 wrote are turned into their numbers (anything else
 *      into 2, stopped, which is how version 1 read an unknown name).
 *   3  added sandboxes.driver, the runtime driver a sandbox was created
 *      under; the rows before it get "ns", the only driver there was (and
 *      the default keeps it so for a row an older sandboxd inserts). */
static int user_version(sqlite3 *db)
{
        sqlite3_stmt *stmt = NULL;
        int version = 0;
        if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, NULL) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW)
                version = sqlite3_column_int(stmt, 0);
        sqlite3_finalize(stmt);
        return version;
}

static bool sandboxes_have(sqlite3 *db, const char *column)
{
        sqlite3_stmt *stmt = NULL;
        bool found = false;
        if (sqlite3_prepare_v2(db, "PRAGMA table_info(sandboxes)", -1, &stmt, NULL) == SQLITE_OK)
                while (!found && sqlite3_step(stmt) == SQLITE_ROW)
                        found = !strcmp((const char *)sqlite3_column_text(stmt, 1), column);
        sqlite3_finalize(stmt);
        return found;
}

static int migrate(sqlite3 *db, char **msg)
{
        int version = user_version(db);
        int rc = SQLITE_OK;
        if (version < 1 && !sandboxes_have(db, "network"))
                rc = sqlite3_exec(
                    db, "ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT ''", NULL,
                    NULL, msg);
        if (rc == SQLITE_OK && version < 2)
                rc = sqlite3_exec(db,
                                  "BEGIN;"
                                  "UPDATE sandboxes SET state = CASE state"
                                  " WHEN 'running' THEN 0 WHEN 'suspended' THEN 1 ELSE 2 END"
                                  " WHERE typeof(state) = 'text';"
                                  "PRAGMA user_version = 2;"
                                  "COMMIT;",
                                  NULL, NULL, msg);
        if (rc == SQLITE_OK && version < 3 && !sandboxes_have(db, "driver"))
                rc = sqlite3_exec(
                    db, "ALTER TABLE sandboxes ADD COLUMN driver TEXT NOT NULL DEFAULT 'ns'", NULL,
                    NULL, msg);
        if (rc == SQLITE_OK && version < 3)
                rc = sqlite3_exec(db, "PRAGMA user_version = 3", NULL, NULL, msg);
        return rc;
}

int store_open(const char *path, struct store **ret, struct sbx_error *err)
{
        struct store *st = calloc(1, sizeof(*st));
        if (!st)
                return sbx_error_set(err, ENOMEM, "store");
        pthread_mutex_init(&st->lock, NULL);
        int rc = sqlite3_open_v2(
            path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) {
                int r = sbx_error_set(err, EIO, "open store %s (%s)", path,
                                      st->db ? sqlite3_errmsg(st->db) : "no memory");
                store_close(st);
                return r;
        }
        sqlite3_busy_timeout(st->db, 5000);
        char *msg = NULL;
        /* WAL: readers never block the writer; NORMAL sync is durable across
         * a daemon crash (only a power loss may drop the last commits). */
        rc = sqlite3_exec(st->db,
                          "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                          "PRAGMA foreign_keys=ON;",
                          NULL, NULL, &msg);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(st->db, schema, NULL, NULL, &msg);
        if (rc == SQLITE_OK)
                rc = migrate(st->db, &msg);
        if (rc != SQLITE_OK) {
                int r = sbx_error_set(err, EIO, "init store %s (%s)", path, msg ? msg : "?");
                sqlite3_free(msg);
                store_close(st);
                return r;
        }
        *ret = st;
        return 0;
}

void store_close(struct store *st)
{
        if (!st)
                return;
        sqlite3_close(st->db);
        pthread_mutex_destroy(&st->lock);
        free(st);
}

/* Run one statement with text/int binds given as a format: 't' text,
 * 'i' int64. */
static int exec_stmt(struct store *st, struct sbx_error *err, const char *sql, const char *fmt, ...)
{
        sqlite3_stmt *stmt = NULL;
        int r = 0;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
                r = db_error(st, err, "prepare");
                goto out;
        }
        va_list ap;
        va_start(ap, fmt);
        for (int i = 0; fmt[i]; i++) {
                if (fmt[i] == 't')
                        sqlite3_bind_text(stmt, i + 1, va_arg(ap, const char *), -1,
                                          SQLITE_TRANSIENT);
                else
                        sqlite3_bind_int64(stmt, i + 1, va_arg(ap, int64_t));
        }
        va_end(ap);
        int rc = sqlite3_step(stmt);
        if (rc != SQLITE_DONE)
                r = db_error(st, err, "write");
        else
                r = (int)sqlite3_changes(st->db);
out:
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return r;
}

int store_sandbox_insert(struct store *st, struct store_sandbox *sb, struct sbx_error *err)
{
        sqlite3_stmt *stmt = NULL;
        int r = 0;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(
                st->db,
                "INSERT INTO sandboxes (deployment, account, name, class, image, state,"
                " created_at, last_active_at, state_since, slot, network, driver)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                -1, &stmt, NULL) != SQLITE_OK) {
                r = db_error(st, err, "prepare insert");
                goto out;
        }
        sqlite3_bind_text(stmt, 1, sb->deployment, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 2, sb->account, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 3, sb->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 4, sb->sandbox_class, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 5, sb->image, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 6, sb->state);
        sqlite3_bind_int64(stmt, 7, sb->created_at);
        sqlite3_bind_int64(stmt, 8, sb->last_active_at);
        sqlite3_bind_int64(stmt, 9, sb->state_since);
        sqlite3_bind_int64(stmt, 10, sb->slot);
        sqlite3_bind_text(stmt, 11, sb->network, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 12, sb->driver, -1, SQLITE_STATIC);
        if (sqlite3_step(stmt) != SQLITE_DONE) {
                r = db_error(st, err, "insert sandbox");
                goto out;
        }
        sb->id = (uint64_t)sqlite3_last_insert_rowid(st->db);
out:
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return r;
}

int store_sandbox_assign(struct store *st, uint64_t id, const char *deployment, const char *account,
                         const char *name, const char *sandbox_class, int64_t now,
                         struct sbx_error *err)
{
        int r = exec_stmt(st, err,
                          "UPDATE sandboxes SET deployment = ?, account = ?, name = ?, class = ?,"
                          " created_at = ?, last_active_at = ?, state_since = ? WHERE id = ?",
                          "ttttiiii", deployment, account, name, sandbox_class, now, now, now,
                          (int64_t)id);
        if (r == 0)
                return sbx_error_set(err, ENOENT, "store: no sandbox %llu", (unsigned long long)id);
        return r < 0 ? r : 0;
}

int store_sandbox_set_state(struct store *st, uint64_t id, int state, int64_t since,
                            struct sbx_error *err)
{
        int r = exec_stmt(st, err, "UPDATE sandboxes SET state = ?, state_since = ? WHERE id = ?",
                          "iii", (int64_t)state, since, (int64_t)id);
        return r < 0 ? r : 0;
}

int store_sandbox_touch(struct store *st, uint64_t id, int64_t last_active_at,
                        struct sbx_error *err)
{
        int r = exec_stmt(st, err, "UPDATE sandboxes SET last_active_at = ? WHERE id = ?", "ii",
                          last_active_at, (int64_t)id);
        return r < 0 ? r : 0;
}

int store_sandbox_delete(struct store *st, uint64_t id, struct sbx_error *err)
{
        int r = exec_stmt(st, err, "DELETE FROM sandboxes WHERE id = ?", "i", (int64_t)id);
        if (r >= 0)
                r = exec_stmt(st, err, "DELETE FROM egress WHERE id = ?", "i", (int64_t)id);
        return r < 0 ? r : 0;
}

int store_egress_put(struct store *st, uint64_t id, const char *policy, struct sbx_error *err)
{
        int r = policy ? exec_stmt(st, err,
                                   "INSERT INTO egress (id, policy) VALUES (?, ?)"
                                   " ON CONFLICT (id) DO UPDATE SET policy = excluded.policy",
                                   "it", (int64_t)id, policy)
                       : exec_stmt(st, err, "DELETE FROM egress WHERE id = ?", "i", (int64_t)id);
        return r < 0 ? r : 0;
}

int store_egress_get(struct store *st, uint64_t id, char **ret, struct sbx_error *err)
{
        sqlite3_stmt *stmt = NULL;
        int r = 0;
        *ret = NULL;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(st->db, "SELECT policy FROM egress WHERE id = ?", -1, &stmt, NULL) !=
            SQLITE_OK) {
                r = db_error(st, err, "prepare egress");
        } else {
                sqlite3_bind_int64(stmt, 1, (int64_t)id);
                int rc = sqlite3_step(stmt);
                const unsigned char *t = rc == SQLITE_ROW ? sqlite3_column_text(stmt, 0) : NULL;
                if (t && !(*ret = strdup((const char *)t)))
                        r = -ENOMEM;
                else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                        r = db_error(st, err, "read egress");
                else
                        r = t ? 1 : 0;
        }
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return r;
}

static void copy_col(char *dst, size_t n, sqlite3_stmt *stmt, int col)
{
        const unsigned char *t = sqlite3_column_text(stmt, col);
        snprintf(dst, n, "%s", t ? (const char *)t : "");
}

int store_sandbox_list(struct store *st, struct store_sandbox **ret, size_t *ret_n,
                       struct sbx_error *err)
{
        sqlite3_stmt *stmt = NULL;
        struct store_sandbox *v = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(
                st->db,
                "SELECT id, deployment, account, name, class, image, state, created_at,"
                " last_active_at, state_since, slot, network, driver FROM sandboxes ORDER BY id",
                -1, &stmt, NULL) != SQLITE_OK) {
                r = db_error(st, err, "prepare list");
                goto out;
        }
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        struct store_sandbox *nv = realloc(v, cap * sizeof(*v));
                        if (!nv) {
                                r = sbx_error_set(err, ENOMEM, "store list");
                                goto out;
                        }
                        v = nv;
                }
                struct store_sandbox *sb = &v[n++];
                memset(sb, 0, sizeof(*sb));
                sb->id = (uint64_t)sqlite3_column_int64(stmt, 0);
                copy_col(sb->deployment, sizeof(sb->deployment), stmt, 1);
                copy_col(sb->account, sizeof(sb->account), stmt, 2);
                copy_col(sb->name, sizeof(sb->name), stmt, 3);
                copy_col(sb->sandbox_class, sizeof(sb->sandbox_class), stmt, 4);
                copy_col(sb->image, sizeof(sb->image), stmt, 5);
                sb->state = sqlite3_column_int(stmt, 6);
                sb->created_at = sqlite3_column_int64(stmt, 7);
                sb->last_active_at = sqlite3_column_int64(stmt, 8);
                sb->state_since = sqlite3_column_int64(stmt, 9);
                sb->slot = (uint32_t)sqlite3_column_int64(stmt, 10);
                copy_col(sb->network, sizeof(sb->network), stmt, 11);
                copy_col(sb->driver, sizeof(sb->driver), stmt, 12);
        }
        if (rc != SQLITE_DONE)
                r = db_error(st, err, "list sandboxes");
out:
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        if (r < 0) {
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int store_account_put(struct store *st, const struct store_account *a, struct sbx_error *err)
{
        int r = exec_stmt(st, err,
                          "INSERT INTO accounts (account, enabled, max_sandboxes) VALUES (?,?,?)"
                          " ON CONFLICT(account) DO UPDATE SET enabled = excluded.enabled,"
                          " max_sandboxes = excluded.max_sandboxes",
                          "tii", a->account, (int64_t)a->enabled, a->limit);
        return r < 0 ? r : 0;
}

static void read_account(sqlite3_stmt *stmt, struct store_account *a)
{
        memset(a, 0, sizeof(*a));
        copy_col(a->account, sizeof(a->account), stmt, 0);
        a->enabled = sqlite3_column_int64(stmt, 1) != 0;
        a->limit = sqlite3_column_int64(stmt, 2);
}

int store_account_get(struct store *st, const char *account, struct store_account *ret,
                      struct sbx_error *err)
{
        sqlite3_stmt *stmt = NULL;
        int r = 0;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(
                st->db, "SELECT account, enabled, max_sandboxes FROM accounts WHERE account = ?",
                -1, &stmt, NULL) != SQLITE_OK) {
                r = db_error(st, err, "prepare account");
                goto out;
        }
        sqlite3_bind_text(stmt, 1, account, -1, SQLITE_STATIC);
        int rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
                read_account(stmt, ret);
                r = 1;
        } else if (rc != SQLITE_DONE) {
                r = db_error(st, err, "get account");
        }
out:
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return r;
}

int store_account_list(struct store *st, struct store_account **ret, size_t *ret_n,
                       struct sbx_error *err)
{
        sqlite3_stmt *stmt = NULL;
        struct store_account *v = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(
                st->db, "SELECT account, enabled, max_sandboxes FROM accounts ORDER BY account", -1,
                &stmt, NULL) != SQLITE_OK) {
                r = db_error(st, err, "prepare accounts");
                goto out;
        }
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        struct store_account *nv = realloc(v, cap * sizeof(*v));
                        if (!nv) {
                                r = sbx_error_set(err, ENOMEM, "store accounts");
                                goto out;
                        }
                        v = nv;
                }
                read_account(stmt, &v[n++]);
        }
        if (rc != SQLITE_DONE)
                r = db_error(st, err, "list accounts");
out:
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        if (r < 0) {
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- preview shares ---- */

int store_share_put(struct store *st, const struct store_share *sh, struct sbx_error *err)
{
        int r = exec_stmt(st, err, "DELETE FROM shares WHERE expires_at <= ?", "i", sh->created_at);
        if (r < 0)
                return r;
        r = exec_stmt(st, err,
                      "INSERT INTO shares (id, deployment, name, sandbox_id, port, public,"
                      " created_at, expires_at) VALUES (?,?,?,?,?,?,?,?)",
                      "tttiiiii", sh->id, sh->deployment, sh->name, (int64_t)sh->sandbox_id,
                      (int64_t)sh->port, (int64_t)sh->public, sh->created_at, sh->expires_at);
        return r < 0 ? r : 0;
}

int store_share_delete(struct store *st, const char *id, const char *deployment, const char *name,
                       struct sbx_error *err)
{
        return exec_stmt(st, err, "DELETE FROM shares WHERE id = ? AND deployment = ? AND name = ?",
                         "ttt", id, deployment, name);
}

static void read_share(sqlite3_stmt *stmt, struct store_share *sh)
{
        copy_col(sh->id, sizeof(sh->id), stmt, 0);
        copy_col(sh->deployment, sizeof(sh->deployment), stmt, 1);
        copy_col(sh->name, sizeof(sh->name), stmt, 2);
        sh->sandbox_id = (uint64_t)sqlite3_column_int64(stmt, 3);
        sh->port = (uint16_t)sqlite3_column_int64(stmt, 4);
        sh->public = sqlite3_column_int64(stmt, 5) != 0;
        sh->created_at = sqlite3_column_int64(stmt, 6);
        sh->expires_at = sqlite3_column_int64(stmt, 7);
}

#define SHARE_COLS "id, deployment, name, sandbox_id, port, public, created_at, expires_at"

/* The rows of sql with its text binds a, b (b may be NULL); at most max. */
static int share_query(struct store *st, const char *sql, const char *a, const char *b,
                       struct store_share *ret, size_t max, size_t *ret_n, struct sbx_error *err)
{
        sqlite3_stmt *stmt = NULL;
        size_t n = 0;
        int r = 0;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
                r = db_error(st, err, "prepare shares");
                goto out;
        }
        sqlite3_bind_text(stmt, 1, a, -1, SQLITE_STATIC);
        if (b)
                sqlite3_bind_text(stmt, 2, b, -1, SQLITE_STATIC);
        int rc;
        while (n < max && (rc = sqlite3_step(stmt)) == SQLITE_ROW)
                read_share(stmt, &ret[n++]);
        if (n < max && rc != SQLITE_DONE)
                r = db_error(st, err, "read shares");
out:
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        *ret_n = n;
        return r;
}

int store_share_get(struct store *st, const char *id, struct store_share *ret,
                    struct sbx_error *err)
{
        size_t n = 0;
        int r = share_query(st, "SELECT " SHARE_COLS " FROM shares WHERE id = ?", id, NULL, ret, 1,
                            &n, err);
        return r < 0 ? r : (int)n;
}

int store_share_list(struct store *st, const char *deployment, const char *name,
                     struct store_share *ret, size_t max, size_t *ret_n, struct sbx_error *err)
{
        return share_query(st,
                           "SELECT " SHARE_COLS " FROM shares WHERE deployment = ? AND name = ?"
                           " ORDER BY created_at, id",
                           deployment, name, ret, max, ret_n, err);
}
