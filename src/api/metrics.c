/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include "../runtime/egress-nft.h"

void metrics_render(struct api *a, struct api_resp *resp)
{
        struct mgr_stats st;
        mgr_stats(a->mgr, &st);
        struct buf *b = &resp->body;
        b->len = 0;
        buf_printf(b, "# TYPE sandboxd_http_requests_total counter\n");
        buf_printf(b, "sandboxd_http_requests_total %llu\n",
                   (unsigned long long)atomic_load(&a->metrics.requests));
        buf_printf(b, "# TYPE sandboxd_http_responses_total counter\n");
        for (int c = 1; c < 6; c++)
                buf_printf(b, "sandboxd_http_responses_total{class=\"%dxx\"} %llu\n", c,
                           (unsigned long long)atomic_load(&a->metrics.responses_by_class[c]));
        buf_printf(b, "# TYPE sandboxd_exec_total counter\nsandboxd_exec_total %llu\n",
                   (unsigned long long)atomic_load(&a->metrics.execs));
        buf_printf(b,
                   "# TYPE sandboxd_exec_milliseconds_total counter\n"
                   "sandboxd_exec_milliseconds_total %llu\n",
                   (unsigned long long)atomic_load(&a->metrics.exec_ms_total));
        buf_printf(b,
                   "# TYPE sandboxd_http_bytes_total counter\n"
                   "sandboxd_http_bytes_total{direction=\"in\"} %llu\n"
                   "sandboxd_http_bytes_total{direction=\"out\"} %llu\n",
                   (unsigned long long)atomic_load(&a->metrics.bytes_in),
                   (unsigned long long)atomic_load(&a->metrics.bytes_out));
        buf_printf(b,
                   "# TYPE sandboxd_http_rate_limited_total counter\n"
                   "sandboxd_http_rate_limited_total %llu\n",
                   (unsigned long long)atomic_load(&a->metrics.rate_limited));
        buf_printf(b,
                   "# TYPE sandboxd_port_connections_total counter\n"
                   "sandboxd_port_connections_total{result=\"opened\"} %llu\n"
                   "sandboxd_port_connections_total{result=\"unreachable\"} %llu\n"
                   "sandboxd_port_connections_total{result=\"failed\"} %llu\n"
                   "sandboxd_port_connections_total{result=\"upgraded\"} %llu\n",
                   (unsigned long long)atomic_load(&a->metrics.port_opened),
                   (unsigned long long)atomic_load(&a->metrics.port_unreachable),
                   (unsigned long long)atomic_load(&a->metrics.port_failed),
                   (unsigned long long)atomic_load(&a->metrics.port_upgraded));
        buf_printf(b, "# TYPE sandboxd_sandboxes gauge\n");
        for (int i = 0; i < SBX_NSTATES; i++)
                buf_printf(b, "sandboxd_sandboxes{state=\"%s\"} %llu\n", sbx_state_name(i),
                           (unsigned long long)st.sandboxes[i]);
        buf_printf(b, "# TYPE sandboxd_pool_ready gauge\nsandboxd_pool_ready %llu\n",
                   (unsigned long long)st.pool);
        buf_printf(b, "# TYPE sandboxd_sandbox_transitions_total counter\n");
        const struct {
                const char *what;
                uint64_t v;
        } t[] = {{"created", st.created},
                 {"started", st.started},
                 {"suspended", st.suspended},
                 {"resumed", st.resumed},
                 {"deleted", st.deleted},
                 {"reclaimed", st.reclaimed},
                 {"bring_up_failed", st.bring_up_failures}};
        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                buf_printf(b, "sandboxd_sandbox_transitions_total{event=\"%s\"} %llu\n", t[i].what,
                           (unsigned long long)t[i].v);
        struct egress_stats eg;
        mgr_egress_stats(a->mgr, &eg);
        buf_printf(b,
                   "# TYPE sandboxd_egress_denied_connections_total counter\n"
                   "sandboxd_egress_denied_connections_total %llu\n"
                   "# TYPE sandboxd_egress_dns_total counter\n"
                   "sandboxd_egress_dns_total{verdict=\"allowed\"} %llu\n"
                   "sandboxd_egress_dns_total{verdict=\"refused\"} %llu\n",
                   (unsigned long long)eg.denied_connections, (unsigned long long)eg.dns_allowed,
                   (unsigned long long)eg.dns_refused);
        resp->status = 200;
        resp->content_type = "text/plain; version=0.0.4";
}
