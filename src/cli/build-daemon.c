/* SPDX-License-Identifier: MIT */
/* The build's own daemon (build.h): started on a free loopback port with
 * the build cache as its images dir, never a pool, its own state dir; it
 * dies with the build (PR_SET_PDEATHSIG) and, in a session of its own, is
 * not hit by the terminal's ^C, which the build handles itself. Its
 * sandboxes outlive it, as every daemon's do: build_sweep starts a dead
 * build's daemon again to delete them. */
#include "build.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/tool.h"

#define BUILD_DEPLOYMENT "image-build"
#define BUILD_SANDBOX "step"
#define BUILD_REPLY_MAX (4u << 20)
#define BUILD_TAIL_MAX (16u << 10)
#define BUILD_FRAME_HEAD 16
#define BUILD_FRAME_MAX (8u << 20)

volatile int build_interrupted;

/* ---- HTTP ---- */

static size_t to_buf(char *p, size_t size, size_t n, void *ctx)
{
        return buf_append(ctx, p, size * n) < 0 ? 0 : size * n;
}

static int no_interrupt(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
        return build_interrupted ? 1 : 0;
}

static CURL *easy(const char *url, struct curl_slist *h, long timeout_s)
{
        CURL *c = curl_easy_init();
        if (!c)
                return NULL;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, no_interrupt);
        return c;
}

/* One JSON call; *ret the parsed answer (NULL when it had none), status
 * the HTTP status. */
static int call(const char *method, const char *url, const char *auth, json_t *body, long timeout_s,
                long *status, json_t **ret, struct sbx_error *err)
{
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        char hdr[8300];
        snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", auth);
        struct curl_slist *h2 = h ? curl_slist_append(h, hdr) : NULL;
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        struct buf out;
        buf_init(&out, BUILD_REPLY_MAX);
        CURL *c = h2 ? easy(url, h2, timeout_s) : NULL;
        int r = c ? 0 : sbx_error_set(err, ENOMEM, "curl");
        if (c) {
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
                if (text)
                        curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
                curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_buf);
                curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
                CURLcode cc = curl_easy_perform(c);
                if (cc != CURLE_OK)
                        r = sbx_error_say(err, build_interrupted ? EINTR : EIO,
                                          "the build's daemon: %s %s: %s", method, url,
                                          build_interrupted ? "interrupted"
                                                            : curl_easy_strerror(cc));
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
        }
        *ret = r == 0 && out.len ? json_loadb(out.data, out.len, 0, NULL) : NULL;
        curl_easy_cleanup(c);
        curl_slist_free_all(h2 ? h2 : h);
        free(text);
        buf_free(&out);
        return r;
}

/* The server's error of an answer that is not 200, as ours. */
static int answer_error(long status, json_t *j, const char *what, struct sbx_error *err)
{
        json_t *e = json_object_get(j, "error");
        return sbx_error_say(err, EIO, "%s: %ld %s: %s", what, status,
                             json_string_value(json_object_get(e, "code")) ?: "error",
                             json_string_value(json_object_get(e, "message")) ?: "(no message)");
}

/* ---- the daemon ---- */

static int free_port(void)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(a);
        int port = -1;
        if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
            getsockname(s, (struct sockaddr *)&a, &l) == 0)
                port = ntohs(a.sin_port);
        if (s >= 0)
                close(s);
        return port;
}

static int self_path(char out[PATH_MAX])
{
        ssize_t n = readlink("/proc/self/exe", out, PATH_MAX - 1);
        if (n <= 0)
                return -errno;
        out[n] = '\0';
        return 0;
}

static pid_t spawn_daemon(const char *self, const char *state, const char *cache, int port)
{
        char listen[32], logp[PATH_MAX];
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
        if (path_join(logp, sizeof(logp), state, "daemon.log") < 0)
                return -ENAMETOOLONG;
        const char *const argv[] = {self,
                                    "serve",
                                    "--listen",
                                    listen,
                                    "--state",
                                    state,
                                    "--images",
                                    cache,
                                    "--default-image",
                                    "tiny",
                                    "--default-class",
                                    "ns",
                                    "--pool-size",
                                    "0",
                                    "--idle-timeout",
                                    "7d",
                                    "--allow-unknown-accounts",
                                    "true",
                                    "--local-issuer",
                                    "true",
                                    NULL};
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid != 0)
                return pid < 0 ? -errno : pid;
        /* The child: a session of its own, gone with the build. */
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
                _exit(127);
        int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                _exit(127);
        execv(self, (char *const *)argv);
        _exit(127);
}

static bool healthy(const char *url)
{
        char u[128];
        snprintf(u, sizeof(u), "%s/healthz", url);
        CURL *c = easy(u, NULL, 2);
        long status = 0;
        struct buf out;
        buf_init(&out, 4096);
        if (c) {
                curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_buf);
                curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
                if (curl_easy_perform(c) == CURLE_OK)
                        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        }
        curl_easy_cleanup(c);
        buf_free(&out);
        return status == 200;
}

/* Up and answering within 30 s; false when it exited (a port taken: the
 * caller tries another). */
static bool wait_up(struct build_daemon *d)
{
        for (int i = 0; i < 600 && !build_interrupted; i++) {
                int status;
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return false;
                }
                if (healthy(d->url))
                        return true;
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return false;
}

static int mint(struct build_daemon *d, const char *self, struct sbx_error *err)
{
        const char *const argv[] = {self,        "token",          "--state",      d->state,
                                    "--url",     d->url,           "--deployment", BUILD_DEPLOYMENT,
                                    "--account", BUILD_DEPLOYMENT, "--ttl",        "30d",
                                    NULL};
        struct buf out;
        buf_init(&out, sizeof(d->token) - 1);
        struct tool_run t = {.argv = argv, .out = &out};
        int r = run_tool(&t, NULL, err);
        if (r >= 0)
                r = buf_terminate(&out);
        if (r >= 0) {
                size_t n = strcspn(out.data, "\r\n");
                snprintf(d->token, sizeof(d->token), "%.*s", (int)n, out.data);
        }
        buf_free(&out);
        return r;
}

static void kill_daemon(struct build_daemon *d)
{
        if (d->pid <= 0)
                return;
        kill(d->pid, SIGTERM);
        for (int i = 0; i < 300; i++) {
                if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return;
                }
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
}

static int lock_state(struct build_daemon *d, struct sbx_error *err)
{
        char p[PATH_MAX];
        if (path_join(p, sizeof(p), d->state, "lock") < 0)
                return sbx_error_say(err, ENAMETOOLONG, "state path too long");
        d->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (d->lock_fd < 0)
                return sbx_error_set(err, errno, "open `%s`", p);
        if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0)
                return sbx_error_set(err, errno, "lock `%s`", p);
        return 0;
}

static int start_on(struct build_daemon *d, const char *cache, struct sbx_error *err)
{
        char self[PATH_MAX];
        int r = self_path(self);
        if (r < 0)
                return sbx_error_set(err, -r, "find this program");
        for (int attempt = 0; attempt < 5; attempt++) {
                int port = free_port();
                if (port < 0)
                        return sbx_error_set(err, errno, "find a free port");
                snprintf(d->url, sizeof(d->url), "http://127.0.0.1:%d", port);
                pid_t pid = spawn_daemon(self, d->state, cache, port);
                if (pid < 0)
                        return sbx_error_set(err, (int)-pid, "start the build's daemon");
                d->pid = pid;
                if (wait_up(d))
                        return mint(d, self, err);
                kill_daemon(d);
                if (build_interrupted)
                        return sbx_error_say(err, EINTR, "interrupted");
        }
        return sbx_error_say(err, EIO, "the build's daemon did not start (its log: %s/daemon.log)",
                             d->state);
}

int build_daemon_start(struct build_daemon *d, const char *state, const char *cache,
                       struct sbx_error *err)
{
        memset(d, 0, sizeof(*d));
        d->lock_fd = -1;
        snprintf(d->state, sizeof(d->state), "%s", state);
        if (mkdir(state, 0700) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create `%s`", state);
        int r = lock_state(d, err);
        return r < 0 ? r : start_on(d, cache, err);
}

static void delete_all(struct build_daemon *d)
{
        char url[256];
        snprintf(url, sizeof(url), "%s/v1/sandboxes", d->url);
        long status = 0;
        json_t *j = NULL;
        struct sbx_error e = {0};
        if (call("GET", url, d->token, NULL, 60, &status, &j, &e) == 0 && status == 200) {
                size_t i;
                json_t *sb;
                json_array_foreach(json_object_get(j, "sandboxes"), i, sb)
                {
                        const char *name = json_string_value(json_object_get(sb, "name"));
                        json_t *k = NULL;
                        char u[512];
                        if (!name || strlen(name) > 200)
                                continue;
                        snprintf(u, sizeof(u), "%s/v1/sandboxes/%s", d->url, name);
                        call("DELETE", u, d->token, NULL, 120, &status, &k, &e);
                        json_decref(k);
                }
        }
        json_decref(j);
}

void build_daemon_stop(struct build_daemon *d)
{
        if (d->pid > 0) {
                int was = build_interrupted;
                build_interrupted = 0; /* the clean-up itself must not stop */
                delete_all(d);
                build_interrupted = was;
                kill_daemon(d);
        }
        if (d->state[0])
                rm_rf_at(AT_FDCWD, d->state);
        if (d->lock_fd >= 0)
                close(d->lock_fd);
        d->lock_fd = -1;
}

void build_sweep(const char *images_dir)
{
        DIR *dir = opendir(images_dir);
        if (!dir)
                return;
        char cache[PATH_MAX];
        if (path_join(cache, sizeof(cache), images_dir, BUILD_CACHE_DIR) < 0) {
                closedir(dir);
                return;
        }
        struct dirent *de;
        while ((de = readdir(dir))) {
                if (strncmp(de->d_name, BUILD_STATE_PREFIX, strlen(BUILD_STATE_PREFIX)))
                        continue;
                struct build_daemon d = {.lock_fd = -1};
                struct sbx_error e = {0};
                if (path_join(d.state, sizeof(d.state), images_dir, de->d_name) < 0 ||
                    lock_state(&d, &e) < 0) {
                        if (d.lock_fd >= 0)
                                close(d.lock_fd);
                        continue; /* a build that runs */
                }
                fprintf(stderr, "cleaning up after a build that died (%s)\n", de->d_name);
                if (start_on(&d, cache, &e) < 0)
                        fprintf(stderr, "  %s\n", e.msg);
                build_daemon_stop(&d);
        }
        closedir(dir);
}

/* ---- a RUN step ---- */

struct stream {
        unsigned char head[BUILD_FRAME_HEAD];
        size_t have;  /* of the head */
        uint32_t len; /* of the frame's payload */
        size_t got;   /* of it */
        uint8_t type;
        struct buf json; /* an exit or error frame's payload */
        struct buf *tail;
        bool ended;
        bool bad;
};

static void keep_tail(struct buf *tail, const char *p, size_t n)
{
        if (!tail)
                return;
        if (n >= BUILD_TAIL_MAX) {
                p += n - BUILD_TAIL_MAX;
                n = BUILD_TAIL_MAX;
        }
        if (tail->len + n > BUILD_TAIL_MAX) {
                size_t drop = tail->len + n - BUILD_TAIL_MAX;
                memmove(tail->data, tail->data + drop, tail->len - drop);
                tail->len -= drop;
        }
        buf_append(tail, p, n);
}

static void payload(struct stream *s, const char *p, size_t n)
{
        if (s->type == 2 || s->type == 3) {
                write_all(STDERR_FILENO, p, n);
                keep_tail(s->tail, p, n);
        } else if (s->type == 4 || s->type == 5) {
                if (buf_append(&s->json, p, n) < 0)
                        s->bad = true;
        }
}

static size_t on_stream(char *p, size_t size, size_t n, void *ctx)
{
        struct stream *s = ctx;
        size_t total = size * n, used = 0;
        while (used < total && !s->ended && !s->bad) {
                if (s->have < BUILD_FRAME_HEAD) {
                        size_t k = MIN(BUILD_FRAME_HEAD - s->have, total - used);
                        memcpy(s->head + s->have, p + used, k);
                        s->have += k;
                        used += k;
                        if (s->have < BUILD_FRAME_HEAD)
                                break;
                        s->type = s->head[0];
                        s->len = (uint32_t)s->head[4] << 24 | (uint32_t)s->head[5] << 16 |
                                 (uint32_t)s->head[6] << 8 | s->head[7];
                        s->got = 0;
                        if (s->len > BUILD_FRAME_MAX)
                                s->bad = true;
                }
                size_t k = MIN((size_t)s->len - s->got, total - used);
                payload(s, p + used, k);
                s->got += k;
                used += k;
                if (s->got == s->len) {
                        s->ended = s->type == 4 || s->type == 5;
                        s->have = 0;
                }
        }
        return s->bad ? 0 : total;
}

static json_t *spawn_body(const struct build_run *r)
{
        json_t *cmd = json_array(), *env = json_object();
        for (size_t i = 0; i < r->argc; i++)
                json_array_append_new(cmd, json_string(r->argv[i]));
        for (size_t i = 0; i < r->envc; i++) {
                const char *eq = strchr(r->env[i], '=');
                if (!eq)
                        continue;
                char key[256];
                snprintf(key, sizeof(key), "%.*s", (int)(eq - r->env[i]), r->env[i]);
                json_object_set_new(env, key, json_string(eq + 1));
        }
        return json_pack("{s:o, s:o, s:s?, s:b}", "command", cmd, "env", env, "cwd", r->cwd,
                         "lossless", 1);
}

/* Follow the process's stream to its exit. */
static int follow(const char *endpoint, const char *cred, const char *id, int *ret_exit,
                  struct buf *tail, struct sbx_error *err)
{
        char url[1024], hdr[8300];
        snprintf(url, sizeof(url), "%s/processes/%s/stream", endpoint, id);
        snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", cred);
        struct curl_slist *h = curl_slist_append(NULL, hdr);
        struct stream s = {.tail = tail};
        buf_init(&s.json, 1 << 20);
        CURL *c = h ? easy(url, h, 0) : NULL;
        int r = c ? 0 : sbx_error_set(err, ENOMEM, "curl");
        if (c) {
                curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
                curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
                CURLcode cc = curl_easy_perform(c);
                long status = 0;
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
                if (build_interrupted)
                        r = sbx_error_say(err, EINTR, "interrupted");
                else if (status != 200 || s.bad || (cc != CURLE_OK && !s.ended))
                        r = sbx_error_say(err, EIO, "the step's output stream broke (%ld, %s)",
                                          status, s.bad ? "a bad frame" : curl_easy_strerror(cc));
        }
        json_t *j = r == 0 && s.ended ? json_loadb(s.json.data, s.json.len, 0, NULL) : NULL;
        if (r == 0 && !j)
                r = sbx_error_say(err, EIO, "the step's output stream ended without its exit");
        else if (r == 0 && s.type == 5)
                r = answer_error(200, j, "the step's output stream", err);
        else if (r == 0) {
                json_t *code = json_object_get(j, "exitCode");
                *ret_exit = json_is_integer(code) ? (int)json_integer_value(code) : -1;
        }
        json_decref(j);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        buf_free(&s.json);
        return r;
}

static int attach(struct build_daemon *d, const char *image, char *endpoint, size_t elen,
                  char *cred, size_t clen, struct sbx_error *err)
{
        char url[256];
        snprintf(url, sizeof(url), "%s/v1/sandboxes/%s/attach", d->url, BUILD_SANDBOX);
        json_t *body = json_pack("{s:s, s:s}", "image", image, "network", "nat");
        long status = 0;
        json_t *j = NULL;
        int r = call("POST", url, d->token, body, 300, &status, &j, err);
        json_decref(body);
        const char *ep = json_string_value(json_object_get(j, "endpoint"));
        const char *auth =
            json_string_value(json_object_get(json_object_get(j, "headers"), "Authorization"));
        if (r == 0 && (status != 200 || !ep || !auth || strncmp(auth, "Bearer ", 7)))
                r = answer_error(status, j, "start the step's sandbox", err);
        if (r == 0) {
                snprintf(endpoint, elen, "%s", ep);
                snprintf(cred, clen, "%s", auth + 7);
        }
        json_decref(j);
        return r;
}

static int data_call(const char *endpoint, const char *cred, const char *path, json_t *body,
                     long timeout_s, json_t **ret, const char *what, struct sbx_error *err)
{
        char url[1024];
        snprintf(url, sizeof(url), "%s%s", endpoint, path);
        long status = 0;
        int r = call("POST", url, cred, body, timeout_s, &status, ret, err);
        if (r == 0 && status != 200)
                r = answer_error(status, *ret, what, err);
        return r;
}

int build_daemon_run(struct build_daemon *d, const struct build_run *r, int *ret_exit,
                     struct buf *tail, struct sbx_error *err)
{
        char endpoint[512], cred[4096];
        int ret = attach(d, r->image, endpoint, sizeof(endpoint), cred, sizeof(cred), err);
        json_t *body = ret == 0 ? spawn_body(r) : NULL, *j = NULL;
        if (ret == 0)
                ret = data_call(endpoint, cred, "/processes", body, 60, &j, "start the step", err);
        json_decref(body);
        const char *id = json_string_value(json_object_get(j, "processId"));
        if (ret == 0 && !id)
                ret = sbx_error_say(err, EIO, "start the step: no processId");
        if (ret == 0)
                ret = follow(endpoint, cred, id, ret_exit, tail, err);
        json_decref(j);
        j = NULL;
        if (ret == 0 && *ret_exit == 0) {
                body = json_pack("{s:s}", "image", r->snapshot);
                char url[1024];
                snprintf(url, sizeof(url), "%s/snapshot", endpoint);
                long status = 0;
                ret = call("POST", url, cred, body, 3600, &status, &j, err);
                /* 409: another build made this very step (its key names
                 * what it holds) meanwhile. */
                const char *code =
                    json_string_value(json_object_get(json_object_get(j, "error"), "code"));
                if (ret == 0 && status != 200 &&
                    !(status == 409 && code && !strcmp(code, "already_exists")))
                        ret = answer_error(status, j, "snapshot the step", err);
                json_decref(body);
                json_decref(j);
                j = NULL;
        }
        /* The step's sandbox goes, whatever happened. */
        char url[256];
        snprintf(url, sizeof(url), "%s/v1/sandboxes/%s", d->url, BUILD_SANDBOX);
        long status = 0;
        struct sbx_error e2 = {0};
        int was = build_interrupted;
        build_interrupted = 0;
        call("DELETE", url, d->token, NULL, 120, &status, &j, &e2);
        build_interrupted = was;
        json_decref(j);
        return ret;
}

bool build_running(const char *images_dir)
{
        DIR *dir = opendir(images_dir);
        if (!dir)
                return false;
        bool running = false;
        struct dirent *de;
        while (!running && (de = readdir(dir))) {
                if (strncmp(de->d_name, BUILD_STATE_PREFIX, strlen(BUILD_STATE_PREFIX)))
                        continue;
                char p[PATH_MAX];
                if (path_printf(p, sizeof(p), "%s/%s/lock", images_dir, de->d_name) < 0)
                        continue;
                int fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0)
                        continue;
                running = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
                close(fd);
        }
        closedir(dir);
        return running;
}
