/* SPDX-License-Identifier: MIT */
/* libsandboxd's parsing of what a server answers (lib/parse.c, lib/frame.c):
 * the first byte picks the mode, the rest is the server's bytes.
 *   0  a stream body, fed in pieces whose sizes the next byte picks
 *   1  a JSON answer, through every record parser
 *   2  an identity token's iss
 *   3  attach's credential headers */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/internal.h"

static volatile uint8_t touched;

static int on_data(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *p, size_t n)
{
        (void)ctx, (void)s, (void)offset;
        // Touch every byte delivered: ASan sees a read past what was given.
        for (size_t i = 0; i < n; i++)
                touched ^= ((const uint8_t *)p)[i];
        return 0;
}

static int on_json(void *ctx, int type, const char *p, size_t n)
{
        (void)ctx, (void)type;
        json_t *o = NULL;
        if (sbxc_parse_object(p, n, &o, NULL) == 0)
                json_decref(o);
        return 0;
}

static void frames(const uint8_t *d, size_t n)
{
        if (n < 1)
                return;
        size_t step = (size_t)d[0] % 32 + 1;
        struct sbxc_frames f;
        sbxc_frames_init(&f);
        struct sbxc_frame_sink sink = {on_data, on_json, NULL};
        struct sbx_err err;
        for (size_t at = 1; at < n;) {
                size_t k = MIN(step, n - at);
                if (sbxc_frames_feed(&f, d + at, k, &sink, &err) != 0)
                        break;
                at += k;
        }
        sbxc_frames_free(&f);
}

static void answers(const uint8_t *d, size_t n)
{
        json_t *o = NULL;
        if (sbxc_parse_object((const char *)d, n, &o, NULL) < 0)
                return;
        union {
                struct sbx_sandbox s;
                struct sbx_sandbox_list sl;
                struct sbx_image_list il;
                struct sbx_snapshot_info sn;
                struct sbx_exec_result x;
                struct sbx_process p;
                struct sbx_process_list pl;
                struct sbx_output out;
                struct sbx_dir dir;
        } u;
        struct sbx_err err;
        memset(&u, 0, sizeof(u));
        if (sbxc_parse_sandbox(o, &u, &err) == 0)
                sbx_sandbox_clear(&u.s);
        if (sbxc_parse_sandbox_list(o, &u, &err) == 0)
                sbx_sandbox_list_clear(&u.sl);
        if (sbxc_parse_images(o, &u, &err) == 0)
                sbx_image_list_clear(&u.il);
        if (sbxc_parse_snapshot(o, &u, &err) == 0)
                sbx_snapshot_info_clear(&u.sn);
        if (sbxc_parse_exec_result(o, &u, &err) == 0)
                sbx_exec_result_clear(&u.x);
        if (sbxc_parse_process(o, &u, &err) == 0)
                sbx_process_clear(&u.p);
        if (sbxc_parse_process_list(o, &u, &err) == 0)
                sbx_process_list_clear(&u.pl);
        if (sbxc_parse_output(o, &u, &err) == 0)
                sbx_output_clear(&u.out);
        if (sbxc_parse_dir(o, &u, &err) == 0)
                sbx_dir_clear(&u.dir);
        sbxc_parse_error(404, (const char *)d, n, &err);
        json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        const uint8_t *d = data + 1;
        size_t n = size - 1;
        if (data[0] == 0) {
                frames(d, n);
        } else if (data[0] == 1) {
                answers(d, n);
        } else {
                char *s = strndup((const char *)d, n);
                if (!s)
                        return 0;
                if (data[0] == 2) {
                        char *iss = NULL;
                        if (sbxc_token_issuer(s, &iss) == 0)
                                free(iss);
                } else {
                        json_t *o = NULL;
                        char **h = NULL;
                        if (sbxc_parse_object(s, strlen(s), &o, NULL) == 0 &&
                            sbxc_parse_headers(o, &h, NULL) == 0)
                                sbxc_strv_free(h);
                        json_decref(o);
                }
                free(s);
        }
        return 0;
}
