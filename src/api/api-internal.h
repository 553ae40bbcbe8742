/* SPDX-License-Identifier: MIT */
/* The API's own view of itself: struct api and one request's state, for
 * the files of src/api only. Everyone else holds an opaque struct api
 * (api.h). */
#pragma once

#include <microhttpd.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/util.h"
#include "../manager/manager.h"
#include "api.h"
#include "conns.h"
#include "errors.h"
#include "hold.h"
#include "keys.h"
#include "ratelimit.h"
#include "respond.h"
#include "routes.h"
#include "workers.h"

struct api_metrics {
        atomic_ullong requests;
        atomic_ullong responses_by_class[6]; /* 1xx..5xx */
        atomic_ullong execs;
        atomic_ullong exec_ms_total;
        atomic_ullong bytes_in, bytes_out;
        atomic_ullong rate_limited; /* requests refused with 429 */
        atomic_ullong port_opened, port_unreachable, port_failed, port_upgraded; /* ports.c */
};

struct api {
        struct api_config cfg;
        struct manager *mgr;
        struct keyring *keys; /* guarded by keys_lock; swapped on SIGHUP */
        pthread_mutex_t keys_lock;
        struct ratelimit *ratelimit; /* NULL when rate_limit is 0 */
        struct MHD_Daemon *mhd;
        struct api_metrics metrics;
        atomic_bool draining;       /* shutting down: answer 503 */
        atomic_bool stopping;       /* past the drain: suspend nothing more */
        atomic_int inflight;        /* requests between headers and completion */
        struct api_conns conns;     /* every connection, for the head deadline */
        struct api_workers workers; /* where what may block runs (workers.h) */
        struct holder holder;       /* held requests (hold.h) */
        atomic_int suspended;       /* connections suspended now */
        unsigned conn_budget;       /* max_connections, as the open-file limit allows */
};

/* What a streaming route's handler opens for the body (req->stream). */
struct api_stream_ops {
        /* A chunk of the body; errors are remembered and answered at the end. */
        void (*write)(void *stream, const void *data, size_t len);
        /* The body is complete: answer. Frees the stream. */
        void (*finish)(struct api *a, void *stream, struct api_resp *resp);
        /* The request ended early. Frees the stream. */
        void (*abort)(struct api *a, void *stream);
        /* write may block (it sends on to a peer): it runs on a handler
         * thread, one chunk at a time, while the connection waits. */
        bool write_blocks;
};

/* Where a request is between libmicrohttpd's calls. */
enum api_phase {
        API_PH_BODY = 0, /* taking the body (or about to) */
        API_PH_HEAD_JOB, /* a handler thread opens the stream */
        API_PH_HEAD_DONE,
        API_PH_CHUNK_JOB, /* a handler thread writes a chunk on */
        API_PH_END_JOB,   /* a handler thread runs the handler */
        API_PH_HELD,      /* a hold answers (api_defer) */
        API_PH_ANSWER,    /* answer is ready: queue it */
};

/* One request, from its head to its completion. */
struct api_req {
        struct MHD_Connection *conn;
        const char *method;
        const char *path;       /* without the query */
        struct api_match match; /* its route, looked up once when the head is in */
        struct buf body;
        bool body_too_large;
        int64_t started_us;
        void *stream; /* a streaming route's body goes here ... */
        const struct api_stream_ops *stream_ops;
        bool streaming;         /* ... or nowhere when it could not be opened */
        struct api_resp *early; /* an answer decided before the body */
        bool started;           /* the head is in (the handler's first call) */
        bool bad_uri;           /* the raw URI holds %00 */
        char *raw_uri;          /* the request line's URI, undecoded (the port proxy's) */
        struct api *a;
        enum api_phase phase;
        struct api_job job;      /* the handler thread's part, while suspended */
        struct buf chunk;        /* API_PH_CHUNK_JOB: the bytes being written */
        struct api_resp *answer; /* API_PH_ANSWER: what to queue; NULL: close */
};

/* For a handler that leaves its answer to a hold: api_defer(resp) before
 * the hold is armed, and the connection stays suspended after the handler
 * returns (resp is then ignored), until api_answer, from any thread,
 * with resp (malloc'd, taken; NULL closes the connection unanswered:
 * its client went away). */
void api_defer(struct api_resp *resp);
void api_answer(struct api_req *req, struct api_resp *resp);
/* Suspend req's connection (from libmicrohttpd's calls only), and resume
 * it (from any thread; req may be gone once it returns). */
void api_suspend(struct api_req *req);
void api_resume(struct api_req *req);
struct api_resp *api_resp_new(void);
void api_resp_free(struct api_resp *resp);
/* The client's socket, or -1. */
int api_client_fd(struct api_req *req);

/* A reference to the current keyring; keyring_free() it after use. */
struct keyring *api_keys(struct api *a);

/* Query parameter, or NULL. */
const char *api_query(struct api_req *req, const char *key);
/* The same with its length (a value may hold a NUL; the URI is refused
 * before routing when it does, so this is a second line). */
const char *api_query_n(struct api_req *req, const char *key, size_t *ret_len);
const char *api_header(struct api_req *req, const char *key);
