/* SPDX-License-Identifier: MIT */
/* Host-wide ranges of a daemon instance: its host uids and its NAT range.
 *
 * Several daemons may run on one host (each with its own state dir: the
 * test suite does that). Each claims its ranges in a registry, one file per
 * instance, <registry>/<instance-id>, holding "state DIR", "uids BASE
 * COUNT" and "net CIDR" lines. The live daemon holds an exclusive flock on
 * its file for as long as it runs, so a claim whose lock can be taken is a
 * dead daemon's. The registry's own lock file (.lock) serializes start-ups.
 *
 *  - A range named explicitly (uid_base, net_range) that overlaps a live
 *    instance's is refused.
 *  - "auto" takes what this state dir used last (<state>/ranges), else the
 *    first free block: uids from 2^30 in blocks of uid_count, /30s from
 *    10.200.0.0/14 in blocks of net_slots. A free block overlaps no claim
 *    at all, live or dead (a dead daemon's sandboxes may still run), and no
 *    network the host has a route to. A dead claim whose state dir is gone
 *    is removed: nothing can ever adopt it.
 *  - A restarted daemon (same state dir, same instance id) finds its own
 *    file unlocked and takes it again: it adopts its ranges. Two daemons on
 *    one state dir are refused.
 *  - Veth names carry the first 6 hex digits of the instance id; two live
 *    instances whose ids share them are refused (a 1 in 2^24 chance). */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "net.h"
#include "runtime.h"

#define CLAIMS_MAX 256
#define AUTO_UID_FIRST (1u << 30)
#define AUTO_UID_END 0xffff0000u /* uid (uid_t)-1 and its range stay out */
#define AUTO_NET "10.200.0.0/14"

struct range {
        uint64_t lo, hi; /* [lo, hi) */
};

/* The longest registry entry write_entry makes, and so its longest line. */
#define ENTRY_MAX 512

struct other {
        char instance[RT_INSTANCE_LEN + 1];
        char state[ENTRY_MAX];  /* "" when unknown: such a claim is never removed */
        struct range uids, net; /* net.hi == 0: none */
        bool live;
};

static bool overlap(struct range a, struct range b)
{
        return a.hi && b.hi && a.lo < b.hi && b.lo < a.hi;
}

static struct range cidr_range(uint32_t base, unsigned prefix)
{
        return (struct range){base, (uint64_t)base + (1ULL << (32 - prefix))};
}

static int parse_entry(const char *text, struct other *o)
{
        char line[ENTRY_MAX];
        const char *p = text;
        while (*p) {
                size_t n = strcspn(p, "\n");
                snprintf(line, sizeof(line), "%.*s", (int)MIN(n, sizeof(line) - 1), p);
                p += n + (p[n] == '\n');
                uint64_t b, c;
                char cidr[32];
                uint32_t nb;
                unsigned np;
                /* A state dir cut short could name another one: none then. */
                if (!strncmp(line, "state ", 6))
                        path_printf(o->state, sizeof(o->state), "%s", line + 6);
                else if (sscanf(line, "uids %" SCNu64 " %" SCNu64, &b, &c) == 2)
                        o->uids = (struct range){b, b + c};
                else if (sscanf(line, "net %31s", cidr) == 1 && net_parse_cidr(cidr, &nb, &np) == 0)
                        o->net = cidr_range(nb, np);
        }
        return o->uids.hi ? 0 : -EINVAL;
}

/* Every other instance's claim; dead ones whose state dir is gone removed. */
static int scan(int dirfd, const char *self, struct other *out, size_t *ret_n)
{
        int dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                int e = errno;
                if (dfd >= 0)
                        close(dfd);
                return -e;
        }
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < CLAIMS_MAX) {
                if (strlen(de->d_name) != RT_INSTANCE_LEN || !strcmp(de->d_name, self))
                        continue;
                struct other *o = &out[n];
                memset(o, 0, sizeof(*o));
                char text[1024];
                _cleanup_close_ int fd =
                    openat(dirfd, de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 || read_small_at(dirfd, de->d_name, text, sizeof(text)) < 0 ||
                    parse_entry(text, o) < 0)
                        continue;
                memcpy(o->instance, de->d_name, RT_INSTANCE_LEN + 1); /* its length checked */
                o->live = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
                struct stat st;
                if (!o->live && o->state[0] == '/' && stat(o->state, &st) < 0 && errno == ENOENT) {
                        unlinkat(dirfd, de->d_name, 0);
                        continue;
                }
                n++;
        }
        closedir(d);
        *ret_n = n;
        return 0;
}

/* The first other claim (live ones only, unless `any`) that r overlaps. */
static const struct other *clash(const struct other *o, size_t n, struct range r, bool net,
                                 bool any)
{
        for (size_t i = 0; i < n; i++)
                if ((any || o[i].live) && overlap(r, net ? o[i].net : o[i].uids))
                        return &o[i];
        return NULL;
}

/* Whether the host routes anything (but a default route) into r: a LAN,
 * another runtime's bridge, a sandboxd that predates the registry. */
static bool host_routes_into(struct range r)
{
        FILE *f = fopen("/proc/net/route", "re");
        char line[256];
        bool hit = false;
        while (f && !hit && fgets(line, sizeof(line), f)) {
                unsigned dst, mask;
                if (sscanf(line, "%*s %x %*x %*x %*s %*s %*s %x", &dst, &mask) != 2 || !mask)
                        continue;
                uint32_t d = ntohl(dst), m = ntohl(mask);
                hit = overlap(r, (struct range){d & m, (uint64_t)(d & m) + (~m + 1ULL)});
        }
        if (f)
                fclose(f);
        return hit;
}

static int pick_uids(const struct rt_claim_want *w, int64_t persisted, const struct other *o,
                     size_t n, struct rt_claim *c, struct sbx_error *err)
{
        int64_t base = w->uid_base >= 0 ? w->uid_base : persisted;
        if (base >= 0) {
                struct range r = {(uint64_t)base, (uint64_t)base + w->uid_count};
                if (r.lo < 65536 || r.hi > AUTO_UID_END)
                        return sbx_error_set(err, EINVAL,
                                             "uid range %" PRIu64 "+%" PRIu32
                                             " (uid_base + max_sandboxes x 65536) is out of "
                                             "range",
                                             r.lo, w->uid_count);
                const struct other *x = clash(o, n, r, false, false);
                if (x)
                        return sbx_error_set(err, EADDRINUSE,
                                             "uid range %" PRIu64 "-%" PRIu64
                                             " is in use by another sandboxd (state %s, uids "
                                             "%" PRIu64 "-%" PRIu64 ")",
                                             r.lo, r.hi - 1, x->state, x->uids.lo, x->uids.hi - 1);
                c->uid_base = (uint32_t)r.lo;
                return 0;
        }
        for (uint64_t b = AUTO_UID_FIRST; b + w->uid_count <= AUTO_UID_END; b += w->uid_count)
                if (!clash(o, n, (struct range){b, b + w->uid_count}, false, true)) {
                        c->uid_base = (uint32_t)b;
                        return 0;
                }
        return sbx_error_set(err, EADDRNOTAVAIL,
                             "no free uid range of %" PRIu32 " ids left for uid_base auto",
                             w->uid_count);
}

static int pick_net(const struct rt_claim_want *w, const char *persisted, const struct other *o,
                    size_t n, struct rt_claim *c, struct sbx_error *err)
{
        const char *want = strcmp(w->net_range, "auto") ? w->net_range
                           : persisted[0]               ? persisted
                                                        : NULL;
        uint32_t base;
        unsigned prefix;
        if (want) {
                if (net_parse_cidr(want, &base, &prefix) < 0)
                        return sbx_error_set(err, EINVAL,
                                             "net_range `%s`: want an IPv4 network a.b.c.d/8..30",
                                             want);
                const struct other *x = clash(o, n, cidr_range(base, prefix), true, false);
                if (x)
                        return sbx_error_set(
                            err, EADDRINUSE,
                            "net_range %s is in use by another sandboxd (state %s)", want,
                            x->state);
                snprintf(c->net_range, sizeof(c->net_range), "%s", want);
                return 0;
        }
        /* The smallest block with net_slots /30s. */
        unsigned bits = 2;
        while (bits < 24 && (1ULL << (bits - 2)) < w->net_slots)
                bits++;
        uint32_t space;
        unsigned space_len;
        net_parse_cidr(AUTO_NET, &space, &space_len);
        uint64_t end = (uint64_t)space + (1ULL << (32 - space_len));
        for (uint64_t b = space; b + (1ULL << bits) <= end; b += 1ULL << bits) {
                struct range r = {b, b + (1ULL << bits)};
                if (clash(o, n, r, true, true) || host_routes_into(r))
                        continue;
                struct in_addr a = {.s_addr = htonl((uint32_t)b)};
                char ip[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &a, ip, sizeof(ip));
                snprintf(c->net_range, sizeof(c->net_range), "%s/%u", ip, 32 - bits);
                return 0;
        }
        return sbx_error_set(err, EADDRNOTAVAIL,
                             "no free block of " AUTO_NET " left for net_range auto");
}

/* <state>/ranges: "uid_base N" and "net_range CIDR" lines. */
static void read_persisted(const char *state, int64_t *ret_uid, char *net, size_t len)
{
        char path[4096], text[256];
        *ret_uid = -1;
        net[0] = '\0';
        if (path_join(path, sizeof(path), state, "ranges") < 0 ||
            read_small_at(AT_FDCWD, path, text, sizeof(text)) < 0)
                return;
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                long long v;
                char cidr[32];
                if (sscanf(l, "uid_base %lld", &v) == 1 && v >= 65536 && v <= UINT32_MAX)
                        *ret_uid = v;
                else if (sscanf(l, "net_range %31s", cidr) == 1)
                        snprintf(net, len, "%s", cidr);
        }
}

static int write_persisted(const char *state, const struct rt_claim *c, const char *old_net)
{
        char path[4096], tmp[4100], text[128];
        if (path_join(path, sizeof(path), state, "ranges") < 0 ||
            path_printf(tmp, sizeof(tmp), "%s.tmp", path) < 0)
                return -ENAMETOOLONG;
        const char *net = c->net_range[0] ? c->net_range : old_net;
        int len = snprintf(text, sizeof(text), "uid_base %" PRIu32 "\n%s%s%s", c->uid_base,
                           net[0] ? "net_range " : "", net, net[0] ? "\n" : "");
        _cleanup_close_ int fd =
            open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        int r = write_all(fd, text, (size_t)len);
        if (r < 0 || fsync(fd) < 0 || rename(tmp, path) < 0)
                return r < 0 ? r : -errno;
        return 0;
}

static int write_entry(int fd, const struct rt_claim_want *w, const struct rt_claim *c)
{
        char text[ENTRY_MAX];
        int len = snprintf(text, sizeof(text), "state %s\nuids %" PRIu32 " %" PRIu32 "\n%s%s%s",
                           w->state_dir, c->uid_base, c->uid_count, c->net_range[0] ? "net " : "",
                           c->net_range, c->net_range[0] ? "\n" : "");
        if (len < 0 || (size_t)len >= sizeof(text))
                return -ENAMETOOLONG;
        if (ftruncate(fd, 0) < 0)
                return -errno;
        if (pwrite(fd, text, (size_t)len, 0) != len)
                return -EIO;
        return 0;
}

static int claim_locked(int dirfd, const struct rt_claim_want *w, struct rt_claim *c,
                        struct sbx_error *err)
{
        c->fd = openat(dirfd, w->instance, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (c->fd < 0)
                return sbx_error_set(err, errno, "open the registry entry of %s", w->instance);
        if (flock(c->fd, LOCK_EX | LOCK_NB) < 0)
                return sbx_error_set(err, errno == EWOULDBLOCK ? EBUSY : errno,
                                     "another sandboxd already runs with state dir %s",
                                     w->state_dir);
        _cleanup_free_ struct other *o = calloc(CLAIMS_MAX, sizeof(*o));
        size_t n = 0;
        if (!o)
                return sbx_error_set(err, ENOMEM, "registry");
        int r = scan(dirfd, w->instance, o, &n);
        if (r < 0)
                return sbx_error_set(err, -r, "read the sandboxd registry");
        for (size_t i = 0; i < n; i++)
                if (o[i].live && !strncmp(o[i].instance, w->instance, RT_TAG_LEN))
                        return sbx_error_set(err, EEXIST,
                                             "instance id %s shares its first %d digits with the "
                                             "running sandboxd of %s",
                                             w->instance, RT_TAG_LEN, o[i].state);
        int64_t old_uid;
        char old_net[32];
        read_persisted(w->state_dir, &old_uid, old_net, sizeof(old_net));
        c->uid_count = w->uid_count;
        if ((r = pick_uids(w, old_uid, o, n, c, err)) < 0)
                return r;
        if (w->net_range && (r = pick_net(w, old_net, o, n, c, err)) < 0)
                return r;
        if ((r = write_entry(c->fd, w, c)) < 0)
                return sbx_error_set(err, -r, "write the registry entry of %s", w->instance);
        if ((r = write_persisted(w->state_dir, c, old_net)) < 0)
                return sbx_error_set(err, -r, "write %s/ranges", w->state_dir);
        return 0;
}

int rt_claim_take(const struct rt_claim_want *w, struct rt_claim *ret, struct sbx_error *err)
{
        memset(ret, 0, sizeof(*ret));
        ret->fd = -1;
        const char *reg = w->registry ? w->registry : RT_REGISTRY;
        if (!w->instance || strlen(w->instance) != RT_INSTANCE_LEN || !w->uid_count)
                return sbx_error_set(err, EINVAL, "rt_claim_take: bad instance or uid count");
        snprintf(ret->instance, sizeof(ret->instance), "%s", w->instance);
        /* Kept to remove the entry at the end: never a path cut short. */
        if (path_printf(ret->registry, sizeof(ret->registry), "%s", reg) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "registry path `%s`", reg);
        int r = mkdir_p(reg, 0755);
        if (r < 0)
                return sbx_error_set(err, -r, "create %s", reg);
        _cleanup_close_ int dirfd = open(reg, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dirfd < 0)
                return sbx_error_set(err, errno, "open %s", reg);
        _cleanup_close_ int lock =
            openat(dirfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (lock < 0 || flock(lock, LOCK_EX) < 0)
                return sbx_error_set(err, errno, "lock %s/.lock", reg);
        r = claim_locked(dirfd, w, ret, err);
        if (r < 0) {
                /* Someone else's entry stays; ours goes unless it was live. */
                if (r != -EBUSY && ret->fd >= 0) {
                        char text[1024];
                        if (read_small_at(dirfd, w->instance, text, sizeof(text)) >= 0 && !text[0])
                                unlinkat(dirfd, w->instance, 0);
                }
                close_fd(&ret->fd);
                ret->registry[0] = '\0';
                return r;
        }
        return 0;
}

void rt_claim_release(struct rt_claim *c, bool drop)
{
        if (c->fd < 0)
                return;
        if (drop) {
                char path[sizeof(c->registry) + RT_INSTANCE_LEN + 2];
                if (path_join(path, sizeof(path), c->registry, c->instance) == 0)
                        unlink(path);
        }
        close(c->fd);
        c->fd = -1;
}
