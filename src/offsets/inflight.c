/*
 * offsets/inflight: the ordered ack tracker (style.md §4.9, bottledwater's
 * position FIFO). Every produced record is appended with the position reached
 * once it is delivered; delivery reports may arrive out of order (different
 * partitions), and the committable position is that of the newest entry whose
 * predecessors are all acknowledged. That is the at-least-once contract: a
 * crash replays at most the unacknowledged tail, never skips a record.
 *
 * Data: a ring of entries addressed by a 64-bit sequence number; the cookie
 * handed to the sink is the sequence number, so the ring can grow without
 * invalidating cookies. Entry slots are reused: their position buffers
 * (resume-token bson_t, lsid, extra text) keep their capacity, so steady state
 * allocates nothing per event. All operations are O(1) amortised.
 *
 * Thread: worker (the owning capture task); no locks.
 */
#include "offsets/offsets.h"

#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

/* A position with reusable buffers: pos.lsid / pos.extra_json point into
 * lsid_buf / extra_buf (or are NULL), so a slot keeps its capacity. */
struct slotpos {
    struct mcdc_position pos;
    char *lsid_buf, *extra_buf;
    size_t lsid_cap, extra_cap;
};

struct entry {
    struct slotpos sp;
    bool has_pos; /* false: a record that does not move the position */
    bool acked;
    bool advance; /* a token-only position (inflight_advance), no record */
};

struct inflight {
    struct entry *ring;
    size_t cap;        /* power of two */
    uint64_t head_seq; /* sequence number of the oldest entry */
    uint64_t tail_seq; /* sequence number the next entry gets */
    size_t records;    /* record entries not yet popped */
    struct slotpos committed;
    bool dirty; /* committed changed since the last inflight_committable() */
};

static void sp_init(struct slotpos *sp)
{
    memset(sp, 0, sizeof *sp);
    position_init(&sp->pos);
}

static void sp_free(struct slotpos *sp)
{
    sp->pos.lsid = sp->pos.extra_json = NULL; /* views into the buffers */
    position_clear(&sp->pos);
    free(sp->lsid_buf);
    free(sp->extra_buf);
    memset(sp, 0, sizeof *sp);
}

static char *assign_str(char **buf, size_t *cap, const char *src)
{
    if (!src)
        return NULL;
    size_t n = strlen(src) + 1;
    if (n > *cap) {
        *buf = xrealloc(*buf, n);
        *cap = n;
    }
    memcpy(*buf, src, n);
    return *buf;
}

/* Copies src into sp reusing sp's buffers (no allocation once they are big enough). */
static void sp_assign(struct slotpos *sp, const struct mcdc_position *src)
{
    struct mcdc_position *dst = &sp->pos;
    dst->sec = src->sec;
    dst->ord = src->ord;
    dst->has_resume_token = src->has_resume_token;
    dst->initsync = src->initsync;
    dst->oplog = src->oplog;
    dst->h = src->h;
    dst->has_h = src->has_h;
    dst->tord = src->tord;
    memcpy(dst->stxnid, src->stxnid, strlen(src->stxnid) + 1);
    dst->txn_number = src->txn_number;
    bson_reinit(&dst->resume_token);
    if (src->has_resume_token)
        bson_concat(&dst->resume_token, &src->resume_token);
    dst->lsid = assign_str(&sp->lsid_buf, &sp->lsid_cap, src->lsid);
    dst->extra_json = assign_str(&sp->extra_buf, &sp->extra_cap, src->extra_json);
}

struct inflight *inflight_new(void)
{
    struct inflight *inf = xcalloc(1, sizeof *inf);
    inf->cap = 64;
    inf->ring = xcalloc(inf->cap, sizeof *inf->ring);
    for (size_t i = 0; i < inf->cap; i++)
        sp_init(&inf->ring[i].sp);
    inf->head_seq = inf->tail_seq = 1; /* cookie 0 would be NULL */
    sp_init(&inf->committed);
    return inf;
}

void inflight_destroy(struct inflight *inf)
{
    if (!inf)
        return;
    for (size_t i = 0; i < inf->cap; i++)
        sp_free(&inf->ring[i].sp);
    free(inf->ring);
    sp_free(&inf->committed);
    free(inf);
}

static struct entry *slot(struct inflight *inf, uint64_t seq)
{
    return &inf->ring[seq & (inf->cap - 1)];
}

/* Doubles the ring. Rare (the sink's bounded queue bounds the window), so the
 * live entries are simply copied. */
static void grow(struct inflight *inf)
{
    size_t ncap = inf->cap * 2;
    struct entry *nring = xcalloc(ncap, sizeof *nring);
    for (size_t i = 0; i < ncap; i++)
        sp_init(&nring[i].sp);
    for (uint64_t s = inf->head_seq; s < inf->tail_seq; s++) {
        struct entry *from = slot(inf, s), *to = &nring[s & (ncap - 1)];
        to->has_pos = from->has_pos;
        to->acked = from->acked;
        to->advance = from->advance;
        sp_assign(&to->sp, &from->sp.pos);
    }
    for (size_t i = 0; i < inf->cap; i++)
        sp_free(&inf->ring[i].sp);
    free(inf->ring);
    inf->ring = nring;
    inf->cap = ncap;
}

static struct entry *push(struct inflight *inf)
{
    if (inf->tail_seq - inf->head_seq == inf->cap)
        grow(inf);
    return slot(inf, inf->tail_seq++);
}

void *inflight_add(struct inflight *inf, const struct mcdc_position *pos)
{
    uint64_t seq = inf->tail_seq;
    struct entry *e = push(inf);
    e->acked = false;
    e->advance = false;
    e->has_pos = pos != NULL;
    if (pos)
        sp_assign(&e->sp, pos);
    inf->records++;
    return (void *)(uintptr_t)seq;
}

void inflight_ack(struct inflight *inf, void *cookie)
{
    uint64_t seq = (uint64_t)(uintptr_t)cookie;
    if (seq < inf->head_seq || seq >= inf->tail_seq) {
        /* A cookie this tracker never issued or already popped: a wiring bug. */
        LOG_ERROR("inflight: unknown cookie %llu (window %llu..%llu)", (unsigned long long)seq,
                  (unsigned long long)inf->head_seq, (unsigned long long)inf->tail_seq);
        return;
    }
    slot(inf, seq)->acked = true;
}

void inflight_advance(struct inflight *inf, const struct mcdc_position *pos)
{
    if (!pos)
        return;
    if (inf->head_seq == inf->tail_seq) {
        sp_assign(&inf->committed, pos);
        inf->dirty = true;
        return;
    }
    /* Behind records still in flight: queue it, replacing a queued advance so a
     * long stall with idle post-batch tokens keeps one entry, not one per batch. */
    struct entry *last = slot(inf, inf->tail_seq - 1);
    if (!last->advance)
        last = push(inf);
    last->acked = true;
    last->advance = true;
    last->has_pos = true;
    sp_assign(&last->sp, pos);
}

const struct mcdc_position *inflight_committable(struct inflight *inf)
{
    struct entry *newest = NULL;
    while (inf->head_seq < inf->tail_seq) {
        struct entry *e = slot(inf, inf->head_seq);
        if (!e->acked)
            break;
        if (e->has_pos)
            newest = e;
        if (!e->advance)
            inf->records--;
        inf->head_seq++;
    }
    /* The popped slots are not overwritten before the next push, so newest is
     * still intact here. */
    if (newest) {
        sp_assign(&inf->committed, &newest->sp.pos);
        inf->dirty = true;
    }
    if (!inf->dirty)
        return NULL;
    inf->dirty = false;
    return &inf->committed.pos;
}

size_t inflight_pending(const struct inflight *inf)
{
    return inf->records;
}
