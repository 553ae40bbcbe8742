/* SPDX-License-Identifier: MIT */
/* NAT for a gvisor sandbox (gvisor.h): the same veth pair, addresses and
 * nftables rules as an ns sandbox's (net.c), in a network namespace of its
 * own that runsc's sentry joins (--network=sandbox) and runs its own
 * network stack on. The namespace is kept by a bind mount on <dir>/netns
 * while the sandbox runs; its veth goes with it. */
#include "gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

struct net_job {
        const struct ns_net_cfg *cfg;
        const struct rt_spec *spec;
        int dirfd;
        struct ns_net net;
        struct sbx_error err;
        int result;
};

/* A namespace belongs to a thread: this one makes the sandbox's, pins it
 * on <dir>/netns, creates the veth from the host's and configures the
 * sandbox's end from inside, then ends, leaving the daemon's threads in
 * the host's namespace. */
static int net_build(struct net_job *j)
{
        _cleanup_close_ int host = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (host < 0)
                return sbx_error_set(&j->err, errno, "open the host's netns");
        if (unshare(CLONE_NEWNET) < 0)
                return sbx_error_set(&j->err, errno, "unshare the sandbox's netns");
        _cleanup_close_ int sb = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (sb < 0)
                return sbx_error_set(&j->err, errno, "open the sandbox's netns");
        int f = openat(j->dirfd, "netns", O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (f < 0)
                return sbx_error_set(&j->err, errno, "create netns of the sandbox");
        char target[64];
        snprintf(target, sizeof(target), "/proc/self/fd/%d", f);
        int r = mount("/proc/thread-self/ns/net", target, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
        close(f);
        if (r < 0)
                return sbx_error_set(&j->err, -r, "pin the sandbox's netns");
        if (setns(host, CLONE_NEWNET) < 0)
                return sbx_error_set(&j->err, errno, "back to the host's netns");
        uint32_t hint = j->spec->uid_count ? j->spec->uid_base / j->spec->uid_count : 0;
        if ((r = net_veth_create(j->cfg, hint, sb, &j->net, &j->err)) < 0)
                return r;
        if (setns(sb, CLONE_NEWNET) < 0)
                return sbx_error_set(&j->err, errno, "enter the sandbox's netns");
        if ((r = net_loopback_up(&j->err)) < 0)
                return r;
        return net_sandbox_setup(&j->net, &j->err);
}

static void *net_thread(void *arg)
{
        struct net_job *j = arg;
        j->result = net_build(j);
        return NULL;
}

/* The image's /etc/resolv.conf is replaced (read-only) by the daemon's
 * nameservers: its mount point made when absent, an image whose /etc or
 * resolv.conf is not plain keeps its own, as in the ns class. */
static int resolv_write(int dirfd, const char *text, bool *ret_bind, struct sbx_error *err)
{
        *ret_bind = false;
        _cleanup_close_ int d = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int f = d < 0 ? -1
                      : openat(d, "resolv.conf",
                               O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (f < 0)
                return sbx_error_set(err, errno, "create resolv.conf of the sandbox");
        int r = write_all(f, text, strlen(text));
        close(f);
        if (r < 0)
                return sbx_error_set(err, -r, "write resolv.conf of the sandbox");
        _cleanup_close_ int etc =
            openat(dirfd, "root/etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (etc < 0)
                return 0;
        f = openat(etc, "resolv.conf", O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (f >= 0)
                close(f);
        struct stat st;
        if (fstatat(etc, "resolv.conf", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return 0;
        /* The host's view too, so that the file endpoints find it
         * read-only, as the sandbox does. */
        _cleanup_close_ int target = openat(etc, "resolv.conf", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int tree =
            open_tree(dirfd, "resolv.conf", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                            MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
        if (target < 0 || tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0 ||
            move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return sbx_error_set(err, errno, "bind resolv.conf in the sandbox");
        *ret_bind = true;
        return 0;
}

int gv_net_up(const struct ns_net_cfg *cfg, int dirfd, const struct rt_spec *spec, bool *ret_resolv,
              struct sbx_error *err)
{
        *ret_resolv = false;
        if (!cfg || !cfg->enabled)
                return sbx_error_set(err, ENOTSUP,
                                     "network nat is not enabled on this daemon (network = none)");
        gv_net_down(dirfd); /* a pin left by a run that did not stop */
        struct net_job j = {.cfg = cfg, .spec = spec, .dirfd = dirfd, .result = -EIO};
        pthread_t t;
        int r = pthread_create(&t, NULL, net_thread, &j);
        if (r)
                return sbx_error_set(err, r, "network thread");
        pthread_join(t, NULL);
        if (j.result < 0) {
                if (err)
                        *err = j.err;
                gv_net_down(dirfd);
                return j.result;
        }
        if ((r = net_addr_save(dirfd, &j.net, err)) < 0 ||
            (cfg->resolv[0] && (r = resolv_write(dirfd, cfg->resolv, ret_resolv, err)) < 0)) {
                gv_net_down(dirfd);
                return r;
        }
        return 0;
}

void gv_net_down(int dirfd)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d/netns", dirfd);
        while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
                ;
}
