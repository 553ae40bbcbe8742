/* SPDX-License-Identifier: MIT */
#include "hold.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define HOLD_BATCH 256
#define HOLD_SWEEP_MS 1000

struct woken {
        struct hold *h;
        uint32_t events;
};

/* Off the list and out of the epoll set; called locked. */
static void disarm(struct holder *w, struct hold *h)
{
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, h->fd, NULL);
        if (h->client_fd >= 0)
                epoll_ctl(w->epfd, EPOLL_CTL_DEL, h->client_fd, NULL);
        if (h->prev)
                h->prev->next = h->next;
        else
                w->head = h->next;
        if (h->next)
                h->next->prev = h->prev;
        h->prev = h->next = NULL;
        h->armed = false;
        w->n_armed--;
}

int hold_arm(struct holder *w, struct hold *h, int fd, uint32_t events, int client_fd)
{
        h->fd = fd;
        h->client_fd = client_fd;
        h->events = events;
        h->tag_fd = (struct hold_tag){.h = h, .client = false};
        h->tag_client = (struct hold_tag){.h = h, .client = true};
        pthread_mutex_lock(&w->lock);
        if (w->stop) {
                pthread_mutex_unlock(&w->lock);
                return -ESHUTDOWN;
        }
        struct epoll_event ev = {.events = events, .data.ptr = &h->tag_fd};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                int e = errno;
                pthread_mutex_unlock(&w->lock);
                return -e;
        }
        if (client_fd >= 0) {
                struct epoll_event cev = {.events = EPOLLRDHUP, .data.ptr = &h->tag_client};
                if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, client_fd, &cev) < 0)
                        h->client_fd = -1; /* not watched: the stream's keepalive finds it */
        }
        h->armed = true;
        h->prev = NULL;
        h->next = w->head;
        if (w->head)
                w->head->prev = h;
        w->head = h;
        w->n_armed++;
        pthread_mutex_unlock(&w->lock);
        return 0;
}

unsigned long long holder_count(struct holder *w)
{
        pthread_mutex_lock(&w->lock);
        unsigned long long n = w->n_armed;
        pthread_mutex_unlock(&w->lock);
        return n;
}

/* One epoll batch: every hold it names is disarmed first (both of its
 * descriptors may be in the batch), then each is woken once. */
static size_t collect_events(struct holder *w, const struct epoll_event *evs, int n,
                             struct woken *out)
{
        size_t k = 0;
        for (int i = 0; i < n; i++) {
                struct hold_tag *t = evs[i].data.ptr;
                if (!t) { /* the stop's eventfd: the sweep below sees the stop */
                        uint64_t v;
                        ssize_t got = read(w->evfd, &v, sizeof(v));
                        (void)got;
                        continue;
                }
                struct hold *h = t->h;
                uint32_t e = t->client ? HOLD_CLIENT_GONE : evs[i].events;
                if (h->armed) {
                        disarm(w, h);
                        out[k++] = (struct woken){.h = h, .events = e};
                        continue;
                }
                for (size_t j = 0; j < k; j++) /* disarmed by this batch */
                        if (out[j].h == h && (e & HOLD_CLIENT_GONE))
                                out[j].events = HOLD_CLIENT_GONE;
        }
        return k;
}

/* The sweep: holds whose tick asks for it, or all of them at the stop.
 * Collected into a growing array, woken by the caller. */
static size_t collect_sweep(struct holder *w, int64_t now, bool all, struct woken **arr,
                            size_t *cap)
{
        size_t k = 0;
        struct hold *h = w->head;
        while (h) {
                struct hold *next = h->next;
                if (all || h->ops->tick(h, now)) {
                        if (k == *cap) {
                                size_t nc = *cap ? *cap * 2 : 64;
                                struct woken *na = realloc(*arr, nc * sizeof(**arr));
                                if (!na)
                                        break; /* the next sweep takes the rest */
                                *arr = na;
                                *cap = nc;
                        }
                        disarm(w, h);
                        (*arr)[k++] = (struct woken){.h = h, .events = all ? HOLD_STOP : HOLD_TICK};
                }
                h = next;
        }
        return k;
}

static void wake_all(struct woken *arr, size_t n)
{
        for (size_t i = 0; i < n; i++)
                arr[i].h->ops->wake(arr[i].h, arr[i].events);
}

static void *holder_main(void *arg)
{
        struct holder *w = arg;
        struct epoll_event evs[HOLD_BATCH];
        struct woken batch[HOLD_BATCH];
        struct woken *swept = NULL;
        size_t swept_cap = 0;
        int64_t last_sweep = mono_ms();
        for (;;) {
                int n = epoll_wait(w->epfd, evs, HOLD_BATCH, HOLD_SWEEP_MS);
                if (n < 0 && errno != EINTR) {
                        log_error("the holder's epoll failed: %s", strerror(errno));
                        sleep_ms(10);
                }
                pthread_mutex_lock(&w->lock);
                size_t k = n > 0 ? collect_events(w, evs, n, batch) : 0;
                int64_t now = mono_ms();
                bool stop = w->stop;
                size_t s = 0;
                if (stop || now - last_sweep >= HOLD_SWEEP_MS) {
                        s = collect_sweep(w, now, stop, &swept, &swept_cap);
                        last_sweep = now;
                }
                pthread_mutex_unlock(&w->lock);
                wake_all(batch, k);
                wake_all(swept, s);
                /* At the stop no hold can be armed again: once the sweep
                 * found every one, the thread is done. */
                if (stop && s == 0 && k == 0)
                        break;
        }
        free(swept);
        return NULL;
}

int holder_start(struct holder *w)
{
        *w = (struct holder){.epfd = -1, .evfd = -1};
        pthread_mutex_init(&w->lock, NULL);
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        int r = w->epfd < 0 || w->evfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) < 0
                    ? -errno
                    : -pthread_create(&w->thread, NULL, holder_main, w);
        if (r < 0) {
                close_fd(&w->epfd);
                close_fd(&w->evfd);
                return r;
        }
        w->running = true;
        return 0;
}

void holder_stop(struct holder *w)
{
        if (!w->running)
                return;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_mutex_unlock(&w->lock);
        uint64_t one = 1;
        if (write(w->evfd, &one, sizeof(one)) < 0)
                log_warn("wake the holder: %s", strerror(errno));
        pthread_join(w->thread, NULL);
        close_fd(&w->epfd);
        close_fd(&w->evfd);
        w->running = false;
}
