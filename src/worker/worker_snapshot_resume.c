/*
 * worker_snapshot_resume: the capture task's side of a resumable initial
 * snapshot (snapshot.resumable; snapshot/progress.h): the stored progress
 * taken out of the stored position at setup, checked against the new plan
 * before the copy, and the position each `r` record carries.
 */
#include "worker/worker_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "snapshot/progress.h"
#include "snapshot/snapshot.h"

void worker_snapshot_progress_load(struct worker *w)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    char *member = NULL, *rest = NULL;

    free(w->snap_progress);
    w->snap_progress = NULL;
    if (w->stream_pos.extra_json == NULL || strstr(w->stream_pos.extra_json,
                                                   SNAPSHOT_PROGRESS_KEY) == NULL)
        return;
    if (!snapshot_progress_extract(w->stream_pos.extra_json, &member, &rest, &err)) {
        LOG_WARN("the stored position's snapshot progress is unreadable (%s); an interrupted "
                 "initial snapshot is redone whole",
                 err.msg);
        return;
    }
    if (member == NULL) {
        free(rest);
        return;
    }
    /* Never carried on: the post-snapshot position and the next attempt's
     * records get their own (or none). */
    free(w->stream_pos.extra_json);
    w->stream_pos.extra_json = rest;
    w->stream_pos.extra_shared = 0;
    if (!w->stream_pos.initsync)
        free(member); /* a complete snapshot's leftover: nothing to resume */
    else if (!w->cfg->snapshot_resumable) {
        LOG_INFO("the stored position holds the interrupted snapshot's progress but "
                 "snapshot.resumable is false: the initial snapshot is redone whole");
        free(member);
    } else {
        w->snap_progress = member;
    }
}

/* A copy retried in this process (a failed read): the progress this task
 * stored last is newer than the one read at setup. Only while streaming
 * resumes from the stored position (w->have_stored): the rows that progress
 * covers were read after that position, not after a newer start. */
static void refresh_progress(struct worker *w)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    const char *stored = pipeline_stored_json(w->pipe);
    char *member = NULL, *rest = NULL;

    if (w->snap_progress == NULL || !w->have_stored || stored == NULL ||
        strstr(stored, SNAPSHOT_PROGRESS_KEY) == NULL)
        return;
    if (snapshot_progress_extract(stored, &member, &rest, &err) && member != NULL) {
        free(w->snap_progress);
        w->snap_progress = member;
        member = NULL;
    }
    free(member);
    free(rest);
}

void worker_snapshot_resumable(struct worker *w, struct snapshot_plan *plan,
                               struct mcdc_position *during)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct snapshot_resume *r = NULL;
    char summary[256];
    bson_t *extra;

    plan->resumable = w->cfg->snapshot_resumable;
    if (!plan->resumable)
        return;
    refresh_progress(w);
    free(plan->progress_base);
    plan->progress_base = during->extra_json ? xstrdup(during->extra_json) : NULL;
    if (w->snap_progress == NULL)
        return;
    if (!snapshot_resume_parse(w->snap_progress, &r, &err) ||
        !snapshot_resume_check(plan, r, summary, sizeof summary, &err)) {
        LOG_WARN("the interrupted initial snapshot cannot be resumed: %s; it is redone whole, "
                 "documents already sent are sent again",
                 err.msg);
        snapshot_resume_free(r);
        return;
    }
    LOG_INFO("resuming the initial snapshot: %s", summary);
    snapshot_resume_free(plan->resume);
    plan->resume = r;
    /* Until the first record, the stored position keeps the stored progress:
     * the forced commit before the copy must not forget it. */
    extra = during->extra_json ? bson_new_from_json((const uint8_t *)during->extra_json, -1, NULL)
                               : bson_new();
    if (extra == NULL)
        extra = bson_new();
    BSON_APPEND_UTF8(extra, SNAPSHOT_PROGRESS_KEY, w->snap_progress);
    char *t = bson_as_canonical_extended_json(extra, NULL);
    free(during->extra_json);
    during->extra_json = xstrdup(t);
    during->extra_shared = 0;
    bson_free(t);
    bson_destroy(extra);
}
