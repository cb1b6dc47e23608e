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
 * Extra text: a position's extra_json is kept as a shared, reference-counted
 * head (its first extra_shared bytes, the hint the position gives) and a
 * tail of its own. Consecutive positions of an incremental snapshot repeat
 * the queued-collections list (up to INCR_OFFSET_MAX_BYTES) and differ only
 * in the last key: one copy of the list serves every record in flight,
 * instead of one per record (thousands of records in flight times the list
 * was gigabytes). The whole text is put together only for the committable
 * position.
 *
 * Thread: worker (the owning capture task); no locks.
 */
#include "offsets/offsets.h"

#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

/* A shared head of extra texts. */
struct shared_text {
    size_t refs, len;
    char text[];
};

static void shared_put(struct shared_text *t)
{
    if (t != NULL && --t->refs == 0)
        free(t);
}

/* A position with reusable buffers: pos.lsid points into lsid_buf (or is
 * NULL). In ring entries the extra text is head (shared, may be NULL) +
 * tail_buf and pos.extra_json is NULL; in the committed position it is
 * whole in extra_buf, pos.extra_json pointing to it. */
struct slotpos {
    struct mcdc_position pos;
    char *lsid_buf, *extra_buf, *tail_buf;
    size_t lsid_cap, extra_cap, tail_cap;
    struct shared_text *head;
    bool has_extra;
};

struct entry {
    struct slotpos sp;
    bool has_pos; /* false: a record that does not move the position */
    bool acked;
    bool advance; /* a token-only position (inflight_advance), no record */
};

struct inflight {
    struct shared_text *last_head; /* the newest head (a reference held) */
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
    free(sp->tail_buf);
    shared_put(sp->head);
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

static void assign_bytes(char **buf, size_t *cap, const char *src, size_t n)
{
    if (n + 1 > *cap) {
        *buf = xrealloc(*buf, n + 1);
        *cap = n + 1;
    }
    memcpy(*buf, src, n);
    (*buf)[n] = '\0';
}

/* The extra text of a ring entry: src's, as a head shared with the newest
 * one when src starts with it, else a new head of src's first
 * src->extra_shared bytes (kept as the newest), and the rest as the tail. */
static void sp_set_extra(struct inflight *inf, struct slotpos *sp, const struct mcdc_position *src)
{
    const char *x = src->extra_json;
    size_t n, h;
    struct shared_text *head = NULL;

    sp->has_extra = x != NULL;
    if (x == NULL) {
        shared_put(sp->head);
        sp->head = NULL;
        return;
    }
    n = strlen(x);
    h = src->extra_shared <= n ? src->extra_shared : 0;
    if (inf->last_head != NULL && inf->last_head->len <= n &&
        memcmp(inf->last_head->text, x, inf->last_head->len) == 0) {
        head = inf->last_head;
    } else if (h > 0) {
        head = xmalloc(sizeof *head + h + 1);
        head->refs = 1; /* the tracker's */
        head->len = h;
        memcpy(head->text, x, h);
        head->text[h] = '\0';
        shared_put(inf->last_head);
        inf->last_head = head;
    }
    if (head != NULL)
        head->refs++;
    shared_put(sp->head);
    sp->head = head;
    h = head ? head->len : 0;
    assign_bytes(&sp->tail_buf, &sp->tail_cap, x + h, n - h);
}

/* The whole extra text of a ring entry into dst's extra_buf. */
static void sp_join_extra(struct slotpos *dst, const struct slotpos *from)
{
    size_t h = from->head ? from->head->len : 0, t = strlen(from->tail_buf);
    if (h + t + 1 > dst->extra_cap) {
        dst->extra_buf = xrealloc(dst->extra_buf, h + t + 1);
        dst->extra_cap = h + t + 1;
    }
    if (h)
        memcpy(dst->extra_buf, from->head->text, h);
    memcpy(dst->extra_buf + h, from->tail_buf, t + 1);
    dst->pos.extra_json = dst->extra_buf;
}

/* Copies src into sp reusing sp's buffers (no allocation once they are big
 * enough); the extra text is left to the caller (sp_set_extra for a ring
 * entry, sp_join_extra or assign_str for the committed position). */
static void sp_assign_base(struct slotpos *sp, const struct mcdc_position *src)
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
    dst->extra_json = NULL;
    dst->extra_shared = 0;
}

/* A ring entry from a position. */
static void sp_assign(struct inflight *inf, struct slotpos *sp, const struct mcdc_position *src)
{
    sp_assign_base(sp, src);
    sp_set_extra(inf, sp, src);
}

/* The committed position from a position (inflight_advance with nothing in flight). */
static void sp_assign_whole(struct slotpos *sp, const struct mcdc_position *src)
{
    sp_assign_base(sp, src);
    sp->pos.extra_json = assign_str(&sp->extra_buf, &sp->extra_cap, src->extra_json);
}

/* The committed position from a ring entry. */
static void sp_assign_from_entry(struct slotpos *dst, const struct slotpos *from)
{
    sp_assign_base(dst, &from->pos);
    if (from->has_extra)
        sp_join_extra(dst, from);
}

struct inflight *inflight_new(void)
{
    /* aligned: entries and the committed slot hold a bson_t (the resume token) */
    struct inflight *inf = xzalloc_aligned(_Alignof(struct inflight), sizeof *inf);
    inf->cap = 64;
    inf->ring = xzalloc_aligned(_Alignof(struct entry), inf->cap * sizeof *inf->ring);
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
    shared_put(inf->last_head);
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
    struct entry *nring = xzalloc_aligned(_Alignof(struct entry), ncap * sizeof *nring);
    for (size_t i = 0; i < ncap; i++)
        sp_init(&nring[i].sp);
    for (uint64_t s = inf->head_seq; s < inf->tail_seq; s++) {
        struct entry *from = slot(inf, s), *to = &nring[s & (ncap - 1)];
        to->has_pos = from->has_pos;
        to->acked = from->acked;
        to->advance = from->advance;
        /* the entry moves whole: its head reference and its tail */
        sp_assign_base(&to->sp, &from->sp.pos);
        to->sp.has_extra = from->sp.has_extra;
        to->sp.head = from->sp.head;
        from->sp.head = NULL;
        if (from->sp.has_extra)
            assign_bytes(&to->sp.tail_buf, &to->sp.tail_cap, from->sp.tail_buf,
                         strlen(from->sp.tail_buf));
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
    if (pos) {
        sp_assign(inf, &e->sp, pos);
    } else {
        shared_put(e->sp.head); /* no position: hold no list */
        e->sp.head = NULL;
    }
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
        sp_assign_whole(&inf->committed, pos);
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
    sp_assign(inf, &last->sp, pos);
}

const struct mcdc_position *inflight_committable(struct inflight *inf)
{
    struct entry *newest = NULL;
    uint64_t first = inf->head_seq;
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
        sp_assign_from_entry(&inf->committed, &newest->sp);
        inf->dirty = true;
    }
    /* Popped entries let go of their shared heads (a finished snapshot's
     * list is freed once no record in flight needs it). */
    for (uint64_t q = first; q < inf->head_seq; q++) {
        struct entry *e = slot(inf, q);
        shared_put(e->sp.head);
        e->sp.head = NULL;
        e->sp.has_extra = false;
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
