/*
 * source_stream: the change-stream source (source.h over capture.h): change
 * events with their positions, skip stubs, split reassembly, post-batch
 * resume tokens, and the operations a switch from oplog capture must not
 * emit again (debezium-format.md §3.4, §4.3, §4.4).
 */
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/oversize.h"
#include "capture/source.h"
#include "common/log.h"
#include "common/xalloc.h"

struct stream_source {
    struct mcdc_source base; /* first: a struct mcdc_source * is a struct stream_source * */
    struct capture *cap;
    struct mcdc_event ev;     /* the last change (views into its document) */
    struct mcdc_position pos; /* the last position yielded */
    /* Starting from a position stored by oplog capture: the operations at
     * skip_sec/skip_ord still to be passed without emitting them. */
    uint32_t skip_sec, skip_ord;
    int64_t skip_left;
};

/* pos = the resume token alone (its other members reset). */
static void set_token_position(struct mcdc_position *pos, const bson_t *token)
{
    position_clear(pos);
    bson_destroy(&pos->resume_token);
    bson_copy_to(token, &pos->resume_token);
    pos->has_resume_token = true;
}

/* A stored oplog position under a change_streams mode (§4.4): the stream
 * starts at its operation time (inclusive); the operations at that time
 * already emitted (the entry itself, or the first tord operations of its
 * transaction) are not emitted again, the rest of such a transaction is
 * (Debezium's $ne clusterTime would drop it). */
static void skip_emitted(struct stream_source *s, struct source_change *ch)
{
    struct mcdc_event *ev = ch->ev;

    if (s->skip_left > 0 && ev->has_cluster_time && ev->ts_sec == s->skip_sec &&
        ev->ts_inc == s->skip_ord) {
        s->skip_left--; /* emitted by oplog capture before the switch */
        ch->emit = false;
    } else if (s->skip_left > 0 && ev->has_cluster_time) {
        s->skip_left = 0;
    }
}

static enum source_step stream_event(struct stream_source *s, const bson_t *doc,
                                     struct source_change *ch)
{
    struct change_fields scratch;
    const struct change_fields *f = capture_fields(s->cap, doc, &scratch);

    ch->raw = doc;
    if (!capture_event_position_in(f, ch->pos)) {
        ch->fatal = true;
        mcdc_error_set(&ch->err, MCDC_ERR_MONGO, 0, "change event without a resume token");
        return SOURCE_FAILED;
    }
    if (oversize_stub_in(f, &ch->full_size, &ch->before_size))
        return SOURCE_OVERSIZE;
    ch->split = capture_last_was_split(s->cap, NULL);
    event_init(ch->ev);
    if (!event_from_change(doc, ch->ev, &ch->emit, &ch->err)) {
        mcdc_error_prefix(&ch->err, "unreadable change event");
        return SOURCE_UNREADABLE;
    }
    skip_emitted(s, ch);
    return SOURCE_CHANGE;
}

/* An empty batch: the post-batch resume token moves on while the captured
 * collections are idle; a new one is a position to pass. */
static enum source_step stream_idle(struct stream_source *s, struct source_change *ch)
{
    const bson_t *token = capture_resume_token(s->cap);

    if (token != NULL && !bson_empty(token) &&
        !(ch->pos->has_resume_token && bson_equal(token, &ch->pos->resume_token))) {
        set_token_position(ch->pos, token);
        ch->has_pos = true;
    }
    return SOURCE_IDLE;
}

static enum source_step stream_next(struct mcdc_source *base, struct source_change *ch)
{
    struct stream_source *s = (struct stream_source *)base;
    const bson_t *doc = NULL;

    source_change_reset(ch);
    switch (capture_next(s->cap, &doc)) {
    case CAPTURE_EVENT:
        return stream_event(s, doc, ch);
    case CAPTURE_IDLE:
        return stream_idle(s, ch);
    case CAPTURE_ERROR:
    default:
        capture_failure(s->cap, &ch->fail, &ch->err);
        return SOURCE_FAILED;
    }
}

static bool stream_start_position(struct mcdc_source *base, struct mcdc_position *pos)
{
    struct stream_source *s = (struct stream_source *)base;
    const bson_t *start = capture_resume_token(s->cap);

    if (start == NULL || bson_empty(start))
        return false;
    set_token_position(pos, start);
    set_token_position(&s->pos, start);
    return true;
}

static void stream_close(struct mcdc_source *base)
{
    struct stream_source *s = (struct stream_source *)base;

    capture_destroy(s->cap);
    position_clear(&s->pos);
    free(s);
}

static const struct source_ops stream_ops = {
    .name = "change stream",
    .next = stream_next,
    .start_position = stream_start_position,
    .close = stream_close,
};

struct mcdc_source *source_stream_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                                       const bson_t *pipeline, const struct mcdc_position *from,
                                       struct resume_failure *fail, struct mcdc_error *err)
{
    /* aligned: bson_t members */
    struct stream_source *s = xzalloc_aligned(_Alignof(struct stream_source), sizeof *s);
    char d[128];

    if (from != NULL && from->oplog && !from->has_resume_token && from->sec > 0) {
        s->skip_sec = (uint32_t)from->sec;
        s->skip_ord = (uint32_t)from->ord;
        s->skip_left = from->tord > 0 ? from->tord : 1;
        resume_describe_position(from, d, sizeof d);
        LOG_INFO("the stored position %s was written by oplog capture: switching to change "
                 "streams from its operation time, skipping the %lld operation(s) at that time "
                 "already emitted",
                 d, (long long)s->skip_left);
    }
    s->cap = capture_open(client, cfg, pipeline, from, fail, err);
    if (s->cap == NULL) {
        free(s);
        return NULL;
    }
    s->base.ops = &stream_ops;
    event_init(&s->ev);
    position_init(&s->pos);
    s->base.ch.ev = &s->ev;
    s->base.ch.pos = &s->pos;
    source_change_reset(&s->base.ch);
    if (from != NULL && from->has_resume_token)
        set_token_position(&s->pos, &from->resume_token);
    return &s->base;
}
