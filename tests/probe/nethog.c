/* SPDX-License-Identifier: MIT */
/* Network resource hogs the hardening tests run inside a sandbox (static,
 * like the probe, so they need nothing from the image). Each is bounded in
 * count and time and prints one JSON line.
 *
 *   nethog sockets PROCS BUDGET_MIB
 *     PROCS processes each open loopback UDP sockets until socket() is
 *     refused, and queue datagrams to them (to itself, through the
 *     sandbox's own loopback) until BUDGET_MIB are queued in all or the
 *     kernel drops what is sent. Prints how many sockets were opened, why
 *     the last one was refused, how many bytes the kernel holds for the
 *     queues (SO_MEMINFO) and the RLIMIT_NOFILE it ran under, then holds
 *     everything until killed. BUDGET_MIB 0 queues nothing (for a kernel
 *     without SO_MEMINFO, gVisor's, whose queues it cannot measure).
 *
 *   nethog dnsflood ADDR COUNT RATE
 *     Sends COUNT DNS queries (A, f<i>.flood.test) to ADDR:53 at about
 *     RATE a second and ignores any answer. */
#include <stdbool.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif

struct hog_report {
        long sockets;
        long queued;
        int err;
};

/* Bytes the kernel has charged for the socket's receive queue. */
static long rmem_alloc(int fd)
{
        unsigned int mi[9] = {0};
        socklen_t l = sizeof(mi);
        if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &l) < 0)
                return -1;
        return (long)mi[0]; /* SK_MEMINFO_RMEM_ALLOC */
}

static _Noreturn void hog_one(long budget, int out)
{
        static char payload[16384];
        struct hog_report rep = {0};
        int tx = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        while (tx >= 0) {
                int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
                if (fd < 0) {
                        rep.err = errno;
                        break;
                }
                struct sockaddr_in a = {.sin_family = AF_INET,
                                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                socklen_t al = sizeof(a);
                if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
                    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
                        rep.err = errno;
                        break;
                }
                rep.sockets++;
                long have = 0;
                for (int i = 0; i < 64 && rep.queued + have < budget; i++) {
                        sendto(tx, payload, sizeof(payload), 0, (struct sockaddr *)&a, sizeof(a));
                        long now = rmem_alloc(fd);
                        if (now <= have)
                                break; /* dropped: the queue or the sandbox's charge is full */
                        have = now;
                }
                rep.queued += have;
        }
        if (tx < 0)
                rep.err = errno;
        if (write(out, &rep, sizeof(rep)) != sizeof(rep))
                _exit(1);
        pause();
        _exit(0);
}

static int sockets(int procs, long budget_mib)
{
        int p[2];
        if (procs < 1 || procs > 64 || budget_mib < 0 || budget_mib > 4096 || pipe(p) < 0)
                return 2;
        long budget = (budget_mib << 20) / procs;
        for (int i = 0; i < procs; i++)
                if (fork() == 0) {
                        close(p[0]);
                        hog_one(budget, p[1]);
                }
        close(p[1]);
        struct hog_report rep, sum = {0};
        long most = 0;
        const char *why = "";
        int got = 0;
        while (got < procs && read(p[0], &rep, sizeof(rep)) == sizeof(rep)) {
                got++;
                sum.sockets += rep.sockets;
                sum.queued += rep.queued;
                most = rep.sockets > most ? rep.sockets : most;
                if (rep.err && !*why)
                        why = strerrorname_np(rep.err);
        }
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        /* Raising the hard limit must be refused. */
        struct rlimit more = {rl.rlim_max + 1, rl.rlim_max + 1};
        bool raised = setrlimit(RLIMIT_NOFILE, &more) == 0;
        printf("{\"procs\":%d,\"sockets\":%ld,\"mostPerProc\":%ld,\"error\":\"%s\","
               "\"queued\":%ld,\"nofileSoft\":%lld,\"nofileHard\":%lld,\"raised\":%s}\n",
               got, sum.sockets, most, why ? why : "", sum.queued, (long long)rl.rlim_cur,
               (long long)rl.rlim_max, raised ? "true" : "false");
        fflush(stdout);
        pause();
        return 0;
}

static void sleep_ns(long ns)
{
        struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int dnsflood(const char *addr, long count, long rate)
{
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(53)};
        if (inet_pton(AF_INET, addr, &to.sin_addr) != 1 || count < 1 || count > 100000 ||
            rate < 1 || rate > 10000)
                return 2;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return 1;
        long sent = 0;
        for (long i = 0; i < count; i++) {
                unsigned char q[512] = {
                    (unsigned char)(i >> 8), (unsigned char)i, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
                char label[24];
                int ll = snprintf(label, sizeof(label), "f%ld", i);
                size_t n = 12;
                q[n++] = (unsigned char)ll;
                memcpy(q + n, label, (size_t)ll);
                n += (size_t)ll;
                static const unsigned char tail[] = {5,   'f', 'l', 'o', 'o', 'd', 4, 't',
                                                     'e', 's', 't', 0,   0,   1,   0, 1};
                memcpy(q + n, tail, sizeof(tail));
                n += sizeof(tail);
                if (sendto(fd, q, n, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)n)
                        sent++;
                char drain[512];
                while (recv(fd, drain, sizeof(drain), 0) > 0)
                        ;
                sleep_ns(1000000000L / rate);
        }
        printf("{\"sent\":%ld}\n", sent);
        return 0;
}

int main(int argc, char **argv)
{
        signal(SIGPIPE, SIG_IGN);
        if (argc == 4 && !strcmp(argv[1], "sockets"))
                return sockets(atoi(argv[2]), atol(argv[3]));
        if (argc == 5 && !strcmp(argv[1], "dnsflood"))
                return dnsflood(argv[2], atol(argv[3]), atol(argv[4]));
        fprintf(stderr, "usage: nethog sockets PROCS BUDGET_MIB | dnsflood ADDR COUNT RATE\n");
        return 2;
}
