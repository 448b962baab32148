/*
 * The floor of an HTTP/1.1 load client's cost: what a closed-loop client over epoll spends
 * when it only writes a request and reads its answer. N keep-alive connections on one thread,
 * registered once edge-triggered (as proxybench's epoll engine), each writing the same request
 * and reading a response whose length it learned from the first one (a fixed `return 200`
 * answer: nothing is parsed after that), then writing the next. No latency is recorded, no
 * timeouts, no error taxonomy: only a count. bench/vs-wrk.sh runs it beside proxybench and wrk
 * (FLOOR=1) so the client CPU per request of each can be set against the least a request costs.
 *
 * Prints wrk's two summary lines: "N requests in X.XXs" and "Requests/sec: Y".
 * Usage: http1-floor -c CONNS -d SECONDS http://127.0.0.1:PORT/PATH   (IPv4 literal only)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    size_t got;  /* response bytes read for the request in flight */
    size_t sent; /* request bytes written */
};

static char req[512];
static size_t req_len;
static size_t resp_len; /* 0 until learned */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* Length of the first response in `b` (head + Content-Length body), 0 if not all there yet. */
static size_t response_length(const char *b, size_t n) {
    const char *end = memmem(b, n, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = (size_t)(end - b) + 4;
    const char *cl = memmem(b, head, "Content-Length:", 15);
    if (!cl) cl = memmem(b, head, "content-length:", 15);
    if (!cl) {
        fprintf(stderr, "http1-floor: the response has no Content-Length\n");
        exit(2);
    }
    return head + strtoul(cl + 15, NULL, 10);
}

static int send_req(struct conn *c) {
    while (c->sent < req_len) {
        ssize_t w = send(c->fd, req + c->sent, req_len - c->sent, MSG_NOSIGNAL);
        if (w < 0) return errno == EAGAIN ? 0 : -1;
        c->sent += (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv) {
    int conns = 50;
    double duration = 10;
    const char *url = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc) conns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) duration = atof(argv[++i]);
        else url = argv[i];
    }
    if (!url || strncmp(url, "http://", 7) || conns <= 0) {
        fprintf(stderr, "usage: http1-floor -c CONNS -d SECONDS http://127.0.0.1:PORT/PATH\n");
        return 2;
    }
    char host[256];
    const char *hp = url + 7, *slash = strchr(hp, '/');
    size_t hl = slash ? (size_t)(slash - hp) : strlen(hp);
    if (hl >= sizeof host) return 2;
    memcpy(host, hp, hl);
    host[hl] = 0;
    const char *path = slash ? slash : "/";
    char *colon = strrchr(host, ':');
    int port = colon ? atoi(colon + 1) : 80;
    char ip[256];
    snprintf(ip, sizeof ip, "%.*s", colon ? (int)(colon - host) : (int)hl, host);
    req_len = (size_t)snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host);

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        fprintf(stderr, "http1-floor: %s is not an IPv4 address\n", ip);
        return 2;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct conn *cs = calloc((size_t)conns, sizeof *cs);
    static char buf[64 * 1024];

    /* Learn the response length on a blocking connection first. */
    {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("connect");
        if (send(fd, req, req_len, MSG_NOSIGNAL) != (ssize_t)req_len) die("send");
        size_t n = 0;
        while (!(resp_len = response_length(buf, n))) {
            ssize_t r = read(fd, buf + n, sizeof buf - n);
            if (r <= 0) die("read");
            n += (size_t)r;
        }
        close(fd);
    }

    for (int i = 0; i < conns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) die("connect");
        cs[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u32 = (unsigned)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
    }

    struct epoll_event evs[256];
    unsigned long long done = 0;
    double start = now_s(), end = start + duration, t = start;
    while (t < end) {
        int ms = (int)((end - t) * 1000) + 1;
        int n = epoll_wait(ep, evs, 256, ms);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int k = 0; k < n; k++) {
            struct conn *c = &cs[evs[k].data.u32];
            if (evs[k].events & EPOLLOUT && c->sent < req_len && send_req(c) < 0) die("send");
            if (!(evs[k].events & EPOLLIN)) continue;
            for (;;) {
                ssize_t r = read(c->fd, buf, sizeof buf);
                if (r < 0) {
                    if (errno == EAGAIN) break;
                    die("read");
                }
                if (r == 0) {
                    fprintf(stderr, "http1-floor: the server closed a connection\n");
                    return 1;
                }
                c->got += (size_t)r;
                while (c->got >= resp_len) {
                    c->got -= resp_len;
                    done++;
                    c->sent = 0;
                    if (send_req(c) < 0) die("send");
                }
                if ((size_t)r < sizeof buf) break;
            }
        }
        t = now_s();
    }
    double elapsed = t - start;
    printf("  %llu requests in %.2fs\n", done, elapsed);
    printf("Requests/sec: %10.2f\n", done / elapsed);
    return 0;
}
