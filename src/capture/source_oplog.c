/*
 * source_oplog: the oplog source (source.h over oplog.h), capture.mode
 * oplog (Debezium 1.9's oplog mode, debezium-format.md §1.4, §3.5): the
 * reader's items are the changes; no-ops, filtered operations and
 * partialTxn links are changes not to emit.
 */
#include <stdlib.h>

#include "capture/source.h"
#include "common/xalloc.h"

struct oplog_source {
    struct mcdc_source base; /* first: a struct mcdc_source * is a struct oplog_source * */
    struct oplog_reader *r;
    struct oplog_item item;   /* the last item: ch->ev and ch->pos point into it */
    struct oplog_held *held; /* filled at close (NULL: not wanted) */
};

static enum source_step oplog_source_next(struct mcdc_source *base, struct source_change *ch)
{
    struct oplog_source *s = (struct oplog_source *)base;

    source_change_reset(ch);
    switch (oplog_next(s->r, &s->item)) {
    case CAPTURE_EVENT:
        ch->emit = s->item.emit;
        return SOURCE_CHANGE;
    case CAPTURE_IDLE:
        return SOURCE_IDLE;
    case CAPTURE_ERROR:
    default:
        oplog_failure(s->r, &ch->fail, &ch->err);
        return SOURCE_FAILED;
    }
}

static bool oplog_source_start(struct mcdc_source *base, struct mcdc_position *pos)
{
    struct oplog_source *s = (struct oplog_source *)base;

    oplog_start_position(s->r, pos);
    return true;
}

static void oplog_source_close(struct mcdc_source *base)
{
    struct oplog_source *s = (struct oplog_source *)base;

    oplog_item_clear(&s->item);
    if (s->held != NULL)
        oplog_held_entries(s->r, s->held);
    oplog_destroy(s->r);
    free(s);
}

static const struct source_ops oplog_source_ops = {
    .name = "oplog",
    .next = oplog_source_next,
    .start_position = oplog_source_start,
    .close = oplog_source_close,
};

struct mcdc_source *source_oplog_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                                      const bson_t *query, const struct mcdc_position *from,
                                      struct oplog_held *held, struct resume_failure *fail,
                                      struct mcdc_error *err)
{
    struct oplog_reader *r = oplog_open(client, cfg, query, from, fail, err);
    struct oplog_source *s;

    if (r == NULL)
        return NULL;
    s = xzalloc_aligned(_Alignof(struct oplog_source), sizeof *s); /* bson_t members */
    s->base.ops = &oplog_source_ops;
    s->r = r;
    s->held = held;
    oplog_item_init(&s->item);
    s->base.ch.ev = &s->item.ev;
    s->base.ch.pos = &s->item.pos;
    source_change_reset(&s->base.ch);
    return &s->base;
}
