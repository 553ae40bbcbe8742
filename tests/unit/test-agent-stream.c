/* SPDX-License-Identifier: MIT */
/* sandbox-init's streams and terminals, outside any sandbox, through the
 * daemon's client: frames and offsets, backpressure on a slow reader, a
 * reader that leaves, lossless holds and reconnects, two readers, a reader
 * of a killed process, and processes on a terminal.
 *
 *   test-agent-stream PATH-TO-sandbox-init
 */
#include "agent-harness.h"

#include <poll.h>

/* What a stream delivered, from its start to its end. */
struct got {
        struct agent_stream_start start;
        struct buf out[2]; /* bytes per stream, from start.from[i] */
        uint64_t next[2];
        bool exited;
        struct agent_proc_status exit;
        int error; /* an ERROR frame's -errno, or 0 */
};

static void got_free(struct got *g)
{
        agent_stream_start_free(&g->start);
        buf_free(&g->out[0]);
        buf_free(&g->out[1]);
        if (g->exited)
                agent_proc_status_free(&g->exit);
}

static int open_stream(const char *id, uint64_t of, uint64_t ef, struct got *g)
{
        struct sbx_error err = {0};
        int fd = -1;
        memset(g, 0, sizeof(*g));
        buf_init(&g->out[0], 0);
        buf_init(&g->out[1], 0);
        int r = agent_stream_open(&agent, id, of, ef, &fd, &g->start, &err);
        if (r < 0)
                return r;
        g->next[0] = g->start.from[0];
        g->next[1] = g->start.from[1];
        return fd;
}

static void recv_exact(int fd, void *p, size_t n)
{
        uint8_t *b = p;
        while (n > 0) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                if (poll(&pfd, 1, 20000) != 1)
                        fail_msg("no stream bytes for 20 s");
                ssize_t k = recv(fd, b, n, MSG_DONTWAIT);
                if (k < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (k <= 0)
                        fail_msg("stream ended inside a frame (%zd)", k);
                b += k;
                n -= (size_t)k;
        }
}

/* One frame into g. True while the stream goes on; at most max_data bytes
 * of a data frame are taken (the frame is then read whole anyway). */
static bool read_frame(int fd, struct got *g)
{
        uint8_t head[AGENT_SF_HEAD], type = 0;
        uint32_t len = 0;
        uint64_t off = 0;
        recv_exact(fd, head, sizeof(head));
        assert_int_equal(agent_sf_head_decode(head, &type, &len, &off), 0);
        uint8_t *p = malloc(len ? len : 1);
        assert_non_null(p);
        recv_exact(fd, p, len);
        bool more = true;
        if (type == AGENT_SF_STDOUT || type == AGENT_SF_STDERR) {
                int i = type == AGENT_SF_STDOUT ? 0 : 1;
                assert_true(len > 0);
                assert_int_equal(off, g->next[i]); /* in order, no gap */
                assert_int_equal(buf_append(&g->out[i], p, len), 0);
                g->next[i] += len;
        } else if (type == AGENT_SF_EXIT) {
                uint64_t next[2];
                assert_int_equal(agent_stream_exit_decode(p, len, &g->exit, next), 0);
                g->exited = true;
                assert_int_equal(next[0], g->next[0]);
                assert_int_equal(next[1], g->next[1]);
                more = false;
        } else if (type == AGENT_SF_ERROR) {
                struct sbx_error err = {0};
                g->error = agent_stream_error_decode(p, len, &err);
                more = false;
        } else {
                fail_msg("unexpected frame type %u", type);
        }
        free(p);
        return more;
}

/* Read frames until the stream ends; the connection is then at EOF. */
static void drain_stream(int fd, struct got *g)
{
        while (read_frame(fd, g))
                ;
        char c;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&pfd, 1, 5000), 1);
        assert_int_equal(recv(fd, &c, 1, 0), 0);
        close(fd);
}

/* Read until at least n bytes of stdout came. */
static void read_until(int fd, struct got *g, size_t n)
{
        while (g->out[0].len < n)
                assert_true(read_frame(fd, g));
}

static uint64_t total_now(const char *id)
{
        struct agent_poll_result r = {0};
        poll_ok(id, 0, 0, 0, &r);
        uint64_t n = r.out_next + r.out_dropped;
        agent_poll_result_free(&r);
        return n;
}

static bool exited_now(const char *id)
{
        struct agent_poll_result r = {0};
        poll_ok(id, 0, 0, 0, &r);
        bool e = r.status.exited;
        agent_poll_result_free(&r);
        return e;
}

/* A file of n pseudo-random bytes in the test's dir, and its contents. */
static uint8_t *make_blob(const char *name, size_t n, char *path, size_t path_len)
{
        uint8_t *b = malloc(n);
        uint64_t x = 0x9E3779B97F4A7C15ull ^ n;
        assert_non_null(b);
        for (size_t i = 0; i < n; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b[i] = (uint8_t)x;
        }
        snprintf(path, path_len, "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
        return b;
}

static char *spawn_lossless(const char *const *argv)
{
        struct agent_cmd c = cmd(argv);
        c.lossless = true;
        return spawn_ok(&c);
}

/* ---------------------------------------------------------------- tests */

static void test_stream_frames(void **state)
{
        struct agent_cmd c = cmd(CMD("/bin/sh", "-c", "printf out; printf err >&2; exit 3"));
        char *id = spawn_ok(&c);
        struct got g;
        int fd = open_stream(id, 0, 0, &g);
        assert_true(fd >= 0);
        assert_string_equal(g.start.status.id, id);
        assert_int_equal(g.start.dropped[0] + g.start.dropped[1], 0);
        drain_stream(fd, &g);
        assert_true(g.exited);
        assert_int_equal(g.exit.exit_code, 3);
        assert_int_equal(g.out[0].len, 3);
        assert_memory_equal(g.out[0].data, "out", 3);
        assert_int_equal(g.out[1].len, 3);
        assert_memory_equal(g.out[1].data, "err", 3);

        got_free(&g);
        /* Again, from offsets: the rest only, and an exited process ends at once. */
        fd = open_stream(id, 1, 3, &g);
        drain_stream(fd, &g);
        assert_int_equal(g.out[0].len, 2);
        assert_memory_equal(g.out[0].data, "ut", 2);
        assert_int_equal(g.out[1].len, 0);
        got_free(&g);

        /* Past the end, an unknown id. */
        struct agent_stream_start st;
        struct sbx_error err = {0};
        int sfd;
        assert_int_equal(agent_stream_open(&agent, id, 4, 0, &sfd, &st, &err), -EINVAL);
        assert_int_equal(agent_stream_open(&agent, "p0-nope", 0, 0, &sfd, &st, &err), -ENOENT);
        kill_all();
        free(id);
}

/* An attached reader that does not read holds the process back; when it
 * reads again it gets every byte. */
static void test_stream_backpressure(void **state)
{
        char *id = spawn_ok(&(struct agent_cmd){
            .argv = CMD("head", "-c", "16777216", "/dev/zero"), .argc = 4, .cwd = dir});
        struct got g;
        int fd = open_stream(id, 0, 0, &g);
        assert_true(fd >= 0);
        msleep(300);
        uint64_t a = total_now(id);
        msleep(300);
        uint64_t b = total_now(id);
        /* The window, what the sockets buffer, and one frame at most. */
        assert_true(a == b);
        assert_true(b < (4u << 20));
        assert_false(exited_now(id));
        drain_stream(fd, &g);
        assert_true(g.exited);
        assert_int_equal(g.exit.exit_code, 0);
        /* Every byte from where the stream started: a loaded host may let
         * the process run past the 1 MiB ring before the reader attached
         * (it is not lossless), and those are counted, not sent. */
        assert_int_equal(g.start.from[0] + g.out[0].len, 16u << 20);
        got_free(&g);
        kill_all();
        free(id);
}

/* A reader that goes away releases its hold at once. */
static void test_stream_release(void **state)
{
        char *id = spawn_ok(&(struct agent_cmd){
            .argv = CMD("head", "-c", "16777216", "/dev/zero"), .argc = 4, .cwd = dir});
        struct got g;
        int fd = open_stream(id, 0, 0, &g);
        msleep(200);
        assert_false(exited_now(id));
        close(fd);
        struct agent_poll_result last = {0};
        wait_exit(id, &last);
        assert_int_equal(last.status.exit_code, 0);
        assert_true(last.out_dropped > 0); /* no reader: the ring as before */
        agent_poll_result_free(&last);
        got_free(&g);
        kill_all();
        free(id);
}

/* A lossless process waits for its first reader, and keeps its hold
 * where a reader left: reconnects get every byte exactly once. */
static void test_stream_lossless(void **state)
{
        const size_t n = 12u << 20;
        char path[400];
        uint8_t *blob = make_blob("blob-lossless", n, path, sizeof(path));
        char *id = spawn_lossless(CMD("cat", path));
        msleep(300);
        assert_int_equal(total_now(id), AGENT_STREAM_WINDOW);
        assert_false(exited_now(id));

        struct buf all;
        buf_init(&all, 0);
        uint64_t at = 0;
        for (int round = 0; round < 3; round++) {
                struct got g;
                int fd = open_stream(id, at, 0, &g);
                assert_int_equal(g.start.dropped[0], 0);
                read_until(fd, &g, (size_t)(1u << 20) + (size_t)round * 777);
                close(fd); /* mid-frame, perhaps: what was read counts */
                assert_int_equal(buf_append(&all, g.out[0].data, g.out[0].len), 0);
                at += g.out[0].len;
                got_free(&g);
                msleep(100);
                assert_false(exited_now(id)); /* held where the reader left */
        }
        struct got g;
        int fd = open_stream(id, at, 0, &g);
        drain_stream(fd, &g);
        assert_true(g.exited);
        assert_int_equal(buf_append(&all, g.out[0].data, g.out[0].len), 0);
        assert_int_equal(all.len, n);
        assert_memory_equal(all.data, blob, n);
        got_free(&g);
        buf_free(&all);
        free(blob);
        unlink(path);
        kill_all();
        free(id);
}

/* Two readers of one process each get every byte. */
static void test_stream_two_readers(void **state)
{
        const size_t n = 6u << 20;
        char path[400];
        uint8_t *blob = make_blob("blob-two", n, path, sizeof(path));
        char *id = spawn_lossless(CMD("cat", path));
        struct got a, b;
        int fa = open_stream(id, 0, 0, &a);
        int fb = open_stream(id, 0, 0, &b);
        /* Take turns, one reading more than the other: each is held back
         * by the other's pace, and neither loses a byte. */
        struct {
                int fd;
                struct got *g;
                int batch;
        } r[2] = {{fa, &a, 8}, {fb, &b, 3}};
        while (!a.exited || !b.exited) {
                for (int k = 0; k < 2; k++) {
                        struct pollfd pfd = {.fd = r[k].fd, .events = POLLIN};
                        for (int f = 0; f < r[k].batch && !r[k].g->exited; f++) {
                                if (poll(&pfd, 1, f == 0 ? 50 : 0) != 1)
                                        break;
                                read_frame(r[k].fd, r[k].g);
                                assert_int_equal(r[k].g->error, 0);
                        }
                }
        }
        close(fa);
        close(fb);
        assert_int_equal(a.out[0].len, n);
        assert_int_equal(b.out[0].len, n);
        assert_memory_equal(a.out[0].data, blob, n);
        assert_memory_equal(b.out[0].data, blob, n);
        got_free(&a);
        got_free(&b);
        free(blob);
        unlink(path);
        kill_all();
        free(id);
}

/* Killing the process ends its readers' streams with an error. */
static void test_stream_killed(void **state)
{
        struct agent_cmd c = cmd(CMD("sleep", "100"));
        char *id = spawn_ok(&c);
        struct got g;
        int fd = open_stream(id, 0, 0, &g);
        struct sbx_error err = {0};
        assert_int_equal(agent_kill(&agent, id, &err), 0);
        drain_stream(fd, &g);
        assert_false(g.exited);
        assert_int_equal(g.error, -ENOENT);
        got_free(&g);
        free(id);
}

/* --------------------------------------------------------------- terminals */

static char *spawn_pty(const char *const *argv, unsigned cols, unsigned rows)
{
        struct agent_cmd c = cmd(argv);
        c.pty_cols = cols;
        c.pty_rows = rows;
        return spawn_ok(&c);
}

static bool has(const struct buf *b, const char *s)
{
        return memmem(b->data, b->len, s, strlen(s)) != NULL;
}

static void type_in(const char *id, const char *s)
{
        struct sbx_error err = {0};
        assert_int_equal(agent_stdin(&agent, id, s, strlen(s), false, 5000, NULL, &err), 0);
}

static void test_pty(void **state)
{
        char *id = spawn_pty(
            CMD("/bin/sh", "-c", "tty; stty size; echo T=$TERM; read x; stty size; echo got=$x"),
            80, 24);
        struct got g;
        int fd = open_stream(id, 0, 0, &g);
        read_until(fd, &g, 1);
        while (!has(&g.out[0], "T=xterm-256color"))
                assert_true(read_frame(fd, &g));
        struct sbx_error err = {0};
        assert_int_equal(agent_resize(&agent, id, 100, 40, &err), 0);
        type_in(id, "hi\n");
        drain_stream(fd, &g);
        assert_true(g.exited);
        assert_int_equal(g.exit.exit_code, 0);
        assert_true(has(&g.out[0], "/dev/pts/"));
        assert_true(has(&g.out[0], "24 80"));
        assert_true(has(&g.out[0], "40 100"));
        assert_true(has(&g.out[0], "got=hi"));
        assert_int_equal(g.out[1].len, 0); /* stderr is the terminal too */
        assert_true(g.exit.pty);
        /* Exited: no terminal to resize. */
        assert_int_equal(agent_resize(&agent, id, 100, 40, &err), -EBUSY);
        got_free(&g);
        free(id);

        /* Ctrl-C typed at the terminal reaches its foreground process. */
        id = spawn_pty(CMD("sleep", "100"), 80, 24);
        msleep(100);
        type_in(id, "\003");
        struct agent_poll_result last = {0};
        wait_exit(id, &last);
        assert_int_equal(last.status.exit_code, 128 + SIGINT);
        agent_poll_result_free(&last);
        free(id);

        /* No terminal: 409; bad sizes: 400. */
        struct agent_cmd plain = cmd(CMD("true"));
        id = spawn_ok(&plain);
        assert_int_equal(agent_resize(&agent, id, 80, 24, &err), -EBUSY);
        assert_int_equal(agent_resize(&agent, id, 0, 24, &err), -EINVAL);
        free(id);
        struct agent_cmd bad = cmd(CMD("true"));
        bad.pty_cols = AGENT_PTY_MAX + 1;
        bad.pty_rows = 24;
        struct agent_proc_status st;
        assert_int_equal(agent_spawn(&agent, &bad, &st, &err), -EINVAL);
        kill_all();
}

int main(int argc, char **argv)
{
        init_path = argc > 1 ? argv[1] : getenv("SANDBOX_INIT");
        if (!init_path) {
                fprintf(stderr, "usage: test-agent-stream PATH-TO-sandbox-init\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_stream_frames),
            cmocka_unit_test(test_stream_backpressure),
            cmocka_unit_test(test_stream_release),
            cmocka_unit_test(test_stream_lossless),
            cmocka_unit_test(test_stream_two_readers),
            cmocka_unit_test(test_stream_killed),
            cmocka_unit_test(test_pty),
        };
        return cmocka_run_group_tests(tests, start_init, stop_init);
}
