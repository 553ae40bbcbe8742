/* SPDX-License-Identifier: MIT */
/* The reaper (reaper.h). Removing a sandbox dir costs what its files cost
 * the filesystem to let go: a disk image that was mounted, above all, whose
 * unlink waits for its pages (~70 ms here, against ~35 ms for the rest of a
 * delete). A delete renames the dir into the trash instead (its name is
 * free at once, and nothing finds it by its old path), and this thread
 * removes it; the next delete does not wait, and a burst of deletes or
 * reclaims is one rename each. rm_rf_at never follows a symlink nor
 * crosses a mount. */
#include "reaper.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"

void reaper_init(struct reaper *r, const char *name)
{
        *r = (struct reaper){.name = name};
        pthread_mutex_init(&r->lock, NULL);
        pthread_cond_init(&r->wake, NULL);
}

/* Remove every entry of the trash dir; what fails is left for next time. */
static void empty_trash(const char *trash)
{
        _cleanup_close_ int fd = open(trash, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        char **names = NULL;
        size_t n = 0;
        if (dir_names_sorted(fd, &names, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                int e = rm_rf_at(fd, names[i]);
                if (e < 0)
                        log_warn("remove %s/%s: %s", trash, names[i], strerror(-e));
        }
        dir_names_free(names, n);
}

static void *reaper_main(void *arg)
{
        struct reaper *r = arg;
        pthread_mutex_lock(&r->lock);
        while (!r->stop) {
                if (!r->pending) {
                        pthread_cond_wait(&r->wake, &r->lock);
                        continue;
                }
                r->pending = false;
                char trash[PATH_MAX];
                snprintf(trash, sizeof(trash), "%s", r->trash);
                pthread_mutex_unlock(&r->lock);
                empty_trash(trash);
                pthread_mutex_lock(&r->lock);
        }
        pthread_mutex_unlock(&r->lock);
        return NULL;
}

/* <parent of dir>/.trash-<name>, made when missing; -errno. */
static int trash_of(const struct reaper *r, const char *dir, char *out, size_t len)
{
        const char *slash = strrchr(dir, '/');
        if (!slash || slash == dir || !slash[1])
                return -EINVAL;
        if (path_printf(out, len, "%.*s/.trash-%s", (int)(slash - dir), dir, r->name) < 0)
                return -ENAMETOOLONG;
        if (mkdir(out, 0700) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int reaper_put(struct reaper *r, const char *dir, struct sbx_error *err)
{
        char trash[PATH_MAX], to[PATH_MAX];
        static unsigned seq;
        int e = trash_of(r, dir, trash, sizeof(trash));
        if (e == 0 &&
            path_printf(to, sizeof(to), "%s/%s.%lld.%u", trash, strrchr(dir, '/') + 1,
                        (long long)mono_us(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) < 0)
                e = -ENAMETOOLONG;
        if (e == 0 && rename(dir, to) < 0)
                e = errno == ENOENT ? 1 : -errno;
        if (e < 0) {
                /* No trash to put it in: remove it now, as before. */
                int x = rm_rf_at(AT_FDCWD, dir);
                return x < 0 ? sbx_error_set(err, -x, "remove sandbox dir `%s`", dir) : 0;
        }
        if (e == 1)
                return 0; /* nothing there */
        pthread_mutex_lock(&r->lock);
        if (!r->trash[0])
                snprintf(r->trash, sizeof(r->trash), "%s", trash);
        r->pending = true;
        if (!r->running && !r->stop)
                r->running = pthread_create(&r->thread, NULL, reaper_main, r) == 0;
        pthread_cond_signal(&r->wake);
        bool inline_rm = !r->running;
        pthread_mutex_unlock(&r->lock);
        if (inline_rm)
                empty_trash(trash);
        return 0;
}

void reaper_stop(struct reaper *r)
{
        pthread_mutex_lock(&r->lock);
        bool running = r->running;
        r->stop = true;
        pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->lock);
        if (running)
                pthread_join(r->thread, NULL);
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
}
