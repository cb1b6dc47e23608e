/*
 * worker_oversize: what a capture task does under cursor.oversize.handling.mode
 * (capture/oversize.h): the split stage's server check before a stream opens,
 * and skip stubs logged, counted and moved past.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "capture/oversize.h"
#include "common/log.h"

enum phase worker_oversize_ready(struct worker *w)
{
    struct mcdc_error err = MCDC_ERROR_INIT;

    if (w->cfg->oversize_mode != MCDC_OVERSIZE_SPLIT || w->split_checked)
        return PHASE_OK;
    /* Debezium refuses the split mode on servers without the stage; so
     * does mongocdc, before the first stream, instead of letting the
     * aggregate fail with the server's "unrecognized stage" (40324). */
    if (!oversize_check_split_server(w->client, &err)) {
        w->err = err;
        return err.retriable ? PHASE_RETRY : PHASE_FATAL;
    }
    w->split_checked = true;
    return PHASE_OK;
}

/* "123 bytes", or "none" for a missing document. */
static void size_text(int64_t n, char *out, size_t size)
{
    if (n < 0)
        snprintf(out, size, "none");
    else
        snprintf(out, size, "%lld bytes", (long long)n);
}

enum phase worker_oversize_skipped(struct worker *w, const bson_t *doc,
                                   const struct mcdc_position *pos, int64_t full_size,
                                   int64_t before_size)
{
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = false;
    char what[300] = "?", id[200] = "unknown", full[32], before[32];
    const char *op = "?";
    bson_iter_t it;

    /* The stub has what the log needs: ns, documentKey, operationType (it
     * is no readable event: an insert without fullDocument). */
    event_init(&ev);
    (void)event_from_change(doc, &ev, &emit, &err);
    if (ev.db != NULL)
        snprintf(what, sizeof what, "%.*s.%.*s", (int)ev.db_len, ev.db, (int)ev.coll_len,
                 ev.coll ? ev.coll : "");
    worker_event_id(&ev, id, sizeof id);
    if (bson_iter_init_find(&it, doc, "operationType") && BSON_ITER_HOLDS_UTF8(&it))
        op = bson_iter_utf8(&it, NULL);
    size_text(full_size, full, sizeof full);
    size_text(before_size, before, sizeof before);
    w->oversize_skipped++;
    metrics_add(w->m, METRICS_EVENTS_OVERSIZE_SKIPPED, 1);
    LOG_WARN("skipping the %s of %s %s: fullDocument %s, fullDocumentBeforeChange %s, over "
             "cursor.oversize.skip.threshold %lld bytes (cursor.oversize.handling.mode skip; "
             "%llu skipped so far)",
             op, what, id, full, before, (long long)w->cfg->oversize_skip_threshold,
             (unsigned long long)w->oversize_skipped);
    return worker_pass_position(w, pos);
}
