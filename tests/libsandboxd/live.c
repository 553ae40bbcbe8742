/* SPDX-License-Identifier: MIT */
/* libsandboxd against a real daemon, for tests/integration/sbx.test.mjs
 * (which starts the daemon and reads its metrics around each run):
 *
 *   libsandboxd-live stale NAME      exec on one client; delete the sandbox
 *                                    through a second; exec again on the
 *                                    first (its credential is now stale)
 *   libsandboxd-live again NAME      exec; wait for a line; exec again (the
 *                                    test lets the credential expire meanwhile)
 *   libsandboxd-live threads NAME N  N threads exec on one client at once
 *   libsandboxd-live stdin NAME      exec with stdin: 3 MiB through `cat`
 *                                    (1 MiB kept, truncated), `wc -c`, and
 *                                    a `sleep` killed at its timeout
 *
 * The token comes from $SANDBOXD_TOKEN. Prints one line per exec
 * ("exec N: EXIT STDOUT") and exits 0 when every call worked. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

static int echo(struct sbx_client *c, const char *name, const char *word)
{
        const char *argv[] = {"echo", word, NULL};
        struct sbx_exec_request rq = {.argv = argv};
        struct sbx_exec_result res = {0};
        struct sbx_err err = {0};
        int r = sbx_exec(c, name, &rq, &res, &err);
        if (r < 0) {
                fprintf(stderr, "exec %s: %d %s: %s\n", word, err.status, err.code, err.message);
                return -1;
        }
        printf("exec %s: %d %s", word, res.exit_code, res.out);
        int ok = res.exit_code == 0 && !strncmp(res.out, word, strlen(word)) ? 0 : -1;
        sbx_exec_result_clear(&res);
        return ok;
}

/* exec; with delete, delete the sandbox through a second client; wait for
 * a line on stdin; exec again on the first client. */
static int twice(const char *name, bool delete)
{
        struct sbx_client *a = NULL, *b = NULL;
        struct sbx_err err = {0};
        if (sbx_client_new(NULL, &a, &err) < 0 || sbx_client_new(NULL, &b, &err) < 0) {
                fprintf(stderr, "client: %s\n", err.message);
                sbx_client_free(a);
                return 1;
        }
        int rc = echo(a, name, "one") < 0;
        if (!rc && delete &&sbx_delete(b, name, &err) < 0) {
                fprintf(stderr, "delete: %d %s: %s\n", err.status, err.code, err.message);
                rc = 1;
        }
        if (!rc)
                printf("ready\n");
        fflush(stdout);
        // The test reads the daemon's request counters here (a line or the
        // end of stdin says it has): what follows is the second call alone.
        for (int ch = 0; !rc && ch != EOF && ch != '\n';)
                ch = getchar();
        if (!rc)
                rc = echo(a, name, "two") < 0;
        sbx_client_free(a);
        sbx_client_free(b);
        return rc;
}

struct job {
        struct sbx_client *c;
        const char *name;
        char word[16];
        int rc;
};

static void *run_job(void *arg)
{
        struct job *j = arg;
        j->rc = echo(j->c, j->name, j->word);
        return NULL;
}

static int threads(const char *name, int n)
{
        struct sbx_client *c = NULL;
        struct sbx_err err = {0};
        if (n < 1 || n > 64 || sbx_client_new(NULL, &c, &err) < 0) {
                fprintf(stderr, "client: %s\n", err.message);
                return 1;
        }
        struct job jobs[64];
        pthread_t tids[64];
        for (int i = 0; i < n; i++) {
                jobs[i] = (struct job){.c = c, .name = name};
                snprintf(jobs[i].word, sizeof(jobs[i].word), "w%d", i);
                pthread_create(&tids[i], NULL, run_job, &jobs[i]);
        }
        int rc = 0;
        for (int i = 0; i < n; i++) {
                pthread_join(tids[i], NULL);
                rc |= jobs[i].rc != 0;
        }
        sbx_client_free(c);
        return rc;
}

static int stdin_exec(struct sbx_client *c, const char *name, const char *const *argv,
                      const void *in, size_t len, int64_t timeout_ms, struct sbx_exec_result *res)
{
        struct sbx_exec_request rq = {
            .argv = argv, .stdin_data = in, .stdin_len = len, .timeout_ms = timeout_ms};
        struct sbx_err err = {0};
        if (sbx_exec(c, name, &rq, res, &err) < 0) {
                fprintf(stderr, "exec %s: %d %s: %s\n", argv[0], err.status, err.code, err.message);
                return -1;
        }
        printf("%s: exit %d, %zu bytes out, truncated %d, timed out %d\n", argv[0], res->exit_code,
               res->out_len, res->truncated, res->timed_out);
        return 0;
}

static int with_stdin(const char *name)
{
        struct sbx_client *c = NULL;
        struct sbx_err err = {0};
        if (sbx_client_new(NULL, &c, &err) < 0) {
                fprintf(stderr, "client: %s\n", err.message);
                return 1;
        }
        size_t n = 3u << 20;
        char *in = malloc(n);
        for (size_t i = 0; in && i < n; i++)
                in[i] = (char)('a' + i % 26);
        struct sbx_exec_result a = {0}, b = {0}, s = {0};
        const char *cat[] = {"cat", NULL}, *wc[] = {"wc", "-c", NULL};
        const char *sl[] = {"sleep", "100", NULL};
        int rc = !in || stdin_exec(c, name, cat, in, n, 0, &a) < 0 ||
                 stdin_exec(c, name, wc, in, n, 0, &b) < 0 ||
                 stdin_exec(c, name, sl, "x", 1, 300, &s) < 0;
        // cat: the first 1 MiB kept, the rest dropped; wc saw all 3 MiB.
        rc = rc || a.exit_code != 0 || !a.truncated || a.out_len != (1u << 20) ||
             memcmp(a.out, in, a.out_len) || b.exit_code != 0 ||
             strtol(b.out, NULL, 10) != (long)n || !s.timed_out || s.exit_code != 137;
        sbx_exec_result_clear(&a);
        sbx_exec_result_clear(&b);
        sbx_exec_result_clear(&s);
        free(in);
        sbx_client_free(c);
        return rc;
}

int main(int argc, char **argv)
{
        if (argc == 3 && !strcmp(argv[1], "stdin"))
                return with_stdin(argv[2]);
        if (argc == 3 && !strcmp(argv[1], "stale"))
                return twice(argv[2], true);
        if (argc == 3 && !strcmp(argv[1], "again"))
                return twice(argv[2], false);
        if (argc == 4 && !strcmp(argv[1], "threads"))
                return threads(argv[2], (int)strtol(argv[3], NULL, 10));
        fprintf(stderr, "usage: libsandboxd-live stale|again NAME | threads NAME N | stdin NAME\n");
        return 2;
}
