/*
 * metrics_http: /metrics, /health and /ready over libmicrohttpd (one
 * internal polling thread; the handlers only read atomics). See
 * metrics_http.h.
 */
#include "metrics/metrics_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/xalloc.h"
#include "metrics/metrics.h"

struct metrics_http {
    struct MHD_Daemon *d;
    int64_t ready_window_ms;
};

static char *text_dup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
                             const char *type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ret;

    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result probe(struct MHD_Connection *c, bool ok, const char *why)
{
    size_t n = strlen(why) + 2;
    char *body = xmalloc(n);

    memcpy(body, why, n - 2);
    body[n - 2] = '\n';
    body[n - 1] = '\0';
    return reply(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body, n - 1,
                 "text/plain; charset=utf-8");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req)
{
    struct metrics_http *h = cls;
    char why[512];
    size_t len;

    (void)version, (void)upload, (void)upload_size, (void)req;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text_dup("GET only\n"), 9, "text/plain");
    if (strcmp(url, "/metrics") == 0) {
        char *body = metrics_render(&len);
        return reply(c, MHD_HTTP_OK, body, len, "text/plain; version=0.0.4; charset=utf-8");
    }
    if (strcmp(url, "/health") == 0) {
        bool ok = metrics_healthy(why, sizeof why);
        return probe(c, ok, why);
    }
    if (strcmp(url, "/ready") == 0) {
        bool ok = metrics_ready(h->ready_window_ms, why, sizeof why);
        return probe(c, ok, why);
    }
    return reply(c, MHD_HTTP_NOT_FOUND, text_dup("not found: /metrics, /health, /ready\n"), 37,
                 "text/plain");
}

struct metrics_http *metrics_http_start(const char *bind_address, int port,
                                        int64_t ready_window_ms, int *bound_port,
                                        struct mcdc_error *err)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    struct metrics_http *h;
    const union MHD_DaemonInfo *info;

    memset(&ss, 0, sizeof ss);
    if (inet_pton(AF_INET, bind_address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, bind_address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        mcdc_error_set(err, MCDC_ERR_IO, 0,
                       "metrics.http.bind.address: '%s' is not an IPv4 or IPv6 address",
                       bind_address);
        return NULL;
    }
    h = xcalloc(1, sizeof *h);
    h->ready_window_ms = ready_window_ms;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)10, MHD_OPTION_END);
    if (h->d == NULL) {
        mcdc_error_set(err, MCDC_ERR_IO, 0, "metrics: cannot listen on %s:%d", bind_address,
                       port);
        free(h);
        return NULL;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    if (bound_port != NULL)
        *bound_port = info != NULL ? (int)info->port : port;
    return h;
}

void metrics_http_stop(struct metrics_http *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}
