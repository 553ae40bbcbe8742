/* SPDX-License-Identifier: MIT */
/* POST {endpoint}/checkpoint and POST {endpoint}/fork: a sandbox saved
 * (processes, memory, files), and new sandboxes started from that save
 * (manager.h: mgr_checkpoint, mgr_fork). */
#include <jansson.h>
#include <string.h>

#include "../common/log.h"
#include "api-internal.h"
#include "control.h"
#include "dataplane.h"
#include "errors.h"

/* The optional JSON object body; NULL with resp set when it is not one
 * (an empty body is {}). */
static json_t *object_body(struct api_req *req, struct api_resp *resp)
{
        if (req->body.len == 0)
                return json_object();
        json_error_t jerr;
        json_t *j = json_loadb(req->body.data, req->body.len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(j)) {
                json_decref(j);
                api_error(resp, 400, "invalid_argument", "body: expected a JSON object");
                return NULL;
        }
        return j;
}

static void failed(struct api_call *c, int r, const struct sbx_error *err, struct api_resp *resp)
{
        if (r == -EHOSTDOWN)
                log_error("checkpoint %s: %s", c->name, err->msg);
        api_error_errno(resp, mgr_sandbox_gone(c->sb) ? API_ERR_GONE : API_ERR_CKPT, r, err);
}

void dataplane_checkpoint(struct api_call *c, struct api_resp *resp)
{
        json_t *body = object_body(c->req, resp);
        if (!body)
                return;
        json_t *k = json_object_get(body, "keepRunning");
        bool keep = true;
        if (k && !json_is_null(k)) {
                if (!json_is_boolean(k)) {
                        api_error(resp, 400, "invalid_argument", "keepRunning: expected a boolean");
                        json_decref(body);
                        return;
                }
                keep = json_is_true(k);
        }
        json_decref(body);
        struct mgr_checkpoint_info info;
        struct sbx_error err = {0};
        int r = mgr_checkpoint(c->a->mgr, c->sb, keep, &info, &err);
        if (r < 0) {
                failed(c, r, &err, resp);
                return;
        }
        char at[32];
        format_rfc3339(info.created_at, at);
        api_json(resp, 200,
                 json_pack("{s:I,s:I,s:s,s:b}", "sizeBytes", (json_int_t)info.size_bytes,
                           "durationMs", (json_int_t)info.duration_ms, "createdAt", at, "running",
                           keep));
}

void dataplane_fork(struct api_call *c, struct api_resp *resp)
{
        json_t *body = object_body(c->req, resp);
        if (!body)
                return;
        json_t *n = json_object_get(body, "name");
        if (!json_is_string(n)) {
                api_error(resp, 400, "invalid_argument", "name: expected the new sandbox's name");
                json_decref(body);
                return;
        }
        struct mgr_record rec;
        uint64_t id = 0;
        struct sbx_error err = {0};
        /* Its name outlives the body. */
        char name[SBX_NAME_MAX + 1];
        int r = 0;
        if (json_string_length(n) != strlen(json_string_value(n)) ||
            snprintf(name, sizeof(name), "%s", json_string_value(n)) >= (int)sizeof(name))
                r = sbx_error_say(&err, EINVAL, "name: not a valid sandbox name");
        json_decref(body);
        if (r == 0)
                r = mgr_fork(c->a->mgr, c->sb, name, &id, &rec, &err);
        if (r < 0) {
                failed(c, r, &err, resp);
                return;
        }
        control_handle_answer(c, mgr_sandbox_deployment(c->sb), name, &rec, id, resp);
}

/* POST {endpoint}/snapshot {"image": NAME}: the sandbox's files as a new
 * image, which sandboxes can then be made from (attach's `image`). */
void dataplane_snapshot(struct api_call *c, struct api_resp *resp)
{
        json_t *body = object_body(c->req, resp);
        if (!body)
                return;
        const char *image = json_string_value(json_object_get(body, "image"));
        if (!image || strlen(image) != json_string_length(json_object_get(body, "image"))) {
                api_error(resp, 400, "invalid_argument", "image: expected an image name");
                json_decref(body);
                return;
        }
        struct mgr_snapshot_info info;
        struct sbx_error err = {0};
        int r = mgr_snapshot(c->a->mgr, c->sb, image, &info, &err);
        if (r < 0) {
                json_decref(body);
                failed(c, r, &err, resp);
                return;
        }
        char at[32];
        format_rfc3339(info.created_at, at);
        api_json(resp, 200,
                 json_pack("{s:s,s:I,s:I,s:I,s:I,s:s}", "image", image, "sizeBytes",
                           (json_int_t)info.size_bytes, "copiedBytes",
                           (json_int_t)info.copied_bytes, "linkedFiles",
                           (json_int_t)info.linked_files, "durationMs",
                           (json_int_t)info.duration_ms, "createdAt", at));
        json_decref(body);
}
