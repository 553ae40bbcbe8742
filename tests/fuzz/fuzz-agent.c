/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the daemon's side of the agent protocol: whatever
 * a sandbox's agent answers (it runs inside the sandbox, so it may be
 * compromised) must be decoded safely. A thread plays the agent on a real
 * unix socket: it reads the request and answers with the fuzzer's bytes.
 *
 * The first input byte picks the call (exec, spawn, poll, list, ping,
 * signal, kill, stdin, root); the rest is the agent's whole answer. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "src/agent/client.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/sandboxd-fuzz-agent-XXXXXX";
static struct agent_peer peer;
static int listener = -1;

struct answer {
        const uint8_t *data;
        size_t len;
};

static void *agent_thread(void *arg)
{
        const struct answer *a = arg;
        int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
                return NULL;
        /* Read the request's header and payload, then answer. */
        uint8_t head[AGENT_HEADER_SIZE];
        uint16_t type;
        uint32_t len;
        if (read_all(c, head, sizeof(head)) == 0 && agent_header_decode(head, &type, &len) == 0) {
                uint8_t *p = malloc(len ? len : 1);
                if (p && (len == 0 || read_all(c, p, len) == 0))
                        write_all(c, a->data, a->len);
                free(p);
        }
        close(c);
        return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        if (!mkdtemp(dir))
                abort();
        peer = agent_peer_dir(dir);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/agent.sock", dir);
        if (listener < 0 || bind(listener, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(listener, 4) < 0)
                abort();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        struct answer a = {data + 1, size - 1};
        pthread_t t;
        if (pthread_create(&t, NULL, agent_thread, &a))
                return 0;
        struct sbx_error err = {0};
        const char *argv[] = {"true", NULL};
        struct agent_cmd cmd = {.argv = argv, .argc = 1};
        switch (data[0] % 9) {
        case 0: {
                struct agent_exec_result r = {0};
                if (agent_exec(&peer, &cmd, 1000, &r, &err) == 0)
                        agent_exec_result_free(&r);
                break;
        }
        case 1: {
                struct agent_proc_status s = {0};
                if (agent_spawn(&peer, &cmd, &s, &err) == 0)
                        agent_proc_status_free(&s);
                break;
        }
        case 2: {
                struct agent_poll_result p = {0};
                if (agent_poll(&peer, "p1", 0, 0, 0, &p, &err) == 0)
                        agent_poll_result_free(&p);
                break;
        }
        case 3: {
                struct agent_proc_list l = {0};
                if (agent_list(&peer, &l, &err) == 0)
                        agent_proc_list_free(&l);
                break;
        }
        case 4:
                agent_ping(&peer, 1000, &err);
                break;
        case 5:
                agent_signal(&peer, "p1", 15, &err);
                break;
        case 6:
                agent_kill(&peer, "p1", &err);
                break;
        case 7: {
                uint64_t written = 0;
                if (agent_stdin(&peer, "p1", "x", 1, true, 1000, &written, &err) == -ETIME &&
                    written > 1)
                        abort(); /* never more than was sent */
                break;
        }
        default: {
                int fd = -1;
                if (agent_root(&peer, &fd, &err) == 0)
                        close(fd);
                break;
        }
        }
        pthread_join(t, NULL);
        return 0;
}
