/* SPDX-License-Identifier: MIT */
/* The store against a real SQLite file: records, accounts, constraints,
 * persistence across a reopen, and the migration of an older schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "src/manager/manager.h" /* the state numbers the store keeps */
#include "src/store/store.h"

static char dir[] = "/tmp/sandboxd-test-store-XXXXXX";
static char path[256];

static int setup(void **state)
{
        if (!mkdtemp(dir))
                return -1;
        snprintf(path, sizeof(path), "%s/sandboxd.db", dir);
        return 0;
}

static int teardown(void **state)
{
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static struct store_sandbox rec(const char *dep, const char *name, uint32_t slot)
{
        struct store_sandbox sb = {0};
        snprintf(sb.deployment, sizeof(sb.deployment), "%s", dep);
        snprintf(sb.account, sizeof(sb.account), "acct");
        snprintf(sb.name, sizeof(sb.name), "%s", name);
        snprintf(sb.sandbox_class, sizeof(sb.sandbox_class), "default");
        snprintf(sb.image, sizeof(sb.image), "tiny");
        snprintf(sb.network, sizeof(sb.network), "none");
        snprintf(sb.driver, sizeof(sb.driver), "ns");
        sb.state = SBX_RUNNING;
        sb.created_at = sb.last_active_at = sb.state_since = 1000 + slot;
        sb.slot = slot;
        return sb;
}

static void test_records(void **state)
{
        struct store *st = NULL;
        struct sbx_error err = {0};
        unlink(path);
        assert_int_equal(store_open(path, &st, &err), 0);
        struct store_sandbox a = rec("d1", "a", 0), b = rec("d1", "b", 1);
        snprintf(b.driver, sizeof(b.driver), "gvisor");
        assert_int_equal(store_sandbox_insert(st, &a, &err), 0);
        assert_int_equal(store_sandbox_insert(st, &b, &err), 0);
        assert_true(b.id > a.id);
        /* (deployment, name) and slot are unique. */
        struct store_sandbox dup = rec("d1", "a", 2), slot = rec("d2", "a", 1);
        assert_int_equal(store_sandbox_insert(st, &dup, &err), -EEXIST);
        assert_int_equal(store_sandbox_insert(st, &slot, &err), -EEXIST);
        assert_int_equal(store_sandbox_set_state(st, a.id, SBX_SUSPENDED, 5000, &err), 0);
        assert_int_equal(store_sandbox_touch(st, b.id, 7000, &err), 0);
        assert_int_equal(store_sandbox_assign(st, b.id, "d3", "acct2", "c", "default", 9000, &err),
                         0);
        assert_int_equal(store_sandbox_assign(st, 999, "d3", "acct2", "c", "default", 9000, &err),
                         -ENOENT);
        store_close(st);

        /* Everything is there after a reopen. */
        assert_int_equal(store_open(path, &st, &err), 0);
        struct store_sandbox *v = NULL;
        size_t n = 0;
        assert_int_equal(store_sandbox_list(st, &v, &n, &err), 0);
        assert_int_equal(n, 2);
        assert_string_equal(v[0].name, "a");
        assert_int_equal(v[0].state, SBX_SUSPENDED);
        assert_int_equal(v[0].state_since, 5000);
        assert_string_equal(v[0].network, "none");
        assert_string_equal(v[0].driver, "ns");
        /* An assign gives a new owner, name and class; the driver stays. */
        assert_string_equal(v[1].driver, "gvisor");
        assert_string_equal(v[1].deployment, "d3");
        assert_string_equal(v[1].account, "acct2");
        assert_string_equal(v[1].name, "c");
        assert_int_equal(v[1].created_at, 9000);
        assert_int_equal(v[1].slot, 1);
        free(v);
        assert_int_equal(store_sandbox_delete(st, a.id, &err), 0);
        assert_int_equal(store_sandbox_list(st, &v, &n, &err), 0);
        assert_int_equal(n, 1);
        free(v);
        store_close(st);
}

static void test_accounts(void **state)
{
        struct store *st = NULL;
        struct sbx_error err = {0};
        unlink(path);
        assert_int_equal(store_open(path, &st, &err), 0);
        struct store_account a = {.account = "acme", .enabled = true, .limit = 5}, got;
        assert_int_equal(store_account_get(st, "acme", &got, &err), 0);
        assert_int_equal(store_account_put(st, &a, &err), 0);
        assert_int_equal(store_account_get(st, "acme", &got, &err), 1);
        assert_true(got.enabled);
        assert_int_equal(got.limit, 5);
        a.enabled = false;
        a.limit = 0;
        assert_int_equal(store_account_put(st, &a, &err), 0);
        assert_int_equal(store_account_get(st, "acme", &got, &err), 1);
        assert_false(got.enabled);
        struct store_account *v = NULL;
        size_t n = 0;
        assert_int_equal(store_account_list(st, &v, &n, &err), 0);
        assert_int_equal(n, 1);
        free(v);
        store_close(st);
}

/* The user_version of the store at path. */
static int version_of(const char *file)
{
        sqlite3 *db;
        sqlite3_stmt *stmt = NULL;
        int v = -1;
        assert_int_equal(sqlite3_open(file, &db), SQLITE_OK);
        if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, NULL) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW)
                v = sqlite3_column_int(stmt, 0);
        sqlite3_finalize(stmt);
        sqlite3_close(db);
        return v;
}

/* A store made before networks were per sandbox opens, gains the column,
 * and keeps its rows (network "" = the daemon's default); the state names
 * older stores wrote become the manager's numbers; every row was made by
 * the ns driver, the only one there was. */
static void test_migration(void **state)
{
        unlink(path);
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(
            sqlite3_exec(db,
                         "CREATE TABLE sandboxes (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                         " deployment TEXT NOT NULL, account TEXT NOT NULL,"
                         " name TEXT NOT NULL, class TEXT NOT NULL, image TEXT NOT NULL,"
                         " state TEXT NOT NULL, created_at INTEGER NOT NULL,"
                         " last_active_at INTEGER NOT NULL, state_since INTEGER NOT NULL,"
                         " slot INTEGER NOT NULL UNIQUE, UNIQUE (deployment, name));"
                         "INSERT INTO sandboxes VALUES (7, 'd', 'a', 'old', 'default',"
                         " 'tiny', 'stopped', 1, 2, 3, 4);"
                         "INSERT INTO sandboxes VALUES (8, 'd', 'a', 'r', 'default',"
                         " 'tiny', 'running', 1, 2, 3, 6);"
                         "INSERT INTO sandboxes VALUES (9, 'd', 'a', 's', 'default',"
                         " 'tiny', 'suspended', 1, 2, 3, 7);",
                         NULL, NULL, NULL),
            SQLITE_OK);
        sqlite3_close(db);
        struct store *st = NULL;
        struct sbx_error err = {0};
        assert_int_equal(store_open(path, &st, &err), 0);
        struct store_sandbox *v = NULL;
        size_t n = 0;
        assert_int_equal(store_sandbox_list(st, &v, &n, &err), 0);
        assert_int_equal(n, 3);
        assert_int_equal(v[0].id, 7);
        assert_string_equal(v[0].name, "old");
        assert_string_equal(v[0].network, "");
        assert_int_equal(v[0].state, SBX_STOPPED);
        assert_int_equal(v[1].state, SBX_RUNNING);
        assert_int_equal(v[2].state, SBX_SUSPENDED);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(v[i].driver, "ns");
        free(v);
        struct store_sandbox b = rec("d", "new", 5);
        assert_int_equal(store_sandbox_insert(st, &b, &err), 0);
        store_close(st);
        /* A second open finds it current. */
        assert_int_equal(store_open(path, &st, &err), 0);
        store_close(st);
        assert_int_equal(version_of(path), 3);
}

/* A store of version 2 (state numbers, networks, no driver) gains the
 * driver column: its sandboxes were all made by the ns driver, and stay
 * so whatever a daemon's settings say now. Rows inserted afterwards keep
 * the driver they are given. */
static void test_migration_driver(void **state)
{
        unlink(path);
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(
            sqlite3_exec(db,
                         "CREATE TABLE sandboxes (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                         " deployment TEXT NOT NULL, account TEXT NOT NULL,"
                         " name TEXT NOT NULL, class TEXT NOT NULL, image TEXT NOT NULL,"
                         " state INTEGER NOT NULL, created_at INTEGER NOT NULL,"
                         " last_active_at INTEGER NOT NULL, state_since INTEGER NOT NULL,"
                         " slot INTEGER NOT NULL UNIQUE, network TEXT NOT NULL DEFAULT '',"
                         " UNIQUE (deployment, name));"
                         "CREATE TABLE accounts (account TEXT PRIMARY KEY,"
                         " enabled INTEGER NOT NULL, max_sandboxes INTEGER NOT NULL DEFAULT 0);"
                         "INSERT INTO sandboxes VALUES (3, 'd', 'a', 'x', 'default',"
                         " 'tiny', 0, 1, 2, 3, 0, 'nat');"
                         "INSERT INTO sandboxes VALUES (4, '', '', 'pool-1', 'default',"
                         " 'tiny', 0, 1, 2, 3, 1, '');"
                         "PRAGMA user_version = 2;",
                         NULL, NULL, NULL),
            SQLITE_OK);
        sqlite3_close(db);
        struct store *st = NULL;
        struct sbx_error err = {0};
        assert_int_equal(store_open(path, &st, &err), 0);
        struct store_sandbox *v = NULL;
        size_t n = 0;
        assert_int_equal(store_sandbox_list(st, &v, &n, &err), 0);
        assert_int_equal(n, 2);
        assert_string_equal(v[0].name, "x");
        assert_string_equal(v[0].network, "nat");
        assert_int_equal(v[0].state, SBX_RUNNING);
        assert_string_equal(v[0].driver, "ns");
        assert_string_equal(v[1].driver, "ns");
        free(v);
        struct store_sandbox g = rec("d", "g", 7);
        snprintf(g.driver, sizeof(g.driver), "gvisor");
        assert_int_equal(store_sandbox_insert(st, &g, &err), 0);
        store_close(st);
        assert_int_equal(version_of(path), 3);
        /* Opened again: nothing to migrate, nothing changed. */
        assert_int_equal(store_open(path, &st, &err), 0);
        assert_int_equal(store_sandbox_list(st, &v, &n, &err), 0);
        assert_int_equal(n, 3);
        assert_string_equal(v[0].driver, "ns");
        assert_string_equal(v[2].name, "g");
        assert_string_equal(v[2].driver, "gvisor");
        free(v);
        store_close(st);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_records),
            cmocka_unit_test(test_accounts),
            cmocka_unit_test(test_migration),
            cmocka_unit_test(test_migration_driver),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
