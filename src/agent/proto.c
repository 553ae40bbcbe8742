/* SPDX-License-Identifier: MIT */
/* The agent protocol framing (see proto.h). Both ends use it, so every
 * decoder here treats its input as hostile: lengths are checked before any
 * read, sizes are capped, nothing is trusted to be NUL terminated. */
#include "proto.h"

#include <string.h>
#include <sys/socket.h>

#define FIELD_HEADER_SIZE 6

static void put_le16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_le16(const uint8_t *p)
{
        return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

void agent_msg_init(struct agent_msg *m, uint16_t type)
{
        m->type = type;
        buf_init(&m->payload, AGENT_MAX_PAYLOAD);
}

void agent_msg_free(struct agent_msg *m)
{
        buf_free(&m->payload);
}

int agent_put_bytes(struct agent_msg *m, uint16_t tag, const void *data, size_t len)
{
        uint8_t head[FIELD_HEADER_SIZE];

        if (!data && len)
                return -EINVAL;
        if (len > AGENT_MAX_PAYLOAD || m->payload.len + FIELD_HEADER_SIZE + len > AGENT_MAX_PAYLOAD)
                return -E2BIG;
        put_le16(head, tag);
        put_le32(head + 2, (uint32_t)len);
        int r = buf_append(&m->payload, head, sizeof(head));
        if (r < 0)
                return r;
        r = buf_append(&m->payload, data, len);
        if (r < 0) {
                m->payload.len -= sizeof(head); /* keep the payload well formed */
                return r;
        }
        return 0;
}

int agent_put_str(struct agent_msg *m, uint16_t tag, const char *s)
{
        if (!s)
                return -EINVAL;
        return agent_put_bytes(m, tag, s, strlen(s));
}

int agent_put_u64(struct agent_msg *m, uint16_t tag, uint64_t v)
{
        uint8_t b[8];
        put_le64(b, v);
        return agent_put_bytes(m, tag, b, sizeof(b));
}

int agent_put_bool(struct agent_msg *m, uint16_t tag, bool v)
{
        uint8_t b = v ? 1 : 0;
        return agent_put_bytes(m, tag, &b, 1);
}

void agent_header_encode(const struct agent_msg *m, uint8_t out[AGENT_HEADER_SIZE])
{
        put_le32(out, (uint32_t)m->payload.len);
        put_le16(out + 4, m->type);
        put_le16(out + 6, 0);
        put_le32(out + 8, 0);
}

/* send(MSG_NOSIGNAL) so that a peer that went away yields EPIPE rather than
 * a process-killing SIGPIPE; plain write() for what is not a socket. */
static int send_all(int fd, const void *data, size_t len)
{
        const uint8_t *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == ENOTSOCK)
                        return write_all(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int agent_msg_send(int fd, const struct agent_msg *m)
{
        uint8_t head[AGENT_HEADER_SIZE];

        if (m->payload.len > AGENT_MAX_PAYLOAD)
                return -E2BIG;
        agent_header_encode(m, head);
        int r = send_all(fd, head, sizeof(head));
        if (r < 0)
                return r;
        if (m->payload.len == 0)
                return 0;
        return send_all(fd, m->payload.data, m->payload.len);
}

int agent_header_decode(const uint8_t in[AGENT_HEADER_SIZE], uint16_t *ret_type, uint32_t *ret_len)
{
        uint32_t len = get_le32(in);
        uint16_t type = get_le16(in + 4);

        if (get_le16(in + 6) != 0 || get_le32(in + 8) != 0 || len > AGENT_MAX_PAYLOAD)
                return -EPROTO;
        if (ret_type)
                *ret_type = type;
        if (ret_len)
                *ret_len = len;
        return 0;
}

int agent_msg_recv(int fd, uint16_t *ret_type, uint8_t **ret_payload, uint32_t *ret_len)
{
        uint8_t head[AGENT_HEADER_SIZE];
        uint16_t type;
        uint32_t len;

        int r = read_all(fd, head, sizeof(head));
        if (r < 0)
                return r;
        r = agent_header_decode(head, &type, &len);
        if (r < 0)
                return r;
        _cleanup_free_ uint8_t *payload = malloc(len ? len : 1);
        if (!payload)
                return -ENOMEM;
        if (len) {
                r = read_all(fd, payload, len);
                if (r < 0)
                        return r;
        }
        *ret_type = type;
        *ret_len = len;
        *ret_payload = TAKE_PTR(payload);
        return 0;
}

int agent_next_field(const uint8_t *payload, uint32_t len, uint32_t *pos, struct agent_field *f)
{
        uint32_t p = *pos;

        if (p >= len)
                return p == len ? 0 : -EPROTO;
        if (!payload || len - p < FIELD_HEADER_SIZE)
                return -EPROTO;
        uint16_t tag = get_le16(payload + p);
        uint32_t flen = get_le32(payload + p + 2);
        p += FIELD_HEADER_SIZE;
        if (flen > len - p)
                return -EPROTO;
        f->tag = tag;
        f->len = flen;
        f->data = payload + p;
        *pos = p + flen;
        return 1;
}

int agent_field_u64(const struct agent_field *f, uint64_t *ret)
{
        if (f->len != 8)
                return -EPROTO;
        *ret = get_le64(f->data);
        return 0;
}

int agent_field_bool(const struct agent_field *f, bool *ret)
{
        if (f->len != 1 || f->data[0] > 1)
                return -EPROTO;
        *ret = f->data[0] == 1;
        return 0;
}

int agent_field_str(const struct agent_field *f, char **ret)
{
        if (f->len && memchr(f->data, '\0', f->len))
                return -EPROTO;
        char *s = malloc((size_t)f->len + 1);
        if (!s)
                return -ENOMEM;
        if (f->len)
                memcpy(s, f->data, f->len);
        s[f->len] = '\0';
        *ret = s;
        return 0;
}

int agent_walk(const uint8_t *payload, uint32_t len, agent_field_fn fn, void *ctx)
{
        struct agent_field f;
        uint32_t pos = 0;
        unsigned count = 0;
        int r;

        while ((r = agent_next_field(payload, len, &pos, &f)) > 0) {
                if (++count > AGENT_MAX_FIELDS)
                        return -EPROTO;
                if ((r = fn(ctx, &f)) != 0)
                        return r;
        }
        return r;
}

struct find_ctx {
        uint16_t tag;
        struct agent_field *ret;
};

static int find_fn(void *ctx, const struct agent_field *f)
{
        struct find_ctx *c = ctx;
        if (f->tag != c->tag)
                return 0;
        *c->ret = *f;
        return 1;
}

int agent_find(const uint8_t *payload, uint32_t len, uint16_t tag, struct agent_field *ret)
{
        struct find_ctx c = {tag, ret};
        return agent_walk(payload, len, find_fn, &c);
}
