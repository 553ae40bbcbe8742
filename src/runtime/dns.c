/* SPDX-License-Identifier: MIT */
/* The DNS forwarder of NAT sandboxes. Hosts usually resolve through a
 * private or local server (a cloud's VPC resolver, systemd-resolved's
 * 127.0.0.53) that a sandbox may not reach, since it may reach no private
 * address. So a sandbox's resolv.conf names one fixed address of its range,
 * the host's nftables table redirects DNS to it to this forwarder, and the
 * forwarder relays the queries to the host's own resolvers.
 *
 * One thread, one UDP socket. A query is accepted only from the sandbox
 * range and only if it looks like a DNS query; it gets a fresh transaction
 * id towards the upstream (so sandboxes cannot collide or spoof each
 * other's answers), and the answer goes back with the original id. Pending
 * queries are bounded and time out: DNS_MAX_PENDING in all, and at most
 * DNS_MAX_PER_CLIENT per source address, so a sandbox that floods the
 * forwarder with queries nobody answers fills only its own quota and its
 * neighbours keep resolving. No TCP: answers that need it come back
 * truncated, and resolv.conf asks for EDNS0 so they rarely do.
 *
 * Egress policies (egress.h): a query for a name the sandbox's policy does
 * not allow is answered REFUSED here and never leaves the host; the A
 * records of an allowed name's answer are pinned into the sandbox's
 * nftables set before the answer goes back (egress.c). The same thread
 * reads the NFLOG socket of denied connections. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns-msg.h"
#include "dns.h"
#include "egress-nft.h"

#define DNS_MAX_PENDING 1024
#define DNS_MAX_PER_CLIENT 64 /* a resolver retries; 64 in flight is plenty */
#define DNS_TIMEOUT_MS 5000
#define DNS_MAX_PACKET 4096
#define DNS_MAX_UPSTREAMS 3

struct pending {
        bool used;
        uint16_t upstream_id;
        uint16_t client_id;
        struct sockaddr_in client;
        int64_t expires;
        char name[DNSMSG_NAME_MAX + 1]; /* its question, for the egress log */
};

struct dns_forwarder {
        int sock;           /* queries from sandboxes (redirected here) */
        int up;             /* towards the upstreams */
        int wake[2];        /* stop */
        uint32_t net, mask; /* the sandbox range, host byte order */
        struct sockaddr_in upstreams[DNS_MAX_UPSTREAMS];
        int nup;
        struct pending pending[DNS_MAX_PENDING];
        pthread_t thread;
        unsigned next_upstream;
        struct egress *eg; /* the sandboxes' policies and logs; NULL: none */
};

static uint16_t rand16(void)
{
        uint16_t v = 0;
        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
                v = (uint16_t)(mono_us() ^ (mono_us() >> 16));
        return v;
}

/* "a, b:5353" -> upstream addresses (IPv4, port 53 unless given). */
static int parse_upstreams(struct dns_forwarder *f, const char *list, struct sbx_error *err)
{
        char buf[512];
        if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
                return sbx_error_set(err, E2BIG, "dns upstream: the list is too long");
        char *save = NULL;
        for (char *t = strtok_r(buf, ", \t\n", &save); t; t = strtok_r(NULL, ", \t\n", &save)) {
                if (f->nup == DNS_MAX_UPSTREAMS)
                        break;
                char *colon = strchr(t, ':');
                unsigned port = 53;
                if (colon) {
                        *colon = '\0';
                        char *end;
                        unsigned long p = strtoul(colon + 1, &end, 10);
                        if (*end || p == 0 || p > 65535)
                                return sbx_error_set(err, EINVAL, "dns upstream port `%s`",
                                                     colon + 1);
                        port = (unsigned)p;
                }
                struct sockaddr_in *a = &f->upstreams[f->nup];
                memset(a, 0, sizeof(*a));
                a->sin_family = AF_INET;
                a->sin_port = htons((uint16_t)port);
                if (inet_pton(AF_INET, t, &a->sin_addr) != 1)
                        return sbx_error_set(err, EINVAL,
                                             "dns upstream `%s` is not an IPv4 address", t);
                f->nup++;
        }
        return 0;
}

/* The host's own resolvers, as it uses them (private ones included: the
 * host may reach them; its sandboxes only through this forwarder), as
 * "a,b". Only whole addresses: what does not fit is left out. */
static void host_upstreams(struct buf *out)
{
        static const char *const files[] = {"/run/systemd/resolve/resolv.conf", "/etc/resolv.conf"};
        for (size_t i = 0; i < ARRAY_SIZE(files) && out->len == 0; i++) {
                FILE *fp = fopen(files[i], "re");
                char line[256];
                while (fp && fgets(line, sizeof(line), fp)) {
                        char ip[64];
                        struct in_addr a;
                        if (sscanf(line, " nameserver %63s", ip) == 1 &&
                            inet_pton(AF_INET, ip, &a) == 1)
                                buf_printf(out, "%s%s", out->len ? "," : "", ip);
                }
                if (fp)
                        fclose(fp);
        }
}

static bool live(const struct pending *p, int64_t now)
{
        return p->used && p->expires >= now;
}

/* A free slot for a query from `client`, or NULL when the table is full or
 * the client already has DNS_MAX_PER_CLIENT queries pending. Clients are
 * told apart by address only: a sandbox has one, whatever its ports. */
static struct pending *find_slot(struct dns_forwarder *f, const struct sockaddr_in *client,
                                 int64_t now)
{
        struct pending *free_slot = NULL;
        unsigned mine = 0;
        for (size_t i = 0; i < DNS_MAX_PENDING; i++) {
                struct pending *p = &f->pending[i];
                if (!live(p, now)) {
                        if (!free_slot)
                                free_slot = p;
                } else if (p->client.sin_addr.s_addr == client->sin_addr.s_addr &&
                           ++mine >= DNS_MAX_PER_CLIENT) {
                        return NULL;
                }
        }
        return free_slot;
}

static void on_query(struct dns_forwarder *f)
{
        uint8_t pkt[DNS_MAX_PACKET];
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n =
            recvfrom(f->sock, pkt, sizeof(pkt), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        /* A DNS header is 12 bytes; QR must be 0 (a query). */
        if (n < 12 || fl != sizeof(from) || from.sin_family != AF_INET || (pkt[2] & 0x80))
                return;
        if ((ntohl(from.sin_addr.s_addr) & f->mask) != f->net)
                return; /* not from a sandbox: never an open resolver */
        char name[DNSMSG_NAME_MAX + 1];
        uint16_t qtype;
        size_t qend;
        bool parsed = dnsmsg_question(pkt, (size_t)n, name, &qtype, &qend) == 0;
        if (!egress_dns_query(f->eg, ntohl(from.sin_addr.s_addr), parsed ? name : "")) {
                /* Refused by its policy: answered here, never asked. */
                if (parsed)
                        sendto(f->sock, pkt, dnsmsg_refuse(pkt, qend, DNSMSG_RCODE_REFUSED),
                               MSG_DONTWAIT, (struct sockaddr *)&from, sizeof(from));
                return;
        }
        int64_t now = mono_ms();
        struct pending *p = find_slot(f, &from, now);
        if (!p)
                return; /* full, or over its quota: the client retries */
        uint16_t id;
        bool clash;
        do {
                id = rand16();
                clash = false;
                for (size_t i = 0; i < DNS_MAX_PENDING && !clash; i++)
                        clash = live(&f->pending[i], now) && f->pending[i].upstream_id == id;
        } while (clash);
        p->used = true;
        p->client_id = (uint16_t)(pkt[0] << 8 | pkt[1]);
        p->upstream_id = id;
        p->client = from;
        p->expires = now + DNS_TIMEOUT_MS;
        snprintf(p->name, sizeof(p->name), "%s", parsed ? name : "");
        pkt[0] = (uint8_t)(id >> 8);
        pkt[1] = (uint8_t)id;
        const struct sockaddr_in *up = &f->upstreams[f->next_upstream++ % (unsigned)f->nup];
        sendto(f->up, pkt, (size_t)n, MSG_DONTWAIT, (const struct sockaddr *)up, sizeof(*up));
}

/* An upstream's answer turned into SERVFAIL with its question only; the
 * answer is unchanged when its question cannot be read. */
static size_t refuse_answer(uint8_t *pkt, size_t n)
{
        char name[DNSMSG_NAME_MAX + 1];
        uint16_t type;
        size_t qend;
        uint8_t flags = pkt[2];
        pkt[2] = (uint8_t)(flags & 0x7f); /* read it as the query it answers */
        int r = dnsmsg_question(pkt, n, name, &type, &qend);
        pkt[2] = flags;
        return r < 0 ? 0 : dnsmsg_refuse(pkt, qend, DNSMSG_RCODE_SERVFAIL);
}

static void on_answer(struct dns_forwarder *f)
{
        uint8_t pkt[DNS_MAX_PACKET];
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(f->up, pkt, sizeof(pkt), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n < 12 || fl != sizeof(from) || !(pkt[2] & 0x80))
                return;
        /* Only from an upstream we asked. */
        bool known = false;
        for (int i = 0; i < f->nup && !known; i++)
                known = f->upstreams[i].sin_addr.s_addr == from.sin_addr.s_addr &&
                        f->upstreams[i].sin_port == from.sin_port;
        if (!known)
                return;
        uint16_t id = (uint16_t)(pkt[0] << 8 | pkt[1]);
        int64_t now = mono_ms();
        for (size_t i = 0; i < DNS_MAX_PENDING; i++) {
                struct pending *p = &f->pending[i];
                if (!live(p, now) || p->upstream_id != id)
                        continue;
                struct dnsmsg_addr addrs[32];
                size_t na = 0;
                if (dnsmsg_answers(pkt, (size_t)n, addrs, ARRAY_SIZE(addrs), &na) < 0)
                        na = 0;
                /* Pinned before the sandbox has the answer; over its
                 * budget of pins, a failure it may retry. */
                if (!egress_dns_answer(f->eg, ntohl(p->client.sin_addr.s_addr), p->name, addrs, na))
                        n = (ssize_t)refuse_answer(pkt, (size_t)n);
                pkt[0] = (uint8_t)(p->client_id >> 8);
                pkt[1] = (uint8_t)p->client_id;
                if (n > 0)
                        sendto(f->sock, pkt, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&p->client,
                               sizeof(p->client));
                p->used = false;
                return;
        }
}

static void *forwarder_main(void *arg)
{
        struct dns_forwarder *f = arg;
        for (;;) {
                struct pollfd pfd[4] = {
                    {.fd = f->sock, .events = POLLIN},
                    {.fd = f->up, .events = POLLIN},
                    {.fd = f->wake[0], .events = POLLIN},
                    {.fd = egress_nflog_fd(f->eg), .events = POLLIN},
                };
                if (poll(pfd, 4, 1000) < 0)
                        continue;
                if (pfd[3].revents & POLLIN)
                        egress_nflog_read(f->eg);
                if (pfd[2].revents)
                        return NULL;
                if (pfd[0].revents & POLLIN)
                        on_query(f);
                if (pfd[1].revents & POLLIN)
                        on_answer(f);
        }
}

static int udp_socket(uint16_t port, struct sbx_error *err)
{
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return sbx_error_set(err, errno, "dns forwarder socket");
        /* Any address: the nftables redirect delivers queries to the
         * address of the sandbox's host-side interface. on_query() drops
         * whatever does not come from the sandbox range. */
        struct sockaddr_in a = {
            .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                int r = sbx_error_set(err, errno, "dns forwarder: bind port %u", port);
                close(fd);
                return r;
        }
        return fd;
}

int dns_forwarder_open(uint16_t port, struct dns_forwarder **ret, uint16_t *ret_port,
                       struct sbx_error *err)
{
        struct dns_forwarder *f = calloc(1, sizeof(*f));
        if (!f)
                return sbx_error_set(err, ENOMEM, "dns forwarder");
        f->sock = f->up = f->wake[0] = f->wake[1] = -1;
        int r = 0;
        struct sockaddr_in a;
        socklen_t al = sizeof(a);
        if ((f->sock = udp_socket(port, err)) < 0)
                r = f->sock;
        else if (getsockname(f->sock, (struct sockaddr *)&a, &al) < 0)
                r = sbx_error_set(err, errno, "dns forwarder: getsockname");
        if (r == 0 && (f->up = udp_socket(0, err)) < 0)
                r = f->up;
        if (r == 0 && pipe2(f->wake, O_CLOEXEC) < 0)
                r = sbx_error_set(err, errno, "pipe");
        if (r < 0) {
                dns_forwarder_stop(f);
                return r;
        }
        *ret_port = ntohs(a.sin_port);
        *ret = f;
        return 0;
}

int dns_forwarder_start(struct dns_forwarder *f, uint32_t net_base, unsigned net_prefix,
                        const char *upstream, struct egress *eg, struct sbx_error *err)
{
        f->eg = eg;
        f->net = net_base;
        f->mask = ~0U << (32 - net_prefix);
        struct buf hosts;
        buf_init(&hosts, 511);
        int r = 0;
        if (!upstream || !*upstream) {
                host_upstreams(&hosts);
                r = buf_terminate(&hosts);
                upstream = hosts.data;
        }
        if (r >= 0)
                r = parse_upstreams(f, upstream, err);
        else
                r = sbx_error_set(err, -r, "dns forwarder");
        buf_free(&hosts);
        if (r == 0 && f->nup == 0)
                r = sbx_error_set(err, ENOENT, "dns forwarder: the host has no IPv4 nameserver");
        if (r < 0)
                return r;
        /* The daemon takes its signals with sigwait(); this thread must
         * never be the one they are delivered to. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        r = -pthread_create(&f->thread, NULL, forwarder_main, f);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                f->thread = 0;
                return sbx_error_set(err, -r, "dns forwarder thread");
        }
        return 0;
}

void dns_forwarder_stop(struct dns_forwarder *f)
{
        if (!f)
                return;
        if (f->thread) {
                if (write(f->wake[1], "x", 1) == 1)
                        pthread_join(f->thread, NULL);
        }
        int fds[] = {f->sock, f->up, f->wake[0], f->wake[1]};
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(f);
}
