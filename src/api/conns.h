/* SPDX-License-Identifier: MIT */
/* Connection bookkeeping for the HTTP server: one record per connection
 * from accept to close, and a watchdog thread that closes a connection
 * whose request head has been arriving for longer than the deadline.
 *
 * libmicrohttpd's own timeout restarts on every byte, so a client that
 * sends a header byte every few seconds (slowloris) would hold a
 * connection, and with enough of them every connection, for ever. The
 * watchdog sees from the kernel's TCP counters when the first byte of a
 * head arrived (a connection idle between requests is not cut), and
 * shuts the socket down once the head is not complete `head_timeout_ms`
 * later. The shutdown happens under the table's lock, and a record leaves
 * the table (at MHD_CONNECTION_NOTIFY_CLOSED) before libmicrohttpd closes
 * the descriptor, so the watchdog never touches a reused descriptor. */
#pragma once

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct api_conn;

struct api_conns {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct api_conn *head;
        int64_t head_timeout_ms;
        pthread_t thread;
        bool running, stop;
        atomic_ullong cut; /* connections closed for a slow head */
        atomic_uint open;  /* connections between accept and close */
};

/* The MHD_OPTION_NOTIFY_CONNECTION callback; cls is the struct api_conns. */
void conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode code);
/* The request's head is complete (the handler's first call) / its
 * response is done (the completion callback). */
void conns_request_begin(struct api_conns *cs, struct MHD_Connection *conn);
void conns_request_end(struct api_conns *cs, struct MHD_Connection *conn);

int conns_start(struct api_conns *cs, int64_t head_timeout_ms);
void conns_stop(struct api_conns *cs);
