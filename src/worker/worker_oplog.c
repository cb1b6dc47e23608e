/*
 * worker_oplog: the streaming phase of a capture task in capture.mode oplog
 * (Debezium 1.9's oplog mode, debezium-format.md §1.4, §3.5, §4.4): oplog
 * reader items -> encode -> sink, with no-ops, filtered operations and
 * partialTxn links advancing the position, as worker_stream does for change
 * events.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "capture/oplog.h"
#include "capture/source.h"
#include "common/log.h"

bool worker_uses_oplog(struct worker *w)
{
    bool stored = w->have_stored;
    if (w->cfg->capture_mode != MCDC_CAPTURE_OPLOG)
        return false;
    if (stored && !w->stream_pos.oplog) {
        if (!w->warned_mode) {
            w->warned_mode = true;
            LOG_WARN("capture.mode is oplog but the stored position of %s was written by change "
                     "streams: capture keeps using change streams, as Debezium 1.9 does. To "
                     "capture from the oplog, reconfigure capture.mode to a change_streams mode "
                     "(recommended) or remove the stored offsets of %s to start afresh",
                     w->rs, w->rs);
        }
        return false;
    }
    return true;
}

/* The entries the previous reader held back (read past the majority commit
 * point, never published): after a failover, say whether they were rolled
 * back (the entry is gone or has another term) at WARN, with the range. A
 * failed check is said at INFO: nothing was published from them either way. */
static void report_held(struct worker *w)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct oplog_held *h = &w->oplog_held;
    bool gone = false;

    if (!h->any)
        return;
    if (!oplog_held_rolled_back(w->client, h, &gone, &fail, &err))
        LOG_INFO("%s: cannot check whether the entries after Timestamp(%u, %u), held back as "
                 "not majority-committed, were rolled back: %s",
                 w->rs, h->sec, h->ord, err.msg);
    else if (gone)
        LOG_WARN("rollback on %s: the oplog entries from Timestamp(%u, %u) to Timestamp(%u, %u), "
                 "read but held back as not majority-committed, are no longer in the oplog: a "
                 "failover rolled them back. Nothing was published from them; capture continues "
                 "with the new primary's history",
                 w->rs, h->sec, h->ord, h->last_sec, h->last_ord);
    memset(h, 0, sizeof *h);
}

enum phase worker_oplog_open(struct worker *w, struct mcdc_source **out)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    enum phase ph;
    char d[128];
    bool from_stored = w->stream_pos.sec > 0;

    ph = worker_await_server(w);
    if (ph == PHASE_OK && from_stored)
        ph = worker_check_stored_time(w);
    if (ph != PHASE_OK)
        return ph;
    *out = source_oplog_open(w->client, w->cfg, w->has_oplog_query ? &w->oplog_query : NULL,
                             from_stored ? &w->stream_pos : NULL, &w->oplog_held, &fail, &err);
    if (*out == NULL)
        return worker_phase_from_failure(w, &fail, &err);
    report_held(w);
    /* Store where tailing starts before producing anything, so a restart
     * without acknowledged records resumes here, not at a later "now". */
    if (!from_stored)
        ph = worker_store_start(w, *out);
    resume_describe_position(&w->stream_pos, d, sizeof d);
    LOG_INFO("tailing local.oplog.rs of %s after %s%s", w->rs, d,
             w->stream_pos.tord > 0 ? " (inside its transaction)" : "");
    metrics_set_state(w->m, METRICS_STATE_STREAMING);
    return ph;
}
