/*
 * metrics_http: the HTTP listener of metrics.* options (libmicrohttpd, its
 * own thread): GET /metrics (text exposition 0.0.4), /health and /ready
 * (200 with "ok", 503 with the reason; for Kubernetes liveness/readiness
 * probes and systemd watchdogs alike).
 */
#ifndef MCDC_METRICS_METRICS_HTTP_H
#define MCDC_METRICS_METRICS_HTTP_H

#include <stdint.h>

#include "common/error.h"

struct metrics_http;

/*
 * Listens on bind_address (an IPv4 or IPv6 literal; metrics.http.bind.address)
 * and port (metrics.http.port; 0 lets the system choose). ready_window_ms is
 * metrics.ready.window.ms: /ready wants progress within it. *bound_port (may
 * be NULL) gets the port listened on. Returns NULL with err (domain IO) when
 * the address is not a literal or the socket cannot be bound.
 */
struct metrics_http *metrics_http_start(const char *bind_address, int port,
                                        int64_t ready_window_ms, int *bound_port,
                                        struct mcdc_error *err);

/* Stops the listener and frees it. NULL is a no-op. */
void metrics_http_stop(struct metrics_http *h);

#endif
