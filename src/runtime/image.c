/* SPDX-License-Identifier: MIT */
/* Images: <images>/<name>/rootfs plus <images>/<name>/image.json, written
 * last. A build happens in <images>/.build-<name>-<pid> and is renamed
 * into place, so a half-built image is never used; leftovers of dead
 * builds are removed by the next build. */
#include "runtime.h"
#include "image-internal.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>

#include "../common/names.h"
#include "../common/tool.h"
#include "recipe.h"

#define IMG_BUSYBOX "/bin/busybox"
#define IMG_LIST_MAX 65536

/* ---- small helpers ---- */

int img_mkdir_mode(int dfd, const char *name, mode_t mode)
{
        if (mkdirat(dfd, name, mode) < 0 && errno != EEXIST)
                return -errno;
        /* mkdir applies the umask; the image's modes must not depend on it. */
        return fchmodat(dfd, name, mode, 0) < 0 ? -errno : 0;
}

int img_write_file_at(int dfd, const char *name, const void *data, size_t len, mode_t mode)
{
        _cleanup_close_ int fd =
            openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        int r = write_all(fd, data, len);
        if (r < 0)
                return r;
        if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
                return -errno;
        return 0;
}

/* A static ELF has no PT_INTERP: it runs in a rootfs without a libc. */
static int elf_is_static(int fd)
{
        Elf64_Ehdr eh;
        if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, 4))
                return -ENOEXEC;
        if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
            eh.e_phnum > 512)
                return -ENOEXEC;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
                Elf64_Phdr ph;
                off_t off = (off_t)eh.e_phoff + (off_t)i * (off_t)sizeof(ph);
                if (pread(fd, &ph, sizeof(ph), off) != (ssize_t)sizeof(ph))
                        return -ENOEXEC;
                if (ph.p_type == PT_INTERP)
                        return 0;
        }
        return 1;
}

static int copy_file_at(const char *src, int dfd, const char *name, mode_t mode,
                        struct sbx_error *err)
{
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return sbx_error_set(err, errno, "open `%s`", src);
        struct stat st;
        if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
                return sbx_error_set(err, EINVAL, "`%s` is not a regular file", src);
        int r = elf_is_static(in);
        if (r <= 0)
                return sbx_error_set(err, r < 0 ? -r : ENOEXEC,
                                     "`%s` is not a static binary (install busybox-static)", src);
        _cleanup_close_ int out =
            openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (out < 0)
                return sbx_error_set(err, errno, "create %s", name);
        for (off_t off = 0; off < st.st_size;) {
                ssize_t n = sendfile(out, in, &off, (size_t)(st.st_size - off));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sbx_error_set(err, n < 0 ? errno : EIO, "copy `%s`", src);
        }
        if (fchmod(out, mode) < 0)
                return sbx_error_set(err, errno, "chmod %s", name);
        return 0;
}

/* ---- the images ---- */

static bool applet_name_ok(const char *s)
{
        if (!*s || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 64)
                return false;
        for (; *s; s++)
                if (*s == '/' || (unsigned char)*s <= ' ')
                        return false;
        return true;
}

static int tiny_applets(int bindir, struct sbx_error *err)
{
        const char *const argv[] = {IMG_BUSYBOX, "--list", NULL};
        struct buf out;
        buf_init(&out, IMG_LIST_MAX);
        struct tool_run t = {.argv = argv, .out = &out};
        int r = run_tool(&t, NULL, err);
        if (r >= 0)
                r = buf_terminate(&out);
        char *save = NULL;
        for (char *a = r >= 0 ? strtok_r(out.data, "\n", &save) : NULL; a;
             a = strtok_r(NULL, "\n", &save)) {
                if (!applet_name_ok(a) || !strcmp(a, "busybox"))
                        continue;
                if (symlinkat("/bin/busybox", bindir, a) < 0 && errno != EEXIST) {
                        r = sbx_error_set(err, errno, "create /bin/%s", a);
                        break;
                }
        }
        buf_free(&out);
        return r;
}

static int build_tiny(int rootfd, struct sbx_error *err)
{
        static const struct {
                const char *path;
                mode_t mode;
        } dirs[] = {
            {"bin", 0755},  {"etc", 0755},       {"proc", 0755}, {"sys", 0755}, {"dev", 0755},
            {"tmp", 01777}, {"workspace", 0755}, {"root", 0700}, {"usr", 0755}, {"usr/bin", 0755},
        };
        static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
                                     "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
        static const char group[] = "root:x:0:\nnobody:x:65534:\n";
        static const char hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost\n";
        int r;
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                if ((r = img_mkdir_mode(rootfd, dirs[i].path, dirs[i].mode)) < 0)
                        return sbx_error_set(err, -r, "create /%s", dirs[i].path);
        _cleanup_close_ int bindir = openat(rootfd, "bin", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (bindir < 0)
                return sbx_error_set(err, errno, "open bin/");
        if ((r = copy_file_at(IMG_BUSYBOX, bindir, "busybox", 0755, err)) < 0)
                return r;
        if ((r = tiny_applets(bindir, err)) < 0)
                return r;
        if (symlinkat("/bin/busybox", rootfd, "usr/bin/env") < 0)
                return sbx_error_set(err, errno, "create /usr/bin/env");
        if ((r = img_write_file_at(rootfd, "etc/passwd", passwd, sizeof(passwd) - 1, 0644)) < 0 ||
            (r = img_write_file_at(rootfd, "etc/group", group, sizeof(group) - 1, 0644)) < 0 ||
            (r = img_write_file_at(rootfd, "etc/hosts", hosts, sizeof(hosts) - 1, 0644)) < 0)
                return sbx_error_set(err, -r, "write /etc files");
        return 0;
}

static int build_debian(int builddir, const char *build_path, const char *suite,
                        const char *packages, struct sbx_error *err)
{
        char target[PATH_MAX], include[4096];
        if (snprintf(target, sizeof(target), "%s/rootfs", build_path) >= (int)sizeof(target))
                return sbx_error_set(err, ENAMETOOLONG, "image path too long");
        if (snprintf(include, sizeof(include), "--include=%s", packages ? packages : "") >=
            (int)sizeof(include))
                return sbx_error_say(err, E2BIG, "the package list is too long");
        /* "--" ends the options: a suite is never taken for one. */
        const char *const argv[] = {"mmdebstrap", "--variant=apt", include, "--",
                                    suite,        target,          NULL};
        /* Its progress (stdout) goes where ours does. */
        struct tool_run t = {.argv = argv, .out_to_stderr = true};
        int r = run_tool(&t, NULL, err);
        if (r < 0)
                return r;
        _cleanup_close_ int rootfd =
            openat(builddir, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfd < 0)
                return sbx_error_set(err, errno, "open the debian rootfs");
        if ((r = img_mkdir_mode(rootfd, "workspace", 0755)) < 0)
                return sbx_error_set(err, -r, "create /workspace");
        return 0;
}

/* Disk use of a tree (hard links shared out between their names), never
 * following symlinks or crossing mounts. */
static uint64_t tree_size(int dfd, dev_t dev, int depth)
{
        if (depth > 256)
                return 0;
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return 0;
        }
        uint64_t total = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                uint64_t bytes = (uint64_t)st.st_blocks * 512;
                total += S_ISDIR(st.st_mode) || st.st_nlink < 2 ? bytes : bytes / st.st_nlink;
                if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
                        int cfd = openat(dirfd(d), de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (cfd >= 0)
                                total += tree_size(cfd, dev, depth + 1);
                }
        }
        closedir(d);
        return total;
}

static int write_image_json(int builddir, const char *name, uint64_t size, struct sbx_error *err)
{
        char when[32];
        format_rfc3339(now_ms(), when);
        json_t *j = json_pack("{s:s, s:s, s:I, s:s}", "name", name, "builtAt", when, "size",
                              (json_int_t)size, "source", "bootstrap");
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text)
                return sbx_error_set(err, ENOMEM, "image.json");
        struct buf b;
        buf_init(&b, 0);
        int r = buf_printf(&b, "%s\n", text);
        free(text);
        if (r >= 0)
                r = img_write_file_at(builddir, IMG_JSON, b.data, b.len, 0644);
        buf_free(&b);
        return r < 0 ? sbx_error_set(err, -r, "write image.json") : 0;
}

/* The <name> and <pid> of a .build-<name>-<pid> / .old-<name>-<pid>
 * dir; false for anything else. */
static bool leftover_of(const char *dname, const char **ret_name, size_t *ret_len, long *ret_pid)
{
        const char *rest = NULL;
        if (!strncmp(dname, ".build-", 7))
                rest = dname + 7;
        else if (!strncmp(dname, ".old-", 5))
                rest = dname + 5;
        const char *dash = rest ? strrchr(rest, '-') : NULL;
        if (!dash || dash == rest)
                return false;
        char *end;
        long pid = strtol(dash + 1, &end, 10);
        if (*end || pid <= 0 || pid > INT32_MAX)
                return false;
        *ret_name = rest;
        *ret_len = (size_t)(dash - rest);
        *ret_pid = pid;
        return true;
}

void img_remove_leftovers(int imgfd, const char *name, bool ours)
{
        /* A dup() would share imgfd's position in the directory. */
        int fd = openat(imgfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *of;
                size_t len;
                long pid;
                if (!leftover_of(de->d_name, &of, &len, &pid))
                        continue;
                if (name && (strlen(name) != len || strncmp(of, name, len)))
                        continue;
                if (pid == getpid() ? !ours : (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
                        continue;
                rm_rf_at(dirfd(d), de->d_name);
        }
        closedir(d);
}

bool img_complete(int imgfd, const char *name)
{
        char p[256];
        struct stat st;
        return path_join(p, sizeof(p), name, IMG_JSON) == 0 &&
               fstatat(imgfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Move the new build into place; whatever was there before (complete or
 * not) is moved aside first and then removed. */
int img_install_build(int imgfd, const char *build, const char *name, struct sbx_error *err)
{
        char old[128];
        snprintf(old, sizeof(old), ".old-%s-%d", name, (int)getpid());
        bool had_old = renameat(imgfd, name, imgfd, old) == 0;
        if (!had_old && errno != ENOENT)
                return sbx_error_set(err, errno, "move the old image `%s` aside", name);
        if (renameat(imgfd, build, imgfd, name) < 0) {
                int e = errno;
                if (had_old)
                        renameat(imgfd, old, imgfd, name);
                return sbx_error_set(err, e, "install image `%s`", name);
        }
        if (had_old)
                rm_rf_at(imgfd, old);
        return 0;
}

/* The image's rootfs/, made in the build dir bfd. */
static int build_rootfs(int bfd, const char *build_path, bool tiny, const char *suite,
                        const char *packages, struct sbx_error *err)
{
        if (!tiny)
                return build_debian(bfd, build_path, suite, packages, err);
        int r = img_mkdir_mode(bfd, "rootfs", 0755);
        if (r < 0)
                return sbx_error_set(err, -r, "create rootfs/");
        _cleanup_close_ int rootfd =
            openat(bfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfd < 0)
                return sbx_error_set(err, errno, "open rootfs/");
        return build_tiny(rootfd, err);
}

/* Disk use of the built rootfs/; 0 when it cannot be measured. */
uint64_t img_rootfs_size(int bfd)
{
        struct stat st;
        int rfd = openat(bfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd < 0)
                return 0;
        if (fstat(rfd, &st) < 0) {
                close(rfd);
                return 0;
        }
        return tree_size(rfd, st.st_dev, 0); /* it closes rfd */
}

/* Build into <images>/.build-<name>-<pid>, then move it into place; on
 * failure the build dir goes. */
int img_build_dir(int imgfd, const char *name, char build[128], int *ret_fd, struct sbx_error *err)
{
        if (path_printf(build, 128, ".build-%s-%d", name, (int)getpid()) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "image name too long");
        if (mkdirat(imgfd, build, 0755) < 0)
                return sbx_error_set(err, errno, "create `%s`", build);
        int fd = openat(imgfd, build, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int r = sbx_error_set(err, errno, "open `%s`", build);
                rm_rf_at(imgfd, build);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

static int build_and_install(int imgfd, const char *images_dir, const char *name, bool tiny,
                             const char *suite, const char *packages, uint64_t *ret_size,
                             struct sbx_error *err)
{
        char build[128], build_path[PATH_MAX];
        _cleanup_close_ int bfd = -1;
        int r = img_build_dir(imgfd, name, build, &bfd, err);
        if (r < 0)
                return r;
        if (path_join(build_path, sizeof(build_path), images_dir, build) < 0)
                r = sbx_error_set(err, ENAMETOOLONG, "images dir path too long");
        else
                r = build_rootfs(bfd, build_path, tiny, suite, packages, err);
        if (r >= 0) {
                *ret_size = img_rootfs_size(bfd);
                r = write_image_json(bfd, name, *ret_size, err);
        }
        if (r >= 0 && renameat(imgfd, build, imgfd, name) < 0)
                r = sbx_error_set(err, errno, "install image `%s`", name);
        if (r < 0)
                rm_rf_at(imgfd, build);
        return r;
}

static int64_t parse_rfc3339_ms(const char *s)
{
        struct tm tm = {0};
        int ms = 0, used = 0;
        if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                         &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
                return 0;
        if (s[used] == '.')
                sscanf(s + used + 1, "%3d", &ms);
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        return t < 0 ? 0 : (int64_t)t * 1000 + ms;
}

static int read_info(int imgfd, const char *name, struct rt_image_info *info)
{
        char p[256];
        if (path_join(p, sizeof(p), name, IMG_JSON) < 0)
                return -ENAMETOOLONG;
        _cleanup_close_ int fd = openat(imgfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        _cleanup_free_ char *text = malloc(IMG_JSON_MAX);
        if (!text)
                return -ENOMEM;
        ssize_t n = read(fd, text, IMG_JSON_MAX);
        if (n <= 0 || n == (ssize_t)IMG_JSON_MAX)
                return -EINVAL;
        json_t *j = json_loadb(text, (size_t)n, 0, NULL);
        if (!j)
                return -EINVAL;
        const char *when = json_string_value(json_object_get(j, "builtAt"));
        json_int_t size = json_integer_value(json_object_get(j, "size"));
        memset(info, 0, sizeof(*info));
        snprintf(info->name, sizeof(info->name), "%.64s", name);
        info->built_at_ms = parse_rfc3339_ms(when);
        info->size_bytes = size > 0 ? (uint64_t)size : 0;
        /* Only the images sandboxd ships have a recipe that can age; an
         * imported or snapshotted one is what it is. */
        const char *recipe = json_string_value(json_object_get(j, "recipe"));
        const char *source = json_string_value(json_object_get(j, "source"));
        const char *builtin = recipe_builtin(name);
        char want[72] = "";
        if (builtin)
                recipe_text_id(builtin, strlen(builtin), want);
        info->stale =
            builtin && (!source || !strcmp(source, "built")) && (!recipe || strcmp(recipe, want));
        snprintf(info->source, sizeof(info->source), "%s", source ? source : "built");
        json_t *layers = json_object_get(j, "layers");
        info->layers = json_is_array(layers) ? (unsigned)json_array_size(layers) : 1;
        json_decref(j);
        return 0;
}

int rt_image_remove(const char *images_dir, const char *name, struct sbx_error *err)
{
        if (!images_dir || !name || !image_name_is_valid(name))
                return sbx_error_set(err, EINVAL, "bad image name");
        _cleanup_close_ int imgfd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (imgfd < 0)
                return sbx_error_set(err, errno, "open `%s`", images_dir);
        if (!img_complete(imgfd, name))
                return sbx_error_set(err, ENOENT, "there is no image '%s'", name);
        /* Under a leftover's name: a kill from here on leaves what the
         * next build, import or list removes. */
        char away[128];
        snprintf(away, sizeof(away), ".build-%s-%d", name, (int)getpid());
        if (renameat(imgfd, name, imgfd, away) < 0)
                return sbx_error_set(err, errno, "remove image '%s'", name);
        rm_rf_at(imgfd, away);
        return 0;
}

int rt_image_bootstrap(const char *images_dir, const char *name, bool busybox, const char *suite,
                       const char *packages, struct sbx_error *err)
{
        if (!busybox && (!suite || !*suite || suite[0] == '-'))
                return sbx_error_say(err, EINVAL, "@mmdebstrap needs a suite");
        _cleanup_close_ int imgfd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (imgfd < 0)
                return sbx_error_set(err, errno, "open `%s`", images_dir);
        img_remove_leftovers(imgfd, name, false);
        if (faccessat(imgfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return sbx_error_say(err, EEXIST, "there is an image '%s' already", name);
        uint64_t size = 0;
        return build_and_install(imgfd, images_dir, name, busybox, suite, packages, &size, err);
}

/* ---- an image's config ---- */

#define IMG_CONFIG_MAX_STRS 4096

static void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* An array of strings (absent or null: empty) into a NULL-terminated
 * vector; -EINVAL for anything else, a NUL inside a string included. */
static int strv_from_json(json_t *a, char ***ret, size_t *ret_n)
{
        size_t n = json_is_array(a) ? json_array_size(a) : 0;
        if ((a && !json_is_null(a) && !json_is_array(a)) || n > IMG_CONFIG_MAX_STRS)
                return -EINVAL;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(a, i);
                const char *s = json_string_value(e);
                if (!s || strlen(s) != json_string_length(e) || !(v[i] = strdup(s))) {
                        strv_free(v);
                        return s ? -ENOMEM : -EINVAL;
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static int str_from_json(json_t *v, char **ret)
{
        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        const char *s = json_string_value(v);
        if (!s || strlen(s) != json_string_length(v))
                return -EINVAL;
        if (!*s)
                return 0;
        return (*ret = strdup(s)) ? 0 : -ENOMEM;
}

void rt_image_config_free(struct rt_image_config *c)
{
        strv_free(c->env);
        strv_free(c->entrypoint);
        strv_free(c->cmd);
        free(c->workdir);
        free(c->user);
        memset(c, 0, sizeof(*c));
}

static int config_from_json(json_t *cfg, struct rt_image_config *c)
{
        int r;
        if (cfg && !json_is_null(cfg) && !json_is_object(cfg))
                return -EINVAL;
        if ((r = strv_from_json(json_object_get(cfg, "Env"), &c->env, &c->envc)) < 0 ||
            (r = strv_from_json(json_object_get(cfg, "Entrypoint"), &c->entrypoint,
                                &c->n_entrypoint)) < 0 ||
            (r = strv_from_json(json_object_get(cfg, "Cmd"), &c->cmd, &c->n_cmd)) < 0 ||
            (r = str_from_json(json_object_get(cfg, "WorkingDir"), &c->workdir)) < 0 ||
            (r = str_from_json(json_object_get(cfg, "User"), &c->user)) < 0)
                return r;
        for (size_t i = 0; i < c->envc; i++) {
                const char *eq = strchr(c->env[i], '=');
                if (!eq || eq == c->env[i])
                        return -EINVAL;
        }
        return 0;
}

int rt_image_config(const char *images_dir, const char *name, struct rt_image_config *ret,
                    struct sbx_error *err)
{
        char p[PATH_MAX];
        memset(ret, 0, sizeof(*ret));
        if (!image_name_is_valid(name) ||
            snprintf(p, sizeof(p), "%s/%s/" IMG_JSON, images_dir, name) >= (int)sizeof(p))
                return sbx_error_set(err, EINVAL, "bad image name");
        json_error_t jerr;
        json_t *j = json_load_file(p, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(j)) {
                json_decref(j);
                return sbx_error_set(err, EINVAL, "image '%s': unreadable image.json", name);
        }
        int r = config_from_json(json_object_get(j, "config"), ret);
        json_decref(j);
        if (r < 0) {
                rt_image_config_free(ret);
                return sbx_error_set(err, -r, "image '%s': a bad config in image.json", name);
        }
        return 0;
}

int rt_image_rootfs(const char *images_dir, const char *name, char *out, size_t out_len)
{
        if (!images_dir || !name || !image_name_is_valid(name))
                return -EINVAL;
        char p[PATH_MAX];
        struct stat st;
        if (snprintf(p, sizeof(p), "%s/%s/" IMG_JSON, images_dir, name) >= (int)sizeof(p))
                return -ENAMETOOLONG;
        if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode))
                return -ENOENT;
        int n = snprintf(out, out_len, "%s/%s/rootfs", images_dir, name);
        if (n < 0 || (size_t)n >= out_len)
                return -ENAMETOOLONG;
        if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode))
                return -ENOENT;
        return 0;
}

static int info_cmp(const void *a, const void *b)
{
        return strcmp(((const struct rt_image_info *)a)->name,
                      ((const struct rt_image_info *)b)->name);
}

int rt_image_list(const char *images_dir, struct rt_image_info **ret, size_t *ret_n,
                  struct sbx_error *err)
{
        _cleanup_close_ int imgfd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (imgfd < 0 && errno != ENOENT)
                return sbx_error_set(err, errno, "open `%s`", images_dir);
        /* What a killed build or import left is never listed, and goes. */
        if (imgfd >= 0)
                img_remove_leftovers(imgfd, NULL, false);
        struct rt_image_info *v = NULL;
        size_t n = 0, cap = 0;
        int dfd = imgfd >= 0 ? dup(imgfd) : -1;
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d && dfd >= 0)
                close(dfd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                struct rt_image_info info;
                if (de->d_name[0] == '.' || !image_name_is_valid(de->d_name) ||
                    !img_complete(imgfd, de->d_name) || read_info(imgfd, de->d_name, &info) < 0)
                        continue;
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 8;
                        struct rt_image_info *nv = realloc(v, ncap * sizeof(*v));
                        if (!nv) {
                                free(v);
                                closedir(d);
                                return sbx_error_set(err, ENOMEM, "list images");
                        }
                        v = nv;
                        cap = ncap;
                }
                v[n++] = info;
        }
        if (d)
                closedir(d);
        if (n > 1)
                qsort(v, n, sizeof(*v), info_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}
