/*
 * offsets/position: a stream position's Kafka Connect offset value
 * (debezium-format.md §4.2); the position itself is event/position.h.
 *
 * Written value, compact JSON, keys in this order:
 *   sec, ord                 clusterTime seconds/increment (-1 when only a token is known)
 *   h, tord                  oplog positions only (1.9 `h`, transaction order when > 0)
 *   stxnid                   1.9 oplog session id, when the position's entry had one
 *   initsync: true           only while the initial snapshot runs
 *   resume_token             Base64 of the BSON bytes of the whole token document (2.7+)
 *   lsid, txnNumber          when the last event was in a transaction
 *   <extra keys>             transaction / incremental-snapshot keys, kept verbatim
 *   mongocdc_capture_mode    "oplog" or "change_streams": which capture mode wrote it
 *                            (design.md §9: an oplog position migrates to a change
 *                            stream, a change-stream position is never downgraded)
 *
 * Reading follows Debezium's loader (MongoDbOffsetContext.Loader,
 * lastResumeTokenDoc): resume_token is first decoded as Base64 → BSON; on any
 * failure it is the old (≤2.6) hex `_data` string and becomes {"_data": s}.
 * Without mongocdc_capture_mode (a value written by Debezium), its shape
 * classifies it (§4.4): a resume token means change streams; no token means
 * an oplog position (1.x: sec, ord, h, where 1.9 writes "h":null for entries
 * without `h`, MongoDB 4.4+). `h` is written as null when the entry had none.
 *
 * Thread: any (no shared state).
 */
#include "offsets/offsets.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/base64.h"
#include "common/xalloc.h"
#include "offsets/offsets_internal.h"

#define CAPTURE_MODE_KEY "mongocdc_capture_mode"

static void key(struct jbuf *b, const char *k)
{
    jbuf_putc(b, ',');
    jbuf_str(b, k, strlen(k));
    jbuf_putc(b, ':');
}

/* The `_data` string of a resume token, or NULL. */
static const char *token_data(const bson_t *token, uint32_t *len)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, token, "_data") || !BSON_ITER_HOLDS_UTF8(&it))
        return NULL;
    return bson_iter_utf8(&it, len);
}

static char *to_json(const struct mcdc_position *pos, bool v19)
{
    struct jbuf b;
    int64_t sec = pos->sec, ord = pos->ord;
    uint64_t t;
    if (v19 && sec <= 0 && (t = position_time(pos)) != 0) {
        /* A token-only position (a post-batch token) carries its time in the
         * 1.9 layout: 1.9 never wrote -1, and reads Timestamp(-1, -1) as
         * older than the oplog, which would make it take a new snapshot
         * (debezium-format.md §4.4, the 1.9 snapshot decision). */
        sec = (int64_t)(t >> 32);
        ord = (int64_t)(t & 0xffffffffu);
    }
    jbuf_init(&b);
    jbuf_puts(&b, "{\"sec\":");
    jbuf_i64(&b, sec);
    key(&b, "ord");
    jbuf_i64(&b, ord);
    if (pos->oplog || v19) {
        /* 1.9 writes "h" for every position, null for change streams. */
        key(&b, "h");
        if (pos->has_h)
            jbuf_i64(&b, pos->h);
        else
            jbuf_puts(&b, "null");
    }
    if (pos->oplog) {
        if (pos->tord > 0) {
            key(&b, "tord");
            jbuf_i64(&b, pos->tord);
        }
    }
    if (pos->stxnid[0] != '\0') {
        key(&b, "stxnid");
        jbuf_str(&b, pos->stxnid, strlen(pos->stxnid));
    }
    if (pos->initsync) {
        key(&b, "initsync");
        jbuf_puts(&b, "true");
    }
    if (pos->has_resume_token) {
        uint32_t dlen = 0;
        const char *data = v19 ? token_data(&pos->resume_token, &dlen) : NULL;
        key(&b, "resume_token");
        if (data != NULL) {
            /* ≤2.6 form: the `_data` hex string (1.9 hands it to the server as
             * {_data: s}; Base64 there fails with FailedToParse). */
            jbuf_str(&b, data, dlen);
        } else {
            char *b64 =
                mcdc_base64_encode(bson_get_data(&pos->resume_token), pos->resume_token.len);
            jbuf_str(&b, b64, strlen(b64));
            free(b64);
        }
    }
    if (pos->lsid) {
        key(&b, "lsid");
        jbuf_str(&b, pos->lsid, strlen(pos->lsid));
        key(&b, "txnNumber");
        jbuf_i64(&b, pos->txn_number);
    }
    if (pos->extra_json) {
        /* Re-rendered through libbson so a hand-made extra text cannot break the object. */
        bson_t *extra = bson_new_from_json((const uint8_t *)pos->extra_json, -1, NULL);
        if (extra) {
            bool first = false;
            jbuf_bson_members(&b, extra, &first);
            bson_destroy(extra);
        }
    }
    key(&b, CAPTURE_MODE_KEY);
    jbuf_puts(&b, pos->oplog ? "\"oplog\"" : "\"change_streams\"");
    jbuf_putc(&b, '}');
    return jbuf_steal(&b);
}

char *position_to_json(const struct mcdc_position *pos)
{
    return to_json(pos, false);
}

char *position_to_json_dialect(const struct mcdc_position *pos, enum mcdc_dialect dialect)
{
    return to_json(pos, dialect == MCDC_DIALECT_1_9);
}

const char *offset_writer_name(enum offset_writer w)
{
    switch (w) {
    case OFFSET_WRITER_DEBEZIUM_1X:
        return "Debezium 1.x";
    case OFFSET_WRITER_DEBEZIUM_2X_3X:
        return "Debezium 2.x-3.x";
    case OFFSET_WRITER_MONGOCDC:
    default:
        return "mongocdc";
    }
}

enum offset_writer offset_value_writer(const char *value_json)
{
    bson_t *doc = bson_new_from_json((const uint8_t *)value_json, -1, NULL);
    bson_iter_t it;
    enum offset_writer w = OFFSET_WRITER_MONGOCDC;
    if (doc == NULL)
        return w;
    if (bson_iter_init_find(&it, doc, CAPTURE_MODE_KEY))
        w = OFFSET_WRITER_MONGOCDC;
    else if (bson_iter_init_find(&it, doc, "h"))
        w = OFFSET_WRITER_DEBEZIUM_1X;
    else
        w = OFFSET_WRITER_DEBEZIUM_2X_3X;
    bson_destroy(doc);
    return w;
}

static bool get_int(const bson_iter_t *it, int64_t *out)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        *out = bson_iter_int32(it);
        return true;
    case BSON_TYPE_INT64:
        *out = bson_iter_int64(it);
        return true;
    case BSON_TYPE_DOUBLE: {
        /* Only an integral double within int64 range: casting anything else is
         * undefined behaviour (found by fuzz_offsets). */
        double d = bson_iter_double(it);
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != (double)(int64_t)d)
            return false;
        *out = (int64_t)d;
        return true;
    }
    default:
        return false;
    }
}

/* Debezium's lastResumeTokenDoc(): Base64 of BSON, else the old hex `_data` string. */
static void parse_token(const char *s, uint32_t n, bson_t *out)
{
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    bson_t tmp;
    if (mcdc_base64_decode(s, n, &raw, &raw_len) && bson_init_static(&tmp, raw, raw_len) &&
        bson_validate(&tmp, BSON_VALIDATE_NONE, NULL)) {
        bson_concat(out, &tmp);
    } else {
        BSON_APPEND_UTF8(out, "_data", s);
    }
    free(raw);
}

static bool bad(struct mcdc_error *err, const char *k)
{
    return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "offset value: \"%s\" has the wrong type", k);
}

bool position_from_bson(const bson_t *doc, struct mcdc_position *pos, struct mcdc_error *err)
{
    struct mcdc_position p;
    position_init(&p);
    bson_t extra = BSON_INITIALIZER;
    bool h_set = false, mode_set = false, ok = false;
    static const char *const known[] = {"sec",    "ord",           "tord",         "txnNumber",
                                        "h",      "initsync",      "resume_token", "lsid",
                                        "stxnid", CAPTURE_MODE_KEY};
    unsigned seen = 0;
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "offset value: not a document");
        goto cleanup;
    }
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bson_type_t t = bson_iter_type(&it);
        for (unsigned i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(k, known[i]))
                continue;
            if (seen & (1u << i)) {
                mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                               "offset value: duplicate key \"%s\" (which one is meant is "
                               "unknowable; refusing it)",
                               k);
                goto cleanup;
            }
            seen |= 1u << i;
        }
        if (!strcmp(k, "sec") || !strcmp(k, "ord") || !strcmp(k, "tord") ||
            !strcmp(k, "txnNumber")) {
            int64_t v;
            if (!get_int(&it, &v)) {
                bad(err, k);
                goto cleanup;
            }
            if ((k[0] == 's' || (k[0] == 'o' && k[1] == 'r')) && (v < -1 || v > UINT32_MAX)) {
                mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                               "offset value: \"%s\" is %" PRId64
                               ", outside an unsigned 32-bit clusterTime field (-1 = unknown)",
                               k, v);
                goto cleanup;
            }
            if (k[0] == 's')
                p.sec = v;
            else if (k[0] == 'o')
                p.ord = v;
            else if (k[0] == 't' && k[1] == 'o')
                p.tord = v;
            else
                p.txn_number = v;
        } else if (!strcmp(k, "h")) {
            if (t != BSON_TYPE_NULL) {
                if (!get_int(&it, &p.h)) {
                    bad(err, k);
                    goto cleanup;
                }
                h_set = true;
            }
        } else if (!strcmp(k, "initsync")) {
            if (t == BSON_TYPE_BOOL)
                p.initsync = bson_iter_bool(&it);
            else if (t == BSON_TYPE_UTF8)
                p.initsync = !strcmp(bson_iter_utf8(&it, NULL), "true");
            else if (t != BSON_TYPE_NULL) {
                bad(err, k);
                goto cleanup;
            }
        } else if (!strcmp(k, "resume_token")) {
            if (t == BSON_TYPE_UTF8) {
                uint32_t n = 0;
                const char *s = bson_iter_utf8(&it, &n);
                parse_token(s, n, &p.resume_token);
                p.has_resume_token = true;
            } else if (t == BSON_TYPE_DOCUMENT) {
                bson_t sub;
                const uint8_t *data;
                uint32_t len;
                bson_iter_document(&it, &len, &data);
                if (bson_init_static(&sub, data, len))
                    bson_concat(&p.resume_token, &sub);
                p.has_resume_token = true;
            } else if (t != BSON_TYPE_NULL) {
                bad(err, k);
                goto cleanup;
            }
        } else if (!strcmp(k, "lsid")) {
            if (t == BSON_TYPE_UTF8) {
                p.lsid = xstrdup(bson_iter_utf8(&it, NULL));
            } else if (t != BSON_TYPE_NULL) {
                bad(err, k);
                goto cleanup;
            }
        } else if (!strcmp(k, "stxnid")) {
            /* An over-long value (no real lsid gives one) is kept verbatim in the
             * extra keys rather than cut. */
            uint32_t n = 0;
            const char *s = t == BSON_TYPE_UTF8 ? bson_iter_utf8(&it, &n) : NULL;
            if (s != NULL && n < sizeof p.stxnid)
                memcpy(p.stxnid, s, (size_t)n + 1);
            else if (s != NULL)
                bson_append_iter(&extra, k, -1, &it);
            else if (t != BSON_TYPE_NULL) {
                bad(err, k);
                goto cleanup;
            }
        } else if (!strcmp(k, CAPTURE_MODE_KEY)) {
            if (t != BSON_TYPE_UTF8) {
                bad(err, k);
                goto cleanup;
            }
            p.oplog = !strcmp(bson_iter_utf8(&it, NULL), "oplog");
            mode_set = true;
        } else {
            bson_append_iter(&extra, k, -1, &it);
        }
    }
    if (p.has_resume_token && bson_empty(&p.resume_token))
        p.has_resume_token = false;
    if (!p.has_resume_token && (p.sec <= 0 || p.ord < 0)) {
        /* Without a token, only a clusterTime can place the stream; a value with neither is
         * not "no offset" and must not turn into "stream from now" (that would skip the
         * snapshot and lose every existing document). */
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                       "offset value has no usable position: no resume_token and no valid "
                       "sec/ord (sec %" PRId64 ", ord %" PRId64
                       "); remove the entry to start over per snapshot.mode",
                       p.sec, p.ord);
        goto cleanup;
    }
    /* Without the marker (a value Debezium wrote) the shape tells: a resume
     * token is a change-stream position; no token is an oplog position, with
     * `h` a number (MongoDB < 4.4) or null/absent (1.9 on 4.4+ writes "h":null;
     * 2.0-2.1 read such a value as an oplog-era position too, §4.4). */
    p.has_h = h_set;
    if (!mode_set)
        p.oplog = !p.has_resume_token;
    p.writer = mode_set                ? OFFSET_WRITER_MONGOCDC
               : (seen & (1u << 4)) != 0 ? OFFSET_WRITER_DEBEZIUM_1X
                                         : OFFSET_WRITER_DEBEZIUM_2X_3X;
    if (!bson_empty(&extra)) {
        struct jbuf b;
        bool first = true;
        jbuf_init(&b);
        jbuf_putc(&b, '{');
        jbuf_bson_members(&b, &extra, &first);
        jbuf_putc(&b, '}');
        p.extra_json = jbuf_steal(&b);
    }
    position_move(pos, &p);
    ok = true;
cleanup:
    bson_destroy(&extra);
    if (!ok)
        position_clear(&p);
    return ok;
}

bool position_from_json(const char *json, struct mcdc_position *pos, struct mcdc_error *err)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    if (!doc)
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "offset value is not JSON: %s",
                              berr.message);
    bool ok = position_from_bson(doc, pos, err);
    bson_destroy(doc);
    return ok;
}
