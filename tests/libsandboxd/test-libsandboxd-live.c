/* SPDX-License-Identifier: MIT */
/* Every public call of libsandboxd against a real daemon, as cmocka tests
 * (TAP with CMOCKA_MESSAGE_OUTPUT=TAP), run by
 * tests/integration/libsandboxd-live.test.mjs, which starts the daemon
 * (with --credential-ttl 3s) and mints the token:
 *
 *   SANDBOXD_TOKEN   the identity token (its `iss` is the server's URL)
 *   SBX_LIVE_PREFIX  a prefix for the names of sandboxes and images
 *   SBX_LIVE_CLASS   the daemon's default class (ns, gvisor)
 *
 * First, 100 MiB go through an fd each way (sbx_file_write from a file,
 * sbx_file_read into one): sha256 of both ends against the sandbox's
 * sha256sum, and the process's peak RSS (getrusage) stays far below the
 * size. Then the control plane, commands, processes, streams, terminals,
 * files, snapshots, images, forks, the errors the client and the server
 * give, a stale credential re-attached once and an expired one refreshed. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandboxd.h"

#define BIG (100 * 1024 * 1024)
#define CHUNK (1024 * 1024)
/* The bound on the peak RSS of the 100 MiB copies, ASan's shadow included. */
#define RSS_BOUND_KIB (64 * 1024)

static struct sbx_client *cl;
static char prefix[64];
static bool gvisor;

/* prefix-word, in a static buffer of its own per slot. */
static const char *nm(int slot, const char *word)
{
        static char names[8][128];
        snprintf(names[slot], sizeof(names[slot]), "%s-%s", prefix, word);
        return names[slot];
}

static void fail_err(int r, const struct sbx_err *e, const char *what)
{
        if (r < 0)
                fail_msg("%s: %d: %d %s: %s", what, r, e->status, e->code, e->message);
}
#define OK(call, what)                                                                             \
        do {                                                                                       \
                struct sbx_err e_ = {0};                                                           \
                int r_ = (call);                                                                   \
                (void)e_;                                                                          \
                fail_err(r_, &e_, what);                                                           \
        } while (0)

/* A call that must fail with this status and code. */
static void refused(int r, const struct sbx_err *e, int status, const char *code)
{
        if (r >= 0)
                fail_msg("succeeded, expected %d %s", status, code);
        if (e->status != status || strcmp(e->code, code))
                fail_msg("got %d %s (%s), expected %d %s", e->status, e->code, e->message, status,
                         code);
        assert_true(r < 0);
}

static int64_t max_rss_kib(void)
{
        struct rusage ru;
        assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
        return ru.ru_maxrss;
}

static void hex(const unsigned char *d, unsigned n, char *out)
{
        for (unsigned i = 0; i < n; i++)
                snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* sha256 of fd from its start, as hex. */
static void sha_fd(int fd, char out[65])
{
        EVP_MD_CTX *m = EVP_MD_CTX_new();
        assert_non_null(m);
        EVP_DigestInit_ex(m, EVP_sha256(), NULL);
        char *buf = malloc(CHUNK);
        assert_non_null(buf);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        ssize_t n;
        while ((n = read(fd, buf, CHUNK)) > 0)
                EVP_DigestUpdate(m, buf, (size_t)n);
        assert_int_equal(n, 0);
        unsigned char d[32];
        unsigned dl = 0;
        EVP_DigestFinal_ex(m, d, &dl);
        hex(d, dl, out);
        EVP_MD_CTX_free(m);
        free(buf);
}

static int tmpfile_fd(void)
{
        const char *dir = getenv("TMPDIR");
        char path[4096];
        snprintf(path, sizeof(path), "%s/sbx-live-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        unlink(path);
        return fd;
}

/* A command's stdout, which must exit 0. The caller frees it. */
static char *run_out(const char *name, const char *const *argv)
{
        struct sbx_exec_request rq = {.argv = argv};
        struct sbx_exec_result res = {0};
        OK(sbx_exec(cl, name, &rq, &res, &e_), argv[0]);
        assert_int_equal(res.exit_code, 0);
        char *out = res.out;
        res.out = NULL;
        sbx_exec_result_clear(&res);
        return out;
}

struct prog {
        int64_t last, total;
        int calls;
};

static int progress(void *ctx, int64_t done, int64_t total)
{
        struct prog *p = ctx;
        if (done < p->last)
                fail_msg("progress went back from %lld to %lld", (long long)p->last,
                         (long long)done);
        p->last = done;
        p->total = total;
        p->calls++;
        return 0;
}

static void big_files(void **state)
{
        (void)state;
        const char *box = nm(0, "big");
        int64_t before = max_rss_kib();
        // 100 MiB of a xorshift sequence, written a chunk at a time.
        int fd = tmpfile_fd();
        uint64_t *buf = malloc(CHUNK);
        assert_non_null(buf);
        uint64_t x = 0x9e3779b97f4a7c15u;
        for (size_t done = 0; done < BIG; done += CHUNK) {
                for (size_t i = 0; i < CHUNK / 8; i++) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        buf[i] = x;
                }
                assert_int_equal(write(fd, buf, CHUNK), CHUNK);
        }
        free(buf);
        char local[65], remote[65] = "", back[65];
        sha_fd(fd, local);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        struct prog up = {0};
        OK(sbx_file_write(cl, box, "big.bin", fd, progress, &up, &e_), "file_write 100 MiB");
        assert_int_equal(up.last, BIG);
        assert_true(up.calls > 1);
        const char *sum[] = {"sha256sum", "/workspace/big.bin", NULL};
        char *out = run_out(box, sum);
        snprintf(remote, sizeof(remote), "%.64s", out);
        free(out);
        assert_string_equal(remote, local);
        int fd2 = tmpfile_fd();
        struct prog down = {0};
        OK(sbx_file_read(cl, box, "big.bin", fd2, progress, &down, &e_), "file_read 100 MiB");
        assert_int_equal(down.last, BIG);
        struct stat st;
        assert_int_equal(fstat(fd2, &st), 0);
        assert_int_equal(st.st_size, BIG);
        sha_fd(fd2, back);
        assert_string_equal(back, local);
        close(fd);
        close(fd2);
        int64_t after = max_rss_kib();
        printf("# 100 MiB each way: peak RSS %lld KiB (%lld KiB before), sha256 %s\n",
               (long long)after, (long long)before, local);
        assert_true(after < RSS_BOUND_KIB);
        assert_true(after - before < 32 * 1024);
        OK(sbx_delete(cl, box, &e_), "delete");
}

static void control_plane(void **state)
{
        (void)state;
        const char *box = nm(0, "ctl");
        char want[16];
        snprintf(want, sizeof(want), "%d.%d", SANDBOXD_CLIENT_VERSION_MAJOR,
                 SANDBOXD_CLIENT_VERSION_MINOR);
        assert_string_equal(sbxc_version(), want);
        assert_true(!strncmp(sbx_client_server(cl), "http://127.0.0.1:", 17));
        struct sbx_attach_options o = {.network = "none", .image = "tiny"};
        struct sbx_sandbox s = {0};
        OK(sbx_attach(cl, box, &o, &s, &e_), "attach");
        assert_string_equal(s.name, box);
        assert_string_equal(s.state, "running");
        assert_string_equal(s.image, "tiny");
        assert_string_equal(s.network, "none");
        assert_non_null(s.endpoint);
        assert_non_null(s.expires_at);
        sbx_sandbox_clear(&s);
        OK(sbx_get(cl, box, &s, &e_), "get");
        assert_string_equal(s.name, box);
        assert_null(s.endpoint); // a record, not a handle
        sbx_sandbox_clear(&s);
        struct sbx_sandbox_list l = {0};
        OK(sbx_list(cl, &l, &e_), "list");
        bool found = false;
        for (size_t i = 0; i < l.n; i++)
                found |= !strcmp(l.items[i].name, box);
        assert_true(found);
        sbx_sandbox_list_clear(&l);
        OK(sbx_stop(cl, box, &e_), "stop");
        OK(sbx_get(cl, box, &s, &e_), "get stopped");
        assert_string_not_equal(s.state, "running");
        sbx_sandbox_clear(&s);
        // A data-plane call after a stop resumes it (an attach under it).
        const char *t[] = {"true", NULL};
        free(run_out(box, t));
        OK(sbx_get(cl, box, &s, &e_), "get resumed");
        assert_string_equal(s.state, "running");
        sbx_sandbox_clear(&s);
        OK(sbx_delete(cl, box, &e_), "delete");
        struct sbx_err e = {0};
        refused(sbx_get(cl, box, &s, &e), &e, 404, "sandbox_not_found");
}

static void exec_calls(void **state)
{
        (void)state;
        const char *box = nm(0, "exec");
        const char *argv[] = {"sh", "-c", "echo $FOO; pwd; id -u; echo oops >&2; exit 3", NULL};
        const char *env[] = {"FOO=bar baz", NULL};
        struct sbx_exec_request rq = {.argv = argv, .env = env, .cwd = "/tmp", .user = "root"};
        struct sbx_exec_result res = {0};
        OK(sbx_exec(cl, box, &rq, &res, &e_), "exec");
        assert_int_equal(res.exit_code, 3);
        assert_string_equal(res.out, "bar baz\n/tmp\n0\n");
        assert_int_equal(res.out_len, strlen(res.out));
        assert_string_equal(res.err, "oops\n");
        assert_false(res.timed_out);
        assert_false(res.truncated);
        sbx_exec_result_clear(&res);
        // Killed at its timeout.
        const char *slp[] = {"sleep", "10", NULL};
        rq = (struct sbx_exec_request){.argv = slp, .timeout_ms = 300};
        OK(sbx_exec(cl, box, &rq, &res, &e_), "exec timeout");
        assert_true(res.timed_out);
        assert_true(res.duration_ms < 5000);
        sbx_exec_result_clear(&res);
        // With stdin bytes.
        const char *cat[] = {"sh", "-c", "tr a-z A-Z; echo done >&2", NULL};
        rq = (struct sbx_exec_request){.argv = cat, .stdin_data = "hello\n", .stdin_len = 6};
        OK(sbx_exec(cl, box, &rq, &res, &e_), "exec stdin");
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.out, "HELLO\n");
        assert_string_equal(res.err, "done\n");
        sbx_exec_result_clear(&res);
        // A command that is not there: the sandbox's 127.
        const char *none[] = {"no-such-command", NULL};
        rq = (struct sbx_exec_request){.argv = none};
        OK(sbx_exec(cl, box, &rq, &res, &e_), "exec missing");
        assert_int_equal(res.exit_code, 127);
        sbx_exec_result_clear(&res);
        struct sbx_err e = {0};
        const char *empty[] = {NULL};
        rq = (struct sbx_exec_request){.argv = empty};
        refused(sbx_exec(cl, box, &rq, &res, &e), &e, 400, "invalid_argument");
}

/* Poll until the output holds want (or, want NULL, until it exits). */
static void poll_for(const char *box, const char *id, const char *want, char *acc, size_t cap,
                     struct sbx_process *last)
{
        uint64_t at = 0, err_at = 0;
        size_t len = strlen(acc);
        for (int i = 0; i < 100; i++) {
                struct sbx_output o = {0};
                OK(sbx_poll(cl, box, id, at, err_at, 2000, &o, &e_), "poll");
                size_t n = o.out_len < cap - 1 - len ? o.out_len : cap - 1 - len;
                memcpy(acc + len, o.out, n);
                acc[len += n] = '\0';
                at = o.out_next;
                err_at = o.err_next;
                bool done = want ? strstr(acc, want) != NULL : !o.status.running;
                if (done && last) {
                        sbx_process_clear(last);
                        *last = o.status;
                        o.status = (struct sbx_process){0};
                }
                sbx_output_clear(&o);
                if (done)
                        return;
        }
        fail_msg("no '%s' in '%s'", want ? want : "(exit)", acc);
}

static void processes(void **state)
{
        (void)state;
        const char *box = nm(0, "proc");
        const char *argv[] = {"cat", NULL};
        struct sbx_spawn_request rq = {.argv = argv, .stdin_open = true};
        struct sbx_process p = {0};
        OK(sbx_spawn(cl, box, &rq, &p, &e_), "spawn");
        assert_non_null(p.id);
        assert_true(p.running);
        assert_string_equal(p.argv[0], "cat");
        assert_null(p.argv[1]);
        OK(sbx_stdin(cl, box, p.id, "abc\n", 4, false, &e_), "stdin");
        char acc[4096] = "";
        poll_for(box, p.id, "abc\n", acc, sizeof(acc), NULL);
        struct sbx_process_list l = {0};
        OK(sbx_processes(cl, box, &l, &e_), "processes");
        bool listed = false;
        for (size_t i = 0; i < l.n; i++)
                listed |= !strcmp(l.items[i].id, p.id) && l.items[i].running;
        assert_true(listed);
        sbx_process_list_clear(&l);
        OK(sbx_stdin(cl, box, p.id, "def\n", 4, true, &e_), "stdin close");
        struct sbx_process end = {0};
        acc[0] = '\0';
        poll_for(box, p.id, NULL, acc, sizeof(acc), &end);
        assert_string_equal(acc, "abc\ndef\n");
        assert_true(end.has_exit_code);
        assert_int_equal(end.exit_code, 0);
        assert_non_null(end.exited_at);
        sbx_process_clear(&end);
        struct sbx_err e = {0};
        // Stdin after its close.
        refused(sbx_stdin(cl, box, p.id, "x", 1, false, &e), &e, 409, "invalid_state");
        OK(sbx_kill(cl, box, p.id, &e_), "kill");
        struct sbx_output o = {0};
        refused(sbx_poll(cl, box, p.id, 0, 0, 0, &o, &e), &e, 404, "process_not_found");
        refused(sbx_kill(cl, box, "no-such-id", &e), &e, 404, "process_not_found");
        refused(sbx_poll(cl, box, "bad/id", 0, 0, 0, &o, &e), &e, 400, "invalid_argument");
        sbx_process_clear(&p);
        // kill stops a running one.
        const char *slp[] = {"sleep", "100", NULL};
        rq = (struct sbx_spawn_request){.argv = slp};
        OK(sbx_spawn(cl, box, &rq, &p, &e_), "spawn sleep");
        OK(sbx_kill(cl, box, p.id, &e_), "kill running");
        refused(sbx_poll(cl, box, p.id, 0, 0, 0, &o, &e), &e, 404, "process_not_found");
        sbx_process_clear(&p);
}

struct collect {
        char out[4096], err[4096];
        size_t out_len, err_len;
        uint64_t out_at, err_at;
};

static int collect(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *data, size_t len)
{
        struct collect *c = ctx;
        bool out = s == SBX_STDOUT;
        uint64_t *at = out ? &c->out_at : &c->err_at;
        if (offset != *at)
                fail_msg("offset %llu, expected %llu", (unsigned long long)offset,
                         (unsigned long long)*at);
        *at += len;
        char *buf = out ? c->out : c->err;
        size_t *n = out ? &c->out_len : &c->err_len;
        size_t k = len < sizeof(c->out) - 1 - *n ? len : sizeof(c->out) - 1 - *n;
        memcpy(buf + *n, data, k);
        buf[ *n += k] = '\0';
        return 0;
}

static void signals_and_streams(void **state)
{
        (void)state;
        const char *box = nm(0, "sig");
        const char *argv[] = {"sh", "-c",
                              "trap 'echo got; exit 9' USR1; echo e >&2; echo ready; "
                              "while :; do sleep 0.1; done",
                              NULL};
        struct sbx_spawn_request rq = {.argv = argv, .lossless = true};
        struct sbx_process p = {0};
        OK(sbx_spawn(cl, box, &rq, &p, &e_), "spawn");
        assert_true(p.lossless);
        char acc[4096] = "";
        poll_for(box, p.id, "ready\n", acc, sizeof(acc), NULL);
        struct sbx_err e = {0};
        refused(sbx_signal(cl, box, p.id, "usr1", &e), &e, 400, "invalid_argument");
        OK(sbx_signal(cl, box, p.id, "USR1", &e_), "signal");
        struct collect c = {0};
        struct sbx_stream_result res = {0};
        OK(sbx_stream(cl, box, p.id, NULL, collect, &c, &res, &e_), "stream");
        assert_string_equal(c.out, "ready\ngot\n");
        // (sh may report its sleep's USR1 after the "e".)
        assert_memory_equal(c.err, "e\n", 2);
        if (!res.status.has_exit_code)
                fail_msg("no exit code: running %d, exited_at %s", res.status.running,
                         res.status.exited_at ? res.status.exited_at : "-");
        assert_int_equal(res.status.exit_code, 9);
        assert_int_equal(res.out_next, 10);
        assert_int_equal(res.err_next, c.err_len);
        // From an offset: only what follows it.
        struct collect tail = {.out_at = 6, .err_at = res.err_next};
        struct sbx_stream_options so = {.out_from = 6, .err_from = res.err_next};
        sbx_stream_result_clear(&res);
        OK(sbx_stream(cl, box, p.id, &so, collect, &tail, &res, &e_), "stream from 6");
        assert_string_equal(tail.out, "got\n");
        assert_string_equal(tail.err, "");
        assert_int_equal(res.out_next, 10);
        sbx_stream_result_clear(&res);
        OK(sbx_kill(cl, box, p.id, &e_), "kill");
        sbx_process_clear(&p);
        // TERM by default (NULL).
        const char *slp[] = {"sleep", "100", NULL};
        rq = (struct sbx_spawn_request){.argv = slp};
        OK(sbx_spawn(cl, box, &rq, &p, &e_), "spawn sleep");
        OK(sbx_signal(cl, box, p.id, NULL, &e_), "signal TERM");
        struct sbx_process end = {0};
        acc[0] = '\0';
        poll_for(box, p.id, NULL, acc, sizeof(acc), &end);
        assert_int_equal(end.exit_code, 128 + 15);
        sbx_process_clear(&end);
        OK(sbx_kill(cl, box, p.id, &e_), "kill");
        sbx_process_clear(&p);
}

static void terminal(void **state)
{
        (void)state;
        const char *box = nm(0, "pty");
        const char *argv[] = {"sh", "-c", "read x; stty size; echo \"[$x]\"", NULL};
        struct sbx_spawn_request rq = {.argv = argv, .pty_cols = 80, .pty_rows = 24};
        struct sbx_process p = {0};
        OK(sbx_spawn(cl, box, &rq, &p, &e_), "spawn pty");
        assert_true(p.pty);
        struct sbx_err e = {0};
        refused(sbx_resize(cl, box, p.id, 0, 30, &e), &e, 400, "invalid_argument");
        OK(sbx_resize(cl, box, p.id, 100, 30, &e_), "resize");
        // The line goes through the terminal (stdin of a pty is open).
        OK(sbx_stdin(cl, box, p.id, "hi\n", 3, false, &e_), "stdin pty");
        struct collect c = {0};
        struct sbx_stream_result res = {0};
        OK(sbx_stream(cl, box, p.id, NULL, collect, &c, &res, &e_), "stream pty");
        if (!strstr(c.out, "30 100") || !strstr(c.out, "[hi]"))
                fail_msg("terminal output: '%s'", c.out);
        assert_int_equal(res.status.exit_code, 0);
        sbx_stream_result_clear(&res);
        OK(sbx_kill(cl, box, p.id, &e_), "kill");
        sbx_process_clear(&p);
        // A spawn with an impossible terminal is refused before it is sent.
        rq.pty_cols = 5000;
        refused(sbx_spawn(cl, box, &rq, &p, &e), &e, 400, "invalid_argument");
}

static int cancel(void *ctx, int64_t done, int64_t total)
{
        (void)ctx;
        (void)total;
        return done > 0;
}

static void files(void **state)
{
        (void)state;
        const char *box = nm(0, "files");
        int fd = tmpfile_fd();
        const char body[] = "line one\nline two\n";
        assert_int_equal(write(fd, body, sizeof(body) - 1), sizeof(body) - 1);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        OK(sbx_file_write(cl, box, "d/e/f.txt", fd, NULL, NULL, &e_), "file_write");
        int out = tmpfile_fd();
        OK(sbx_file_read(cl, box, "/workspace/d/e/f.txt", out, NULL, NULL, &e_), "file_read");
        char got[64] = "";
        assert_int_equal(pread(out, got, sizeof(got) - 1, 0), sizeof(body) - 1);
        assert_string_equal(got, body);
        struct sbx_dir d = {0};
        OK(sbx_file_list(cl, box, "d", &d, &e_), "file_list");
        assert_int_equal(d.n, 1);
        assert_string_equal(d.items[0].name, "e");
        assert_true(d.items[0].is_directory);
        sbx_dir_clear(&d);
        OK(sbx_file_list(cl, box, "d/e", &d, &e_), "file_list e");
        assert_int_equal(d.n, 1);
        assert_string_equal(d.items[0].name, "f.txt");
        assert_false(d.items[0].is_directory);
        sbx_dir_clear(&d);
        struct sbx_err e = {0};
        refused(sbx_file_read(cl, box, "nope.txt", out, NULL, NULL, &e), &e, 404, "file_not_found");
        refused(sbx_file_list(cl, box, "nope", &d, &e), &e, 404, "file_not_found");
        refused(sbx_file_read(cl, box, "d", out, NULL, NULL, &e), &e, 404, "file_not_found");
        // A progress callback that says stop.
        char blob[256 * 1024];
        memset(blob, 'x', sizeof(blob));
        assert_int_equal(pwrite(fd, blob, sizeof(blob), 0), sizeof(blob));
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        int r = sbx_file_write(cl, box, "cancelled.bin", fd, cancel, NULL, &e);
        assert_true(r < 0);
        assert_string_equal(e.code, "cancelled");
        // The file appears whole or not at all.
        refused(sbx_file_read(cl, box, "cancelled.bin", out, NULL, NULL, &e), &e, 404,
                "file_not_found");
        // A local fd that cannot be written.
        int ro = open("/dev/null", O_RDONLY | O_CLOEXEC);
        r = sbx_file_read(cl, box, "d/e/f.txt", ro, NULL, NULL, &e);
        assert_true(r < 0);
        assert_string_equal(e.code, "io_error");
        close(ro);
        close(fd);
        close(out);
}

static bool has_image(const char *name, const char *source)
{
        struct sbx_image_list l = {0};
        OK(sbx_images(cl, &l, &e_), "images");
        bool found = false;
        for (size_t i = 0; i < l.n; i++)
                found |= !strcmp(l.items[i].name, name) &&
                         (!source || (l.items[i].source && !strcmp(l.items[i].source, source)));
        sbx_image_list_clear(&l);
        return found;
}

static void snapshots_and_images(void **state)
{
        (void)state;
        const char *box = nm(0, "snap"), *img = nm(1, "img"), *from = nm(2, "fromimg");
        assert_true(has_image("tiny", NULL));
        const char *mark[] = {"sh", "-c", "echo kept > /workspace/mark", NULL};
        free(run_out(box, mark));
        struct sbx_snapshot_info si = {0};
        OK(sbx_snapshot(cl, box, img, &si, &e_), "snapshot");
        assert_string_equal(si.image, img);
        assert_true(si.size_bytes > 0);
        assert_non_null(si.created_at);
        sbx_snapshot_info_clear(&si);
        assert_true(has_image(img, "snapshot"));
        struct sbx_err e = {0};
        refused(sbx_snapshot(cl, box, img, &si, &e), &e, 409, "already_exists");
        refused(sbx_snapshot(cl, box, "", &si, &e), &e, 400, "invalid_argument");
        struct sbx_attach_options o = {.image = img};
        OK(sbx_attach(cl, from, &o, NULL, &e_), "attach from the snapshot");
        const char *cat[] = {"cat", "/workspace/mark", NULL};
        char *out = run_out(from, cat);
        assert_string_equal(out, "kept\n");
        free(out);
        OK(sbx_delete(cl, from, &e_), "delete");
        o.image = "no-such-image";
        refused(sbx_attach(cl, nm(3, "noimg"), &o, NULL, &e), &e, 404, "image_not_found");
}

static void forks(void **state)
{
        (void)state;
        const char *box = nm(0, "fk"), *fork = nm(1, "fk2");
        const char *mark[] = {"sh", "-c", "echo before > /workspace/mark", NULL};
        free(run_out(box, mark));
        struct sbx_sandbox s = {0};
        struct sbx_err e = {0};
        if (gvisor) {
                // No checkpoint was made: nothing to fork from.
                refused(sbx_fork(cl, box, fork, &s, &e), &e, 409, "no_checkpoint");
                return;
        }
        OK(sbx_fork(cl, box, fork, &s, &e_), "fork");
        assert_string_equal(s.name, fork);
        assert_non_null(s.endpoint);
        assert_non_null(s.expires_at);
        sbx_sandbox_clear(&s);
        const char *cat[] = {"sh", "-c", "cat /workspace/mark; echo after > /workspace/mark", NULL};
        char *out = run_out(fork, cat);
        assert_string_equal(out, "before\n");
        free(out);
        const char *cat1[] = {"cat", "/workspace/mark", NULL};
        out = run_out(box, cat1);
        assert_string_equal(out, "before\n");
        free(out);
        refused(sbx_fork(cl, box, fork, &s, &e), &e, 409, "already_exists");
        refused(sbx_fork(cl, box, "bad/name", &s, &e), &e, 400, "invalid_argument");
        OK(sbx_delete(cl, fork, &e_), "delete fork");
}

static void errors(void **state)
{
        (void)state;
        struct sbx_err e = {0};
        struct sbx_sandbox s = {0};
        // Refused before anything is sent.
        refused(sbx_get(cl, "bad/name", &s, &e), &e, 400, "invalid_argument");
        refused(sbx_attach(cl, "", NULL, &s, &e), &e, 400, "invalid_argument");
        refused(sbx_get(cl, nm(0, "never-made"), &s, &e), &e, 404, "sandbox_not_found");
        // A bad token: the server's 401.
        struct sbx_client *bad = NULL;
        struct sbx_options o = {.token = "not-a-token", .server_url = sbx_client_server(cl)};
        OK(sbx_client_new(&o, &bad, &e_), "client with a bad token");
        struct sbx_sandbox_list l = {0};
        refused(sbx_list(bad, &l, &e), &e, 401, "unauthenticated");
        refused(sbx_attach(bad, nm(0, "x"), NULL, &s, &e), &e, 401, "unauthenticated");
        sbx_client_free(bad);
        // No token at all, and a token without a server.
        const char *saved = getenv("SANDBOXD_TOKEN");
        char *tok = strdup(saved);
        unsetenv("SANDBOXD_TOKEN");
        unsetenv("ASTRO_AUTHZ_TOKEN");
        int r = sbx_client_new(NULL, &bad, &e);
        assert_true(r < 0);
        assert_string_equal(e.code, "no_token");
        setenv("SANDBOXD_TOKEN", tok, 1);
        free(tok);
        // A server that is not there.
        o = (struct sbx_options){.server_url = "http://127.0.0.1:1", .timeout_ms = 2000};
        OK(sbx_client_new(&o, &bad, &e_), "client of a closed port");
        r = sbx_list(bad, &l, &e);
        assert_true(r < 0);
        assert_int_equal(e.status, 0);
        assert_string_equal(e.code, "unreachable");
        sbx_client_free(bad);
}

/* A stale credential (the sandbox deleted through another client) is
 * re-attached once, and the call works; an expired one (the daemon gives
 * 3 s) is refreshed. */
static void credentials(void **state)
{
        (void)state;
        const char *box = nm(0, "stale");
        struct sbx_client *other = NULL;
        OK(sbx_client_new(NULL, &other, &e_), "second client");
        const char *mark[] = {"sh", "-c", "echo one > /workspace/mark", NULL};
        free(run_out(box, mark));
        OK(sbx_delete(other, box, &e_), "delete through the other client");
        // cl's cached credential names a sandbox that is gone: its call
        // gets 401 credential_stale, re-attaches (a new, empty sandbox) and
        // runs once.
        const char *ls[] = {"sh", "-c", "ls /workspace; echo ran", NULL};
        char *out = run_out(box, ls);
        assert_string_equal(out, "ran\n");
        free(out);
        struct sbx_sandbox s = {0};
        OK(sbx_get(other, box, &s, &e_), "get re-made");
        assert_string_equal(s.state, "running");
        sbx_sandbox_clear(&s);
        sbx_client_free(other);
        // Past the credential's lifetime: refreshed, the call works.
        struct timespec ts = {.tv_sec = 3, .tv_nsec = 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
        const char *t[] = {"echo", "later", NULL};
        out = run_out(box, t);
        assert_string_equal(out, "later\n");
        free(out);
        OK(sbx_delete(cl, box, &e_), "delete");
}

int main(void)
{
        const char *p = getenv("SBX_LIVE_PREFIX");
        snprintf(prefix, sizeof(prefix), "%s", p && *p ? p : "live");
        const char *cls = getenv("SBX_LIVE_CLASS");
        gvisor = cls && !strcmp(cls, "gvisor");
        struct sbx_err err = {0};
        if (sbx_client_new(NULL, &cl, &err) < 0) {
                fprintf(stderr, "client: %s %s\n", err.code, err.message);
                return 1;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(big_files),
            cmocka_unit_test(control_plane),
            cmocka_unit_test(exec_calls),
            cmocka_unit_test(processes),
            cmocka_unit_test(signals_and_streams),
            cmocka_unit_test(terminal),
            cmocka_unit_test(files),
            cmocka_unit_test(snapshots_and_images),
            cmocka_unit_test(forks),
            cmocka_unit_test(errors),
            cmocka_unit_test(credentials),
        };
        int failed = cmocka_run_group_tests_name("libsandboxd-live", tests, NULL, NULL);
        sbx_client_free(cl);
        return failed ? 1 : 0;
}
