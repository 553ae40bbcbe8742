/* SPDX-License-Identifier: MIT */
#include "relay.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define RELAY_BUF (64 * 1024)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int relay_pump(struct relay_dir *d, short rev_from, short rev_to)
{
        int moved = 0;
        if (d->len == 0 && !d->eof && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t n = recv(d->from, d->buf, d->cap, MSG_DONTWAIT);
                if (n > 0) {
                        d->len = (size_t)n;
                        d->off = 0;
                        moved = 1;
                } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                        d->eof = true;
                }
        }
        if (d->len > d->off && (rev_to & (POLLOUT | POLLERR | POLLHUP))) {
                ssize_t n =
                    send(d->to, d->buf + d->off, d->len - d->off, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (n > 0) {
                        d->off += (size_t)n;
                        moved = 1;
                }
                if (d->off == d->len)
                        d->len = d->off = 0;
        }
        if (d->eof && d->len == 0 && !d->done) {
                shutdown(d->to, SHUT_WR);
                d->done = true;
        }
        return moved;
}

static short want(const struct relay_dir *d, int fd)
{
        short ev = 0;
        if (fd == d->from && d->len == 0 && !d->eof)
                ev |= POLLIN;
        if (fd == d->to && d->len > d->off)
                ev |= POLLOUT;
        return ev;
}

/* How long the next poll may wait: ms (-1: for ever), or -ETIMEDOUT when
 * idle too long, -ECANCELED when told to stop. */
static int64_t next_wait(int64_t last, int64_t idle_ms, const atomic_bool *stop)
{
        if (stop && atomic_load(stop))
                return -ECANCELED;
        int64_t wait = stop ? 1000 : -1;
        if (idle_ms < 0)
                return wait;
        int64_t left = last + idle_ms - now_ms();
        if (left <= 0)
                return -ETIMEDOUT;
        return wait < 0 || left < wait ? MIN(left, 1000000) : wait;
}

static int relay_loop(struct relay_dir *up, struct relay_dir *down, int64_t idle_ms,
                      const atomic_bool *stop)
{
        int a = up->from, b = up->to;
        int64_t last = now_ms();
        while (!up->done || !down->done) {
                struct pollfd p[2] = {{.fd = a, .events = (short)(want(up, a) | want(down, a))},
                                      {.fd = b, .events = (short)(want(up, b) | want(down, b))}};
                int64_t wait = next_wait(last, idle_ms, stop);
                if (wait < -1)
                        return (int)wait;
                int n = poll(p, 2, (int)wait);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n <= 0)
                        continue;
                int r1 = relay_pump(up, p[0].revents, p[1].revents);
                int r2 = relay_pump(down, p[1].revents, p[0].revents);
                if (r1 < 0 || r2 < 0)
                        return r1 < 0 ? r1 : r2;
                if (r1 || r2)
                        last = now_ms();
        }
        return 0;
}

static int preload(struct relay_dir *d, const void *pre, size_t len)
{
        if (len > d->cap)
                return -E2BIG;
        if (len)
                memcpy(d->buf, pre, len);
        d->len = len;
        return 0;
}

int relay_run(int a, int b, const struct relay_pre *pre, int64_t idle_ms, const atomic_bool *stop)
{
        /* Two 64 KiB buffers: on the heap, not on the stack (nor in the
         * TLS) of a thread that has little. */
        char *bufs = malloc(2 * RELAY_BUF);
        if (!bufs)
                return -ENOMEM;
        struct relay_dir up = {.from = a, .to = b, .buf = bufs, .cap = RELAY_BUF};
        struct relay_dir down = {.from = b, .to = a, .buf = bufs + RELAY_BUF, .cap = RELAY_BUF};
        int r = 0;
        if (!pre || ((r = preload(&up, pre->to_b, pre->to_b_len)) == 0 &&
                     (r = preload(&down, pre->to_a, pre->to_a_len)) == 0))
                r = relay_loop(&up, &down, idle_ms, stop);
        free(bufs);
        return r;
}
