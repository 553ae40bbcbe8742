/* SPDX-License-Identifier: MIT */
/* Unit tests of the OCI import's layer code (src/runtime/oci-layer.c,
 * oci-path.c): path cleaning, and whiteouts and opaque dirs applied to a
 * temporary tree by layers written here with libarchive. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "src/runtime/oci.h"

static void test_clean_path(void **state)
{
        static const char *const ok[][2] = {
            {"a", "a"},       {"./a//b/", "a/b"}, {".", ""},          {"./", ""},
            {"a/./b", "a/b"}, {"a..b", "a..b"},   {".wh.x", ".wh.x"}, {"...", "..."},
        };
        static const char *const bad[] = {"/a", "..", "../a", "a/..", "a/../b", "//a"};
        char out[64];
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                assert_int_equal(oci_clean_path(ok[i][0], out, sizeof(out)), 0);
                assert_string_equal(out, ok[i][1]);
        }
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(oci_clean_path(bad[i], out, sizeof(out)), -EINVAL);
        assert_int_equal(oci_clean_path("abcdef", out, 4), -ENAMETOOLONG);
}

struct ent {
        const char *path;
        mode_t type;
        const char *data; /* a file's, or a symlink's target */
};

/* A tar of the entries in a temporary file; its fd. */
static int layer(const struct ent *e, size_t n)
{
        char path[] = "/tmp/test-oci-layer-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        unlink(path);
        struct archive *a = archive_write_new();
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
        for (size_t i = 0; i < n; i++) {
                struct archive_entry *ae = archive_entry_new();
                archive_entry_set_pathname(ae, e[i].path);
                archive_entry_set_filetype(ae, e[i].type);
                archive_entry_set_perm(ae, e[i].type == AE_IFDIR ? 0755 : 0644);
                size_t len = e[i].type == AE_IFREG && e[i].data ? strlen(e[i].data) : 0;
                if (e[i].type == AE_IFLNK)
                        archive_entry_set_symlink(ae, e[i].data);
                archive_entry_set_size(ae, (la_int64_t)len);
                assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
                if (len)
                        assert_int_equal(archive_write_data(a, e[i].data, len), (la_ssize_t)len);
                archive_entry_free(ae);
        }
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
        return fd;
}

static int apply(int rootfd, const struct ent *e, size_t n, struct sbx_error *err)
{
        uint64_t budget = 1 << 20;
        struct oci_apply_opts o = {.mode = OCI_APPLY_MERGE, .budget = &budget};
        struct oci_apply_result res;
        _cleanup_close_ int fd = layer(e, n);
        return oci_tar_apply(rootfd, fd, &o, &res, err);
}

static bool exists(int rootfd, const char *p)
{
        struct stat st;
        return fstatat(rootfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void test_whiteouts(void **state)
{
        char dir[] = "/tmp/test-oci-XXXXXX";
        assert_non_null(mkdtemp(dir));
        _cleanup_close_ int rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct sbx_error err = {0};
        static const struct ent l1[] = {
            {"a", AE_IFDIR, NULL},         {"a/gone", AE_IFREG, "x"},  {"a/kept", AE_IFREG, "k"},
            {"o", AE_IFDIR, NULL},         {"o/lower", AE_IFREG, "l"}, {"o/sub", AE_IFDIR, NULL},
            {"o/sub/deep", AE_IFREG, "d"}, {"d", AE_IFDIR, NULL},      {"d/tree/f", AE_IFREG, "t"},
            {"ln", AE_IFLNK, "a"},
        };
        /* The same layer's entries stay, whatever their order around the
         * whiteout: whiteouts hide only what lower layers made. */
        static const struct ent l2[] = {
            {"o/upper1", AE_IFREG, "u"},    {"o/.wh..wh..opq", AE_IFREG, NULL},
            {"o/upper2", AE_IFREG, "u"},    {"a/.wh.gone", AE_IFREG, NULL},
            {"d/.wh.tree", AE_IFREG, NULL}, {"new", AE_IFREG, "n"},
            {".wh.new", AE_IFREG, NULL},    {"ln/via-link", AE_IFREG, "v"},
        };
        assert_int_equal(apply(rootfd, l1, ARRAY_SIZE(l1), &err), 0);
        assert_int_equal(apply(rootfd, l2, ARRAY_SIZE(l2), &err), 0);
        assert_false(exists(rootfd, "a/gone"));
        assert_true(exists(rootfd, "a/kept"));
        assert_false(exists(rootfd, "a/.wh.gone"));
        assert_false(exists(rootfd, "o/lower"));
        assert_false(exists(rootfd, "o/sub"));
        assert_true(exists(rootfd, "o/upper1"));
        assert_true(exists(rootfd, "o/upper2"));
        assert_false(exists(rootfd, "o/.wh..wh..opq"));
        assert_false(exists(rootfd, "d/tree"));
        assert_true(exists(rootfd, "new"));
        assert_true(exists(rootfd, "a/via-link")); /* ln -> a, inside the tree */
        /* A later layer's whiteout of a file, then a dir in its place. */
        static const struct ent l3[] = {{".wh.new", AE_IFREG, NULL}, {"new", AE_IFDIR, NULL}};
        assert_int_equal(apply(rootfd, l3, ARRAY_SIZE(l3), &err), 0);
        struct stat st;
        assert_int_equal(fstatat(rootfd, "new", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(st.st_mode));
        static const struct ent evil[] = {{"up", AE_IFLNK, "/"}, {"up/etc/x", AE_IFREG, "x"}};
        assert_int_equal(apply(rootfd, evil, ARRAY_SIZE(evil), &err), -EPERM);
        assert_non_null(strstr(err.msg, "`up/etc/x`"));
        rm_rf_at(AT_FDCWD, dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_clean_path),
            cmocka_unit_test(test_whiteouts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
