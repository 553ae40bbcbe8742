/* SPDX-License-Identifier: MIT */
/* The DNS forwarder of NAT sandboxes (dns.c), a thread of the daemon: it
 * relays the queries that sandboxes send to the first address of their
 * range (redirected to its port by the instance's nftables table) to
 * `upstream` ("a,b:port"; NULL or "" = the host's own nameservers). */
#pragma once

#include <stdint.h>

#include "../common/util.h"

struct dns_forwarder;
struct egress;

/* Bind its sockets (port 0 = any free one; *ret_port says which), before
 * the nftables table that redirects to it is installed. */
int dns_forwarder_open(uint16_t port, struct dns_forwarder **ret, uint16_t *ret_port,
                       struct sbx_error *err);
/* Start its thread, once the zygote is forked. It answers only queries
 * from net_base/net_prefix (host byte order), the sandbox range, as the
 * sandboxes' egress policies in eg allow (NULL: every name), and reads
 * eg's NFLOG socket. */
int dns_forwarder_start(struct dns_forwarder *f, uint32_t net_base, unsigned net_prefix,
                        const char *upstream, struct egress *eg, struct sbx_error *err);
/* Stop the thread (if started) and free f; NULL is fine. */
void dns_forwarder_stop(struct dns_forwarder *f);
