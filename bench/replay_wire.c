/*
 * replay_wire.c: the replay server's wire layer (a benchmark tool):
 * listening sockets, one thread per connection, the framing of requests
 * (OP_MSG with its body section first; OP_QUERY for the legacy hello
 * handshake) and of replies (OP_MSG, or OP_REPLY to an OP_QUERY), after the
 * MongoDB Wire Protocol reference. What a request asks is answered by
 * replay_dispatch() (replay_server.c).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "replay_server.h"

static bool send_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_reply(struct conn *c, int32_t resp_to, int opcode, const bson_t *body)
{
    size_t pre = opcode == OP_MSG ? 5 : 20;
    size_t total = 16 + pre + body->len;
    if (total > c->out_cap) {
        c->out_cap = total * 2;
        c->out = realloc(c->out, c->out_cap);
    }
    uint8_t *w = c->out;
    int32_t hdr[4] = {(int32_t)total, (c->s->port << 16) ^ ++c->req_seq, resp_to, opcode};
    memcpy(w, hdr, 16);
    w += 16;
    if (opcode == OP_MSG) {
        memset(w, 0, 5); /* flags 0, kind 0 */
    } else {
        int32_t f = 8, start = 0, nret = 1;
        int64_t cid = 0;
        memcpy(w, &f, 4);
        memcpy(w + 4, &cid, 8);
        memcpy(w + 12, &start, 4);
        memcpy(w + 16, &nret, 4);
    }
    memcpy(w + pre, bson_get_data(body), body->len);
    return send_all(c->fd, c->out, total);
}

static bool recv_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t got = recv(fd, p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        p += got;
        n -= (size_t)got;
    }
    return true;
}

static void *serve(void *arg)
{
    struct conn *c = arg;
    uint8_t *in = NULL;
    size_t in_cap = 0;

    for (;;) {
        int32_t hdr[4];
        if (!recv_all(c->fd, (uint8_t *)hdr, 16))
            break;
        if (hdr[0] < 16 || hdr[0] > 48000000)
            break;
        size_t len = (size_t)hdr[0] - 16;
        if (len > in_cap) {
            in_cap = len * 2;
            in = realloc(in, in_cap);
        }
        if (!recv_all(c->fd, in, len))
            break;
        bson_t cmd, r = BSON_INITIALIZER;
        bool more_to_come = false;
        int opcode;
        int32_t size;
        if (hdr[3] == OP_MSG) {
            uint32_t flags;
            memcpy(&flags, in, 4);
            more_to_come = flags & 2;
            if (len < 10 || in[4] != 0)
                break; /* mongocdc and libmongoc send the body first, no sequences here */
            memcpy(&size, in + 5, 4);
            if (size < 5 || (size_t)size > len - 5 || !bson_init_static(&cmd, in + 5, (size_t)size))
                break;
            opcode = OP_MSG;
        } else if (hdr[3] == OP_QUERY) {
            /* flags, ns cstring, skip, nreturn, query */
            size_t i = 4;
            while (i < len && in[i])
                i++;
            i += 1 + 8;
            if (i + 4 > len)
                break;
            memcpy(&size, in + i, 4);
            if (size < 5 || (size_t)size > len - i || !bson_init_static(&cmd, in + i, (size_t)size))
                break;
            bson_iter_t q;
            if (bson_iter_init_find(&q, &cmd, "$query") && BSON_ITER_HOLDS_DOCUMENT(&q)) {
                uint32_t ql;
                const uint8_t *qd;
                bson_iter_document(&q, &ql, &qd);
                bson_init_static(&cmd, qd, ql);
            }
            opcode = OP_REPLY;
        } else {
            break;
        }
        replay_dispatch(c, &cmd, &r);
        bool ok = more_to_come || send_reply(c, hdr[1], opcode, &r);
        bson_destroy(&r);
        if (!ok)
            break;
    }
    close(c->fd);
    free(in);
    free(c->out);
    free(c);
    return NULL;
}

void *replay_accept_loop(void *arg)
{
    struct server *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            replay_die("accept failed");
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        c->s = s;
        c->fd = fd;
        c->id = atomic_fetch_add(&G.conn_ids, 1) + 1;
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, serve, c))
            replay_die("pthread_create failed");
        pthread_attr_destroy(&at);
    }
    return NULL;
}

void replay_listen(struct server *s, int port)
{
    struct sockaddr_in a = {0};
    socklen_t alen = sizeof a;
    int one = 1;

    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->fd, (struct sockaddr *)&a, sizeof a) || listen(s->fd, 128))
        replay_die("cannot listen");
    getsockname(s->fd, (struct sockaddr *)&a, &alen);
    s->port = ntohs(a.sin_port);
    pthread_mutex_init(&s->mu, NULL);
    s->next_cursor = 1000 + 100000 * (int64_t)(s->shard + 2);
}
