/*
 * oplog_entry: what one oplog entry becomes (see oplog.h; debezium-format.md
 * §1.4, §3.5; mongo-sim-spec.md §5): a CRUD operation's event as Debezium
 * 1.9's oplog mode fills it, a transaction's operations (applyOps, partialTxn
 * chains walked back through prevOpTime, prepared transactions' commits)
 * one by one, the session id (stxnid) and the position after each item. The
 * cursor the entries come from is oplog.c's.
 *
 * Thread: the owning capture task.
 */
#include <string.h>

#include "capture/oplog_diff.h"
#include "capture/oplog_internal.h"
#include "common/xalloc.h"

static bool bad(struct oplog_reader *r, const char *what)
{
    char ts[64];
    snprintf(ts, sizeof ts, "Timestamp(%u, %u)", r->sec, r->ord);
    mcdc_error_set(&r->local, MCDC_ERR_ENCODE, 0, "oplog entry at %s: %s", ts, what);
    r->local_error = true;
    return false;
}

static bool view(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

/* Points dst at src's bytes. A static bson_t refers to itself, so views are
 * made in place, never copied by assignment. */
static void alias(bson_t *dst, const bson_t *src)
{
    bson_init_static(dst, bson_get_data(src), src->len);
}

/* SourceInfo.extractSessionTxnId@v1.9.8: an entry whose `h` is absent or 0
 * (MongoDB 4.2+) and that has txnNumber gets "<lsid uuid>:<txnNumber>"
 * (MongoUtil.getOplogSessionTransactionId); any other entry none. */
void oplog_entry_stxnid(const bson_t *entry, char *buf, size_t n)
{
    bson_iter_t it;
    bson_t lsid;

    buf[0] = '\0';
    if (bson_iter_init_find(&it, entry, "h") && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) != 0)
        return;
    if (view(entry, "lsid", &lsid) && bson_iter_init_find(&it, entry, "txnNumber") &&
        BSON_ITER_HOLDS_NUMBER(&it) && !oplog_stxnid(&lsid, bson_iter_as_int64(&it), buf, n))
        buf[0] = '\0';
}

/* Fills item->ev from a CRUD operation (a top-level entry or an applyOps
 * element). *emit false for anything but i/u/d. */
static bool fill_event(struct oplog_reader *r, const bson_t *op, struct oplog_item *item)
{
    struct mcdc_event *ev = &item->ev;
    bson_iter_t it;
    const char *o_letter, *ns, *dot;
    uint32_t ns_len;
    bson_t o, o2;

    event_init(ev);
    item->emit = false;
    if (!bson_iter_init_find(&it, op, "op") || !BSON_ITER_HOLDS_UTF8(&it))
        return bad(r, "no op");
    o_letter = bson_iter_utf8(&it, NULL);
    if (strcmp(o_letter, "i") && strcmp(o_letter, "u") && strcmp(o_letter, "d"))
        return true; /* n, c: nothing to emit */
    if (!bson_iter_init_find(&it, op, "ns") || !BSON_ITER_HOLDS_UTF8(&it))
        return bad(r, "no ns");
    ns = bson_iter_utf8(&it, &ns_len);
    dot = memchr(ns, '.', ns_len);
    if (dot == NULL)
        return bad(r, "ns without a collection");
    if (!view(op, "o", &o))
        return bad(r, "no o document");
    ev->db = ns;
    ev->db_len = (size_t)(dot - ns);
    ev->coll = dot + 1;
    ev->coll_len = ns_len - ev->db_len - 1;
    switch (o_letter[0]) {
    case 'i':
        ev->op = MCDC_OP_INSERT;
        alias(&ev->full_document, &o);
        ev->has_full_document = true;
        alias(&ev->document_key, &o);
        break;
    case 'u':
        if (!view(op, "o2", &o2))
            return bad(r, "update without o2");
        ev->op = MCDC_OP_UPDATE;
        alias(&ev->document_key, &o2);
        alias(&ev->oplog_filter, &o2);
        ev->has_oplog_filter = true;
        alias(&ev->oplog_patch, &o);
        ev->has_oplog_patch = true;
        if (!r->cfg->oplog_update_raw_diff) {
            if (r->has_decoded) {
                bson_destroy(&r->decoded);
                r->has_decoded = false;
            }
            switch (oplog_diff_to_v1(&o, &r->decoded, &r->local)) {
            case OPLOG_DIFF_DECODED:
                r->has_decoded = true;
                alias(&ev->oplog_patch, &r->decoded);
                break;
            case OPLOG_DIFF_MALFORMED:
                r->local_error = true;
                return false;
            case OPLOG_DIFF_NOT_V2:
            default:
                break;
            }
        }
        break;
    case 'd':
    default:
        ev->op = MCDC_OP_DELETE;
        alias(&ev->document_key, &o);
        alias(&ev->oplog_filter, &o);
        ev->has_oplog_filter = true;
        break;
    }
    if (!bson_iter_init_find(&it, &ev->document_key, "_id"))
        return bad(r, "operation without _id");
    ev->has_document_key = true;
    ev->has_cluster_time = true;
    ev->ts_sec = r->sec;
    ev->ts_inc = r->ord;
    ev->oplog_h = r->h;
    ev->oplog_has_h = r->has_h;
    item->emit = true;
    return true;
}

static void set_pos(struct oplog_reader *r, struct oplog_item *item, int64_t tord)
{
    position_clear(&item->pos);
    item->pos.sec = r->sec;
    item->pos.ord = r->ord;
    item->pos.oplog = true;
    item->pos.h = r->h;
    item->pos.has_h = r->has_h;
    item->pos.t = r->t;
    item->pos.has_t = r->has_t;
    item->pos.tord = tord;
}

static void push(bson_t ***arr, size_t *n, const bson_t *doc)
{
    *arr = xrealloc(*arr, (*n + 1) * sizeof **arr);
    (*arr)[(*n)++] = bson_copy(doc);
}

/* Appends the operations of an applyOps entry to r->ops. */
static bool take_ops(struct oplog_reader *r, const bson_t *entry)
{
    bson_iter_t it, ops;
    if (!bson_iter_init_find(&it, entry, "o") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &it) || !bson_iter_find(&it, "applyOps") ||
        !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &ops))
        return bad(r, "applyOps is not an array");
    while (bson_iter_next(&ops)) {
        bson_t op;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&ops))
            return bad(r, "applyOps element is not a document");
        bson_iter_document(&ops, &len, &data);
        if (!bson_init_static(&op, data, len))
            return bad(r, "applyOps element is not valid BSON");
        push(&r->ops, &r->n_ops, &op);
    }
    return true;
}

/* The committing entry r->entry: collects the chain (walking prevOpTime
 * back to Timestamp(0, 0)) and then its own operations. own_ops is false for
 * a commitTransaction entry, which carries none (its prepare entry does). */
static bool start_txn(struct oplog_reader *r, bool own_ops)
{
    bson_iter_t it, pt;
    const bson_t *cur = &r->entry;
    bson_t lsid;

    oplog_free_txn(r);
    for (;;) {
        uint32_t ps = 0, po = 0;
        if (bson_iter_init_find(&it, cur, "prevOpTime") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &pt) && bson_iter_find(&pt, "ts") &&
            BSON_ITER_HOLDS_TIMESTAMP(&pt))
            bson_iter_timestamp(&pt, &ps, &po);
        if (ps == 0 && po == 0)
            break;
        bson_t *prev = NULL;
        if (!oplog_fetch_entry(r, ps, po, &prev))
            return false;
        r->chain = xrealloc(r->chain, (r->n_chain + 1) * sizeof *r->chain);
        r->chain[r->n_chain++] = prev;
        cur = prev;
    }
    for (size_t i = r->n_chain; i > 0; i--)
        if (!take_ops(r, r->chain[i - 1]))
            return false;
    if (own_ops && !take_ops(r, &r->entry))
        return false;
    r->has_stxnid = false;
    if (view(&r->entry, "lsid", &lsid) && bson_iter_init_find(&it, &r->entry, "txnNumber"))
        r->has_stxnid = oplog_stxnid(&lsid, bson_iter_as_int64(&it), r->stxnid, sizeof r->stxnid);
    r->txn_open = true;
    r->next_op = 0;
    if (r->skip_tord > 0 && r->skip_sec == r->sec && r->skip_ord == r->ord)
        r->next_op = (size_t)r->skip_tord < r->n_ops ? (size_t)r->skip_tord : r->n_ops;
    r->skip_tord = 0;
    return true;
}

enum capture_status oplog_next_txn_op(struct oplog_reader *r, struct oplog_item *item)
{
    size_t i = r->next_op++;
    if (!fill_event(r, r->ops[i], item))
        return CAPTURE_ERROR;
    set_pos(r, item, (int64_t)i + 1);
    if (item->emit) {
        item->ev.oplog_tord = (int64_t)i + 1;
        item->ev.oplog_stxnid = r->has_stxnid ? r->stxnid : NULL;
        item->ev.oplog_txn_last = r->next_op == r->n_ops;
        if (r->has_stxnid) /* the offset too (SourceInfo.lastOffset@v1.9.8) */
            memcpy(item->pos.stxnid, r->stxnid, sizeof item->pos.stxnid);
    }
    if (r->next_op >= r->n_ops)
        r->txn_open = false;
    return CAPTURE_EVENT;
}

static bool holds_true(const bson_t *o, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, o, key) && bson_iter_as_bool(&it);
}

enum capture_status oplog_take_entry(struct oplog_reader *r, const bson_t *doc,
                                     struct oplog_item *item)
{
    bson_iter_t it;
    bson_t o;

    bson_destroy(&r->entry);
    bson_copy_to(doc, &r->entry);
    oplog_ts_of(&r->entry, "ts", &r->sec, &r->ord);
    r->has_h = bson_iter_init_find(&it, &r->entry, "h") && BSON_ITER_HOLDS_NUMBER(&it);
    r->h = r->has_h ? bson_iter_as_int64(&it) : 0;
    r->has_t = bson_iter_init_find(&it, &r->entry, "t") && BSON_ITER_HOLDS_NUMBER(&it);
    r->t = r->has_t ? bson_iter_as_int64(&it) : 0;
    if (r->skip_tord > 0 && (r->sec != r->skip_sec || r->ord != r->skip_ord))
        r->skip_tord = 0; /* the stored transaction entry was not the first one read */

    if (bson_iter_init_find(&it, &r->entry, "op") && BSON_ITER_HOLDS_UTF8(&it) &&
        !strcmp(bson_iter_utf8(&it, NULL), "c") && view(&r->entry, "o", &o) &&
        (bson_iter_init_find(&it, &o, "applyOps") ||
         bson_iter_init_find(&it, &o, "commitTransaction"))) {
        bool commit = !strcmp(bson_iter_key(&it), "commitTransaction");
        event_init(&item->ev);
        item->emit = false;
        /* partialTxn links and a prepared transaction's prepare entry are read
         * again through prevOpTime when their commit arrives (the committing
         * applyOps, or the commitTransaction of a prepared transaction; an
         * aborted one has no commit and so never produces events). The stored
         * position may move past them meanwhile: the commit entry, later in
         * the oplog, is what a restart reads again. */
        if (!commit && (holds_true(&o, "partialTxn") || holds_true(&o, "prepare"))) {
            set_pos(r, item, 0);
            return CAPTURE_EVENT;
        }
        if (!start_txn(r, !commit))
            return CAPTURE_ERROR;
        if (r->n_ops == 0) {
            set_pos(r, item, 0);
            return CAPTURE_EVENT;
        }
        if (r->next_op >= r->n_ops) { /* every operation was emitted before the restart */
            r->txn_open = false;
            set_pos(r, item, (int64_t)r->n_ops);
            return CAPTURE_EVENT;
        }
        return oplog_next_txn_op(r, item);
    }
    if (!fill_event(r, &r->entry, item))
        return CAPTURE_ERROR;
    /* A retryable write's entry carries its session (lsid, txnNumber): 1.9
     * gives it a stxnid too when the entry's `h` is absent or 0 (SourceInfo's
     * extractSessionTxnId), though it is no transaction (no tord, no
     * BEGIN/END); its offset carries the id as well (lastOffset). */
    r->has_stxnid = false;
    set_pos(r, item, 0);
    if (item->emit) {
        oplog_entry_stxnid(&r->entry, r->stxnid, sizeof r->stxnid);
        r->has_stxnid = r->stxnid[0] != '\0';
        item->ev.oplog_stxnid = r->has_stxnid ? r->stxnid : NULL;
        if (r->has_stxnid)
            memcpy(item->pos.stxnid, r->stxnid, sizeof item->pos.stxnid);
    }
    return CAPTURE_EVENT;
}
