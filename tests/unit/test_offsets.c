/* Unit tests for offsets: in-flight tracker, offset values (debezium-format.md
 * §4.2), the file store and the Kafka store against librdkafka's mock cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bson/bson.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/xalloc.h"
#include "common/log.h"
#include "offsets/offsets.h"

/* A position with a resume token {_data: "<hex>"} and sec/ord. */
static void make_pos(struct mcdc_position *pos, int64_t sec, int64_t ord, const char *data)
{
    position_init(pos);
    pos->sec = sec;
    pos->ord = ord;
    if (data) {
        BSON_APPEND_UTF8(&pos->resume_token, "_data", data);
        pos->has_resume_token = true;
    }
}

static const char *token_data(const struct mcdc_position *pos)
{
    bson_iter_t it;
    if (!pos->has_resume_token || !bson_iter_init_find(&it, &pos->resume_token, "_data"))
        return NULL;
    return bson_iter_utf8(&it, NULL);
}

/* ---- inflight ---- */

/* Extra texts sharing a long head (an incremental snapshot's queued list)
 * come back whole, for every entry, across a ring growth, a queue change
 * (a new head) and records without a position. */
static void inflight_shared_extra_heads_come_back_whole(void **state)
{
    (void)state;
    struct inflight *inf = inflight_new();
    const size_t n = 300; /* past the initial ring of 64: it grows */
    void **cookies = calloc(n, sizeof *cookies);
    char head_a[3000], head_b[3000], text[4000];
    memset(head_a, 'a', sizeof head_a - 1);
    head_a[sizeof head_a - 1] = '\0';
    memset(head_b, 'b', sizeof head_b - 1);
    head_b[sizeof head_b - 1] = '\0';
    head_a[0] = head_b[0] = '{';
    for (size_t i = 0; i < n; i++) {
        struct mcdc_position p;
        make_pos(&p, 200, (int64_t)i, NULL);
        const char *head = i < n / 2 ? head_a : head_b;
        snprintf(text, sizeof text, "%s, \"k\" : %zu }", head, i);
        p.extra_json = strdup(text);
        p.extra_shared = i % 3 == 0 ? strlen(head) : 0; /* a hint or none */
        if (i % 7 == 0) /* a record without a position, delivered at once */
            inflight_ack(inf, inflight_add(inf, NULL));
        cookies[i] = inflight_add(inf, &p);
        position_clear(&p);
    }
    size_t checked = 0;
    for (size_t i = 0; i < n; i++) {
        inflight_ack(inf, cookies[i]);
        if (i % 37 != 0 && i + 1 != n)
            continue;
        const struct mcdc_position *c = inflight_committable(inf);
        assert_non_null(c);
        assert_int_equal(c->ord, (int64_t)i);
        checked++;
        snprintf(text, sizeof text, "%s, \"k\" : %lld }", c->ord < (int64_t)n / 2 ? head_a : head_b,
                 (long long)c->ord);
        assert_string_equal(c->extra_json, text);
    }
    assert_true(checked >= 9);
    free(cookies);
    inflight_destroy(inf);
}

static void inflight_in_order_acks_commit_each(void **state)
{
    (void)state;
    struct inflight *inf = inflight_new();
    struct mcdc_position p1, p2;
    make_pos(&p1, 100, 1, "82A1");
    make_pos(&p2, 100, 2, "82A2");
    assert_null(inflight_committable(inf));
    void *c1 = inflight_add(inf, &p1);
    void *c2 = inflight_add(inf, &p2);
    assert_non_null(c1);
    assert_ptr_not_equal(c1, c2);
    assert_int_equal(inflight_pending(inf), 2);
    assert_null(inflight_committable(inf));
    inflight_ack(inf, c1);
    const struct mcdc_position *c = inflight_committable(inf);
    assert_non_null(c);
    assert_int_equal(c->ord, 1);
    assert_string_equal(token_data(c), "82A1");
    assert_null(inflight_committable(inf)); /* nothing new since */
    inflight_ack(inf, c2);
    c = inflight_committable(inf);
    assert_non_null(c);
    assert_int_equal(c->ord, 2);
    assert_int_equal(inflight_pending(inf), 0);
    position_clear(&p1);
    position_clear(&p2);
    inflight_destroy(inf);
}

static void inflight_ack_out_of_order_commits_only_prefix(void **state)
{
    (void)state;
    struct inflight *inf = inflight_new();
    struct mcdc_position p;
    void *c[4];
    for (int i = 0; i < 4; i++) {
        make_pos(&p, 200, i + 1, NULL);
        c[i] = inflight_add(inf, &p);
        position_clear(&p);
    }
    inflight_ack(inf, c[2]);
    inflight_ack(inf, c[1]);
    assert_null(inflight_committable(inf)); /* record 0 still out */
    inflight_ack(inf, c[0]);
    const struct mcdc_position *got = inflight_committable(inf);
    assert_non_null(got);
    assert_int_equal(got->ord, 3); /* 0,1,2 done; 3 pending */
    assert_int_equal(inflight_pending(inf), 1);
    inflight_ack(inf, c[3]);
    got = inflight_committable(inf);
    assert_int_equal(got->ord, 4);
    inflight_destroy(inf);
}

static void inflight_record_without_position_keeps_previous(void **state)
{
    (void)state;
    struct inflight *inf = inflight_new();
    struct mcdc_position p;
    make_pos(&p, 300, 7, "T7");
    void *a = inflight_add(inf, &p);
    void *b = inflight_add(inf, NULL); /* e.g. a tombstone after its delete */
    inflight_ack(inf, a);
    inflight_ack(inf, b);
    const struct mcdc_position *got = inflight_committable(inf);
    assert_non_null(got);
    assert_int_equal(got->ord, 7);
    assert_string_equal(token_data(got), "T7");
    position_clear(&p);
    inflight_destroy(inf);
}

static void inflight_advance_while_idle_commits_at_once(void **state)
{
    (void)state;
    struct inflight *inf = inflight_new();
    struct mcdc_position p;
    make_pos(&p, -1, -1, "PBRT1");
    inflight_advance(inf, &p);
    const struct mcdc_position *got = inflight_committable(inf);
    assert_non_null(got);
    assert_string_equal(token_data(got), "PBRT1");
    assert_int_equal(got->sec, -1);
    assert_null(inflight_committable(inf));
    position_clear(&p);
    inflight_destroy(inf);
}

static void inflight_advance_behind_records_waits_for_them(void **state)
{
    (void)state;
    struct inflight *inf = inflight_new();
    struct mcdc_position p;
    make_pos(&p, 400, 1, "R1");
    void *c = inflight_add(inf, &p);
    position_clear(&p);
    make_pos(&p, -1, -1, "PBRT2");
    inflight_advance(inf, &p);
    position_clear(&p);
    make_pos(&p, -1, -1, "PBRT3"); /* replaces the queued advance */
    inflight_advance(inf, &p);
    position_clear(&p);
    assert_null(inflight_committable(inf));
    assert_int_equal(inflight_pending(inf), 1);
    inflight_ack(inf, c);
    const struct mcdc_position *got = inflight_committable(inf);
    assert_non_null(got);
    assert_string_equal(token_data(got), "PBRT3");
    assert_int_equal(inflight_pending(inf), 0);
    inflight_destroy(inf);
}

/* 200k records acked in shuffled windows of 1000: the committed position only
 * moves forward, equals the newest fully-acked prefix, and ends at the last. */
static void inflight_many_entries_shuffled_acks(void **state)
{
    (void)state;
    enum { N = 200000, W = 1000 };
    struct inflight *inf = inflight_new();
    void **cookies = xmalloc(N * sizeof *cookies);
    struct mcdc_position p;
    char tok[32];
    int64_t last = 0;
    srand(7);
    for (int base = 0; base < N; base += W) {
        for (int i = base; i < base + W; i++) {
            snprintf(tok, sizeof tok, "T%d", i);
            make_pos(&p, 1000, i + 1, tok);
            p.lsid = i % 3 == 0 ? xstrdup("{\"id\": 1}") : NULL;
            p.txn_number = i;
            cookies[i] = inflight_add(inf, &p);
            position_clear(&p);
        }
        for (int i = W - 1; i > 0; i--) { /* Fisher-Yates over the window */
            int j = rand() % (i + 1);
            void *t = cookies[base + i];
            cookies[base + i] = cookies[base + j];
            cookies[base + j] = t;
        }
        for (int i = base; i < base + W; i++) {
            inflight_ack(inf, cookies[i]);
            const struct mcdc_position *got = inflight_committable(inf);
            if (got) {
                assert_true(got->ord > last);
                last = got->ord;
                snprintf(tok, sizeof tok, "T%lld", (long long)(got->ord - 1));
                assert_string_equal(token_data(got), tok);
                assert_true((got->lsid != NULL) == ((got->ord - 1) % 3 == 0));
            }
        }
        assert_int_equal(last, base + W);
    }
    assert_int_equal(inflight_pending(inf), 0);
    free(cookies);
    inflight_destroy(inf);
}

/* ---- positions ---- */

static void position_json_round_trip_base64_token(void **state)
{
    (void)state;
    struct mcdc_position p, q;
    make_pos(&p, 1694627139, 3, "8265");
    BSON_APPEND_INT32(&p.resume_token, "_typeBits", 5); /* the whole document is kept */
    char *json = position_to_json(&p);
    /* Base64 of the BSON {_data:"8265", _typeBits:5} */
    char *b64 = NULL;
    {
        const uint8_t *d = bson_get_data(&p.resume_token);
        static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t n = p.resume_token.len, o = 0;
        b64 = xcalloc(1, n * 2 + 8);
        for (size_t i = 0; i < n; i += 3) {
            uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) |
                         (i + 2 < n ? d[i + 2] : 0);
            b64[o++] = A[v >> 18];
            b64[o++] = A[(v >> 12) & 63];
            b64[o++] = i + 1 < n ? A[(v >> 6) & 63] : '=';
            b64[o++] = i + 2 < n ? A[v & 63] : '=';
        }
    }
    char *expected = xasprintf("{\"sec\":1694627139,\"ord\":3,\"resume_token\":\"%s\","
                               "\"mongocdc_capture_mode\":\"change_streams\"}",
                               b64);
    assert_string_equal(json, expected);
    position_init(&q);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(position_from_json(json, &q, &err));
    assert_int_equal(q.sec, 1694627139);
    assert_int_equal(q.ord, 3);
    assert_true(q.has_resume_token);
    assert_true(bson_equal(&q.resume_token, &p.resume_token));
    assert_false(q.oplog);
    assert_false(q.initsync);
    free(json);
    free(b64);
    free(expected);
    position_clear(&p);
    position_clear(&q);
}

static void position_old_hex_token_becomes_data_document(void **state)
{
    (void)state;
    struct mcdc_position q;
    position_init(&q);
    struct mcdc_error err = MCDC_ERROR_INIT;
    const char *hex = "826501F5C3000000032B022C0100296E5A1004AB";
    char *json =
        xasprintf("{\"sec\":1694627139,\"ord\":3,\"h\":null,\"resume_token\":\"%s\"}", hex);
    assert_true(position_from_json(json, &q, &err));
    assert_string_equal(token_data(&q), hex);
    assert_false(q.oplog);
    /* written back in the current (Base64) form */
    char *out = position_to_json(&q);
    assert_null(strstr(out, hex));
    struct mcdc_position r;
    position_init(&r);
    assert_true(position_from_json(out, &r, &err));
    assert_string_equal(token_data(&r), hex);
    free(json);
    free(out);
    position_clear(&q);
    position_clear(&r);
}

static void position_initsync_lsid_and_extra_keys(void **state)
{
    (void)state;
    struct mcdc_position p, q;
    make_pos(&p, 10, 2, "AB");
    p.initsync = true;
    p.lsid = xstrdup("{\"id\": {\"$binary\": \"q83vEjRWeJ==\", \"$type\": \"04\"}}");
    p.txn_number = 42;
    p.extra_json =
        xstrdup("{\"transaction_id\":\"x:42\",\"transaction_data_collection_order_db.c\":7}");
    char *json = position_to_json(&p);
    assert_non_null(strstr(json, "\"initsync\":true"));
    assert_non_null(strstr(json, "\"lsid\":\"{\\\"id\\\": {\\\"$binary\\\""));
    assert_non_null(strstr(json, "\"txnNumber\":42"));
    assert_non_null(strstr(json, "\"transaction_id\":\"x:42\""));
    position_init(&q);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(position_from_json(json, &q, &err));
    assert_true(q.initsync);
    assert_string_equal(q.lsid, p.lsid);
    assert_int_equal(q.txn_number, 42);
    assert_string_equal(q.extra_json, "{\"transaction_id\":\"x:42\","
                                      "\"transaction_data_collection_order_db.c\":7}");
    struct mcdc_position r;
    position_init(&r);
    position_copy(&r, &q);
    assert_string_equal(r.lsid, q.lsid);
    assert_true(bson_equal(&r.resume_token, &q.resume_token));
    free(json);
    position_clear(&p);
    position_clear(&q);
    position_clear(&r);
}

static void position_oplog_mode_is_remembered(void **state)
{
    (void)state;
    struct mcdc_position p, q;
    make_pos(&p, 55, 1, NULL);
    p.oplog = true;
    p.h = -4242;
    p.has_h = true;
    p.tord = 3;
    char *json = position_to_json(&p);
    assert_string_equal(json, "{\"sec\":55,\"ord\":1,\"h\":-4242,\"tord\":3,"
                              "\"mongocdc_capture_mode\":\"oplog\"}");
    position_init(&q);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(position_from_json(json, &q, &err));
    assert_true(q.oplog);
    assert_int_equal(q.h, -4242);
    assert_int_equal(q.tord, 3);
    /* A Debezium 1.9 oplog value (no mode key): non-null h and no token → oplog. */
    assert_true(position_from_json("{\"sec\":5,\"ord\":1,\"h\":0}", &q, &err));
    assert_true(q.oplog);
    /* A 1.9 change-stream value: h null. */
    assert_true(
        position_from_json("{\"sec\":5,\"ord\":1,\"h\":null,\"resume_token\":\"82AA\"}", &q, &err));
    assert_false(q.oplog);
    free(json);
    /* An oplog position of an entry without h (MongoDB 4.4+) writes h null, as 1.9 does. */
    p.has_h = false;
    p.tord = 0;
    json = position_to_json(&p);
    assert_string_equal(json,
                        "{\"sec\":55,\"ord\":1,\"h\":null,\"mongocdc_capture_mode\":\"oplog\"}");
    free(json);
    position_clear(&p);
    position_clear(&q);
}

/* A 1.9 snapshot position at a retryable write's entry: stxnid is written
 * with and without initsync (SourceInfo.lastOffset@v1.9.8 adds it in both
 * branches), read back into the field, and kept through the in-flight tracker,
 * which copies positions field by field. */
static void position_stxnid_written_read_and_tracked(void **state)
{
    (void)state;
    static const char id[] = "1898e9d5-a3e1-36f8-9610-670dfd365f60:1";
    struct mcdc_position p, q;
    struct mcdc_error err = MCDC_ERROR_INIT;
    make_pos(&p, 55, 20, NULL);
    p.oplog = true;
    snprintf(p.stxnid, sizeof p.stxnid, "%s", id);
    p.initsync = true;
    char *json = position_to_json(&p);
    assert_string_equal(json, "{\"sec\":55,\"ord\":20,\"h\":null,"
                              "\"stxnid\":\"1898e9d5-a3e1-36f8-9610-670dfd365f60:1\","
                              "\"initsync\":true,\"mongocdc_capture_mode\":\"oplog\"}");
    position_init(&q);
    assert_true(position_from_json(json, &q, &err));
    assert_string_equal(q.stxnid, id);
    assert_null(q.extra_json);
    assert_true(q.initsync);
    free(json);
    p.initsync = false;
    json = position_to_json(&p);
    assert_non_null(strstr(json, "\"stxnid\":\"1898e9d5-a3e1-36f8-9610-670dfd365f60:1\""));
    free(json);

    struct inflight *inf = inflight_new();
    void *c = inflight_add(inf, &p);
    inflight_ack(inf, c);
    const struct mcdc_position *got = inflight_committable(inf);
    assert_non_null(got);
    assert_string_equal(got->stxnid, id);
    /* the next position, from an entry without a session, has none */
    struct mcdc_position r;
    make_pos(&r, 56, 1, NULL);
    r.oplog = true;
    inflight_ack(inf, inflight_add(inf, &r));
    got = inflight_committable(inf);
    assert_non_null(got);
    assert_string_equal(got->stxnid, "");
    json = position_to_json(got);
    assert_null(strstr(json, "stxnid"));
    free(json);
    inflight_destroy(inf);

    /* null is no id; another type is refused */
    assert_true(position_from_json("{\"sec\":5,\"ord\":1,\"stxnid\":null}", &q, &err));
    assert_string_equal(q.stxnid, "");
    assert_false(position_from_json("{\"sec\":5,\"ord\":1,\"stxnid\":7}", &q, &err));
    assert_non_null(strstr(err.msg, "\"stxnid\""));
    position_clear(&p);
    position_clear(&q);
    position_clear(&r);
}

/* Values without the mongocdc_capture_mode marker are classified by shape
 * (debezium-format.md §4.2, §4.4): a resume token means change streams, no
 * token means an oplog position. One case per shape Debezium writes. */
static void position_unmarked_values_classified_by_shape(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        bool oplog, has_h;
    } cases[] = {
        /* 1.x oplog on MongoDB < 4.2: a real h */
        {"{\"sec\":5,\"ord\":1,\"h\":-8021592513520218123}", true, true},
        /* 1.9 oplog on 4.4+: the entry has no h, written as null */
        {"{\"sec\":5,\"ord\":1,\"h\":null}", true, false},
        /* 1.9 oplog inside a transaction */
        {"{\"sec\":5,\"ord\":1,\"h\":null,\"tord\":2,\"stxnid\":\"u:1\"}", true, false},
        /* no h at all, no token (2.0-2.1 read this as an oplog-era position) */
        {"{\"sec\":5,\"ord\":1}", true, false},
        /* 1.9 change streams: h null and a hex token */
        {"{\"sec\":5,\"ord\":1,\"h\":null,\"resume_token\":\"82AA\"}", false, false},
        /* 2.7+ change streams: Base64 token, no h */
        {"{\"sec\":5,\"ord\":1,\"resume_token\":\"EgAAAAJfZGF0YQACAAAAQQAA\"}", false, false},
        /* a token wins over a numeric h */
        {"{\"sec\":5,\"ord\":1,\"h\":0,\"resume_token\":\"82AA\"}", false, true},
        /* the marker wins over the shape */
        {"{\"sec\":5,\"ord\":1,\"mongocdc_capture_mode\":\"change_streams\"}", false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct mcdc_position q;
        struct mcdc_error err = MCDC_ERROR_INIT;
        position_init(&q);
        if (!position_from_json(cases[i].json, &q, &err))
            fail_msg("%s: %s", cases[i].json, err.msg);
        if (q.oplog != cases[i].oplog || q.has_h != cases[i].has_h)
            fail_msg("%s: oplog %d has_h %d", cases[i].json, q.oplog, q.has_h);
        position_clear(&q);
    }
}

static void position_bad_values_are_errors(void **state)
{
    (void)state;
    struct mcdc_position q;
    position_init(&q);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_false(position_from_json("{\"sec\":\"soon\",\"ord\":1}", &q, &err));
    assert_non_null(strstr(err.msg, "\"sec\""));
    /* found by fuzz_offsets: a double beyond int64 was cast (undefined behaviour) */
    assert_false(position_from_json("{\"sec\":3.3e107,\"ord\":3}", &q, &err));
    assert_false(position_from_json("{\"sec\":5.5,\"ord\":3}", &q, &err));
    assert_true(position_from_json("{\"sec\":5.0,\"ord\":3}", &q, &err));
    position_clear(&q);
    position_init(&q);
    assert_false(position_from_json("not json", &q, &err));
    assert_non_null(strstr(err.msg, "not JSON"));
    assert_int_equal(q.sec, -1); /* untouched on failure */
    position_clear(&q);
}

/* Values with no usable position must be refused, never read as "stream from now". */
static void position_without_usable_position_is_refused(void **state)
{
    (void)state;
    static const char *const unusable[] = {
        "{}",
        "{\"sec\":-1,\"ord\":-1}",
        "{\"sec\":-1,\"ord\":-1,\"initsync\":true}",
        "{\"sec\":0,\"ord\":0}",
        "{\"sec\":12,\"ord\":-1}",
        "{\"sec\":-1,\"ord\":-1,\"resume_token\":null}",
        "{\"resume_token\":{}}",
    };
    for (size_t i = 0; i < sizeof unusable / sizeof unusable[0]; i++) {
        struct mcdc_position q;
        position_init(&q);
        struct mcdc_error err = MCDC_ERROR_INIT;
        assert_false(position_from_json(unusable[i], &q, &err));
        assert_non_null(strstr(err.msg, "no usable position"));
        position_clear(&q);
    }
    /* A token alone, or a clusterTime alone, is usable. */
    struct mcdc_position q;
    position_init(&q);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(position_from_json("{\"sec\":-1,\"ord\":-1,\"resume_token\":\"82AA\"}", &q, &err));
    assert_true(position_from_json("{\"sec\":1700000000,\"ord\":0}", &q, &err));
    position_clear(&q);
}

static void position_range_and_duplicates_are_refused(void **state)
{
    (void)state;
    struct mcdc_position q;
    position_init(&q);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_false(position_from_json("{\"sec\":4294967296,\"ord\":1}", &q, &err));
    assert_non_null(strstr(err.msg, "unsigned 32-bit"));
    assert_false(position_from_json("{\"sec\":5,\"ord\":-2}", &q, &err));
    assert_non_null(strstr(err.msg, "\"ord\""));
    assert_true(position_from_json("{\"sec\":4294967295,\"ord\":4294967295}", &q, &err));
    assert_int_equal(q.sec, 4294967295LL);
    assert_false(position_from_json("{\"sec\":5,\"ord\":1,\"sec\":9}", &q, &err));
    assert_non_null(strstr(err.msg, "duplicate key \"sec\""));
    assert_false(position_from_json(
        "{\"sec\":5,\"ord\":1,\"resume_token\":\"82AA\",\"resume_token\":\"82BB\"}", &q, &err));
    assert_non_null(strstr(err.msg, "duplicate key"));
    position_clear(&q);
}

/* ---- file store ---- */

struct tmpdir {
    char dir[64];
    char path[128];
};

static void tmpdir_make(struct tmpdir *t)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/mcdc-offsets-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof t->path, "%s/offsets.json", t->dir);
}

static void tmpdir_remove(struct tmpdir *t)
{
    char p[160];
    unlink(t->path);
    snprintf(p, sizeof p, "%s.lock", t->path);
    unlink(p);
    snprintf(p, sizeof p, "%s.tmp", t->path);
    unlink(p);
    rmdir(t->dir);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = xcalloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void file_cfg(struct mcdc_config *cfg, const char *path)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->topic_prefix = (char *)"shop";
    cfg->offset_storage = MCDC_OFFSETS_FILE;
    cfg->offsets_file = (char *)path;
    cfg->offsets_flush_timeout_ms = 5000;
}

/* Offsets stored under another topic.prefix are named in a WARN at load. */
static void store_file_other_topic_prefix_is_warned(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    struct mcdc_position p, q;
    make_pos(&p, 1, 1, "AA01");
    assert_true(offset_store_save(store, "rs0", &p, &err));
    assert_true(offset_store_save(store, "rs1", &p, &err));
    position_clear(&p);
    offset_store_close(store);

    char logpath[160];
    snprintf(logpath, sizeof logpath, "%s/log", t.dir);
    assert_true(mcdc_log_open(MCDC_LOG_INFO, MCDC_LOG_FORMAT_TEXT, logpath, &err));
    cfg.topic_prefix = (char *)"crm";
    store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    bool found = true;
    position_init(&q);
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_false(found);
    offset_store_close(store);
    cfg.topic_prefix = (char *)"shop"; /* its own entries: no warning */
    store = offset_store_open(&cfg, &err);
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_true(found);
    offset_store_close(store);
    mcdc_log_close();
    position_clear(&q);

    char *text = slurp(logpath);
    const char *w = strstr(text, "holds a position under [\"shop\",{\"rs\":\"rs0\",\"server_id\":"
                                 "\"shop\"}], which is not this source's (name \"crm\", "
                                 "topic.prefix \"crm\")");
    assert_non_null(w);
    /* once per key (rs0, rs1), only for crm */
    assert_non_null(strstr(text, "[\"shop\",{\"rs\":\"rs1\",\"server_id\":\"shop\"}], which"));
    assert_null(strstr(w + 1, "holds a position under [\"shop\",{\"rs\":\"rs0\""));
    free(text);
    unlink(logpath);
    tmpdir_remove(&t);
}

/* rs NULL: the single partition of Debezium 2.6+ ["shop",{"server_id":"shop"}]
 * (merged mongos stream, 3.x dialect), kept apart from the per-set ones. */
static void store_file_server_id_partition(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    struct mcdc_position p, q;
    bool found = true;
    assert_non_null(store);
    position_init(&q);
    make_pos(&p, 5, 1, "CC05");
    assert_true(offset_store_save(store, NULL, &p, &err));
    position_clear(&p);
    make_pos(&p, 6, 1, "DD06");
    assert_true(offset_store_save(store, "rs0", &p, &err));
    position_clear(&p);
    offset_store_close(store);
    char *text = slurp(t.path);
    assert_non_null(
        strstr(text, "\"[\\\"shop\\\",{\\\"server_id\\\":\\\"shop\\\"}]\":{\"sec\":5,"));
    free(text);
    store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    assert_true(offset_store_load(store, NULL, &q, &found, &err));
    assert_true(found);
    assert_string_equal(token_data(&q), "CC05");
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_string_equal(token_data(&q), "DD06");
    offset_store_close(store);
    position_clear(&q);
    tmpdir_remove(&t);
}

static void store_file_two_replica_sets_save_reload(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    struct mcdc_position p, q;
    bool found = true;
    position_init(&q);
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_false(found);
    make_pos(&p, 1, 1, "AA01");
    assert_true(offset_store_save(store, "rs0", &p, &err));
    position_clear(&p);
    make_pos(&p, 2, 2, "BB02");
    assert_true(offset_store_save(store, "rs1", &p, &err));
    position_clear(&p);
    make_pos(&p, 3, 3, "AA03");
    assert_true(offset_store_save(store, "rs0", &p, &err)); /* replaces rs0 only */
    position_clear(&p);
    offset_store_close(store);

    char *text = slurp(t.path);
    assert_non_null(strstr(text, "\"[\\\"shop\\\",{\\\"rs\\\":\\\"rs0\\\",\\\"server_id\\\":"
                                 "\\\"shop\\\"}]\":{\"sec\":3,"));
    assert_non_null(strstr(text, "\\\"rs1\\\""));
    free(text);

    store = offset_store_open(&cfg, &err); /* reload from disk */
    assert_non_null(store);
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_true(found);
    assert_int_equal(q.sec, 3);
    assert_string_equal(token_data(&q), "AA03");
    assert_true(offset_store_load(store, "rs1", &q, &found, &err));
    assert_true(found);
    assert_string_equal(token_data(&q), "BB02");
    assert_true(offset_store_load(store, "rs2", &q, &found, &err));
    assert_false(found);
    offset_store_close(store);
    position_clear(&q);
    tmpdir_remove(&t);
}

/* The save goes through a temp file renamed over the old one: a leftover temp
 * file from a crash is ignored and replaced, the file's inode changes, and no
 * temp file stays behind. */
static void store_file_replaces_atomically(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    struct mcdc_position p;
    make_pos(&p, 1, 1, "AA");
    assert_true(offset_store_save(store, "rs0", &p, &err));
    struct stat st1, st2;
    assert_int_equal(stat(t.path, &st1), 0);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", t.path);
    FILE *f = fopen(tmp, "w"); /* torn write of a crashed save */
    fputs("{\"[tor", f);
    fclose(f);
    p.ord = 2;
    assert_true(offset_store_save(store, "rs0", &p, &err));
    assert_int_equal(stat(t.path, &st2), 0);
    assert_true(st1.st_ino != st2.st_ino);
    assert_int_not_equal(access(tmp, F_OK), 0);
    char *text = slurp(t.path);
    assert_non_null(strstr(text, "\"ord\":2"));
    bson_t *doc = bson_new_from_json((const uint8_t *)text, -1, NULL);
    assert_non_null(doc);
    assert_int_equal(bson_count_keys(doc), 1);
    bson_destroy(doc);
    free(text);
    position_clear(&p);
    offset_store_close(store);
    tmpdir_remove(&t);
}

/* Each capture task opens its own handle on the same file: a save replaces
 * only its own replica set's member, never another task's newer one. */
static void store_file_handles_of_two_tasks_do_not_clobber(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *a = offset_store_open(&cfg, &err);
    struct offset_store *b = offset_store_open(&cfg, &err);
    assert_non_null(a);
    assert_non_null(b);
    struct mcdc_position p, q;
    for (int i = 1; i <= 5; i++) {
        make_pos(&p, i, 0, "AA");
        assert_true(offset_store_save(a, "rs0", &p, &err));
        position_clear(&p);
        make_pos(&p, 100 + i, 0, "BB");
        assert_true(offset_store_save(b, "rs1", &p, &err));
        position_clear(&p);
    }
    offset_store_close(a);
    offset_store_close(b);
    struct offset_store *c = offset_store_open(&cfg, &err);
    bool found = false;
    position_init(&q);
    assert_true(offset_store_load(c, "rs0", &q, &found, &err));
    assert_true(found);
    assert_int_equal(q.sec, 5);
    assert_true(offset_store_load(c, "rs1", &q, &found, &err));
    assert_true(found);
    assert_int_equal(q.sec, 105);
    position_clear(&q);
    offset_store_close(c);
    tmpdir_remove(&t);
}

static void store_file_corrupt_file_is_a_clear_error(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    FILE *f = fopen(t.path, "w");
    fputs("{\"[\\\"shop\\\"]\": {\"sec\": 1,", f);
    fclose(f);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_null(offset_store_open(&cfg, &err));
    assert_int_equal(err.domain, MCDC_ERR_IO);
    assert_non_null(strstr(err.msg, t.path));
    assert_non_null(strstr(err.msg, "corrupt"));
    f = fopen(t.path, "w");
    fputs("{\"k\": 5}", f);
    fclose(f);
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, "not an object"));
    /* One partition twice: refused, never one of the two picked. */
    f = fopen(t.path, "w");
    fputs("{\"[\\\"shop\\\",{\\\"rs\\\":\\\"rs0\\\"}]\": {\"sec\": 1796169080, \"ord\": 1},"
          " \"[\\\"shop\\\",{\\\"rs\\\":\\\"rs0\\\"}]\": {\"sec\": 1796169081, \"ord\": 1}}",
          f);
    fclose(f);
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, "stored twice"));
    assert_non_null(strstr(err.msg, t.path));
    cfg.offsets_file = (char *)"/nonexistent-mcdc-dir/offsets.json";
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, "/nonexistent-mcdc-dir"));
    tmpdir_remove(&t);
}

/* An endless device, a FIFO or an empty file is refused with a message that
 * names the file; nothing is read forever and no snapshot starts silently. */
static void store_file_refuses_non_regular_and_empty_files(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    struct mcdc_error err = MCDC_ERROR_INIT;

    file_cfg(&cfg, "/dev/full");
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, "/dev/full"));
    assert_non_null(strstr(err.msg, "not a regular file"));

    assert_int_equal(mkfifo(t.path, 0600), 0);
    file_cfg(&cfg, t.path);
    err = (struct mcdc_error)MCDC_ERROR_INIT;
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, "not a regular file"));
    unlink(t.path);

    FILE *f = fopen(t.path, "w"); /* 0 bytes */
    fclose(f);
    err = (struct mcdc_error)MCDC_ERROR_INIT;
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, t.path));
    assert_non_null(strstr(err.msg, "empty"));
    assert_non_null(strstr(err.msg, "Move it away"));

    /* over the size cap: a sparse file, nothing is read */
    assert_int_equal(truncate(t.path, (off_t)65 * 1024 * 1024), 0);
    err = (struct mcdc_error)MCDC_ERROR_INIT;
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, "64 MiB"));
    tmpdir_remove(&t);
}

/* The lock on "<path>.lock" is held for the whole run: handles of one
 * process share it, another holder (another daemon) is refused at open. */
static void store_file_is_locked_for_the_whole_run(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    char lock_path[160];
    snprintf(lock_path, sizeof lock_path, "%s.lock", t.path);

    struct offset_store *a = offset_store_open(&cfg, &err);
    assert_non_null(a);
    /* Another process: a separate open file description conflicts as a
     * second daemon's would. */
    int other = open(lock_path, O_RDWR);
    assert_true(other >= 0);
    assert_int_not_equal(flock(other, LOCK_EX | LOCK_NB), 0);
    struct offset_store *b = offset_store_open(&cfg, &err); /* a second task: shared */
    assert_non_null(b);
    offset_store_close(a);
    assert_int_not_equal(flock(other, LOCK_EX | LOCK_NB), 0); /* b still holds it */
    offset_store_close(b);
    assert_int_equal(flock(other, LOCK_EX | LOCK_NB), 0); /* released with the last */

    err = (struct mcdc_error)MCDC_ERROR_INIT;
    assert_null(offset_store_open(&cfg, &err));
    assert_non_null(strstr(err.msg, "in use by another mongocdc process"));
    assert_non_null(strstr(err.msg, t.path));
    close(other);
    a = offset_store_open(&cfg, &err);
    assert_non_null(a);
    offset_store_close(a);
    tmpdir_remove(&t);
}

/* ---- Kafka store (mock cluster) ---- */


/* offset_store_scan sees every entry, other names' included; offset_store_put
 * stores a key verbatim and deletes with NULL (the `mongocdc offsets` command). */
static const char *scanned(const struct offset_entry *e, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].key, key))
            return e[i].value_json ? e[i].value_json : "(deleted)";
    return NULL;
}

static void store_list_and_put_raw(struct offset_store *store)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position p;
    make_pos(&p, 5, 1, "AA05");
    assert_true(offset_store_save(store, "rs0", &p, &err));
    position_clear(&p);
    const char *dbz = "[\"inventory-connector\",{\"server_id\":\"shop\"}]";
    const char *ours = "[\"shop\",{\"rs\":\"rs0\",\"server_id\":\"shop\"}]";
    assert_true(offset_store_put(store, dbz, "{\"sec\":7,\"ord\":2}", &err));
    assert_true(offset_store_put(store, dbz, "{\"sec\":8,\"ord\":1}", &err));
    struct offset_entry *e = NULL;
    size_t n = 0;
    assert_true(offset_store_scan(store, &e, &n, &err));
    assert_string_equal(scanned(e, n, dbz), "{\"sec\":8,\"ord\":1}");
    assert_non_null(strstr(scanned(e, n, ours), "\"sec\":5"));
    offset_entries_free(e, n);
    assert_true(offset_store_put(store, dbz, NULL, &err));
    assert_true(offset_store_scan(store, &e, &n, &err));
    const char *gone = scanned(e, n, dbz);
    assert_true(gone == NULL || !strcmp(gone, "(deleted)"));
    assert_non_null(scanned(e, n, ours));
    offset_entries_free(e, n);
}

static void store_file_list_and_put_raw(void **state)
{
    (void)state;
    struct tmpdir t;
    tmpdir_make(&t);
    struct mcdc_config cfg;
    file_cfg(&cfg, t.path);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    store_list_and_put_raw(store);
    offset_store_close(store);
    store = offset_store_open_read_only(&cfg, &err);
    assert_false(offset_store_put(store, "k", "{}", &err));
    offset_store_close(store);
    tmpdir_remove(&t);
}

static void store_kafka_list_and_put_raw(void **state)
{
    (void)state;
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(host, 1);
    /* created beforehand: the mock has no CreateTopics (see below) */
    assert_int_equal(rd_kafka_mock_topic_create(mc, "connect-offsets", 1, 1),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    struct mcdc_kv kv[2] = {
        {(char *)"bootstrap.servers", (char *)rd_kafka_mock_cluster_bootstraps(mc), 1, 1},
        {(char *)"log_level", (char *)"3", 2, 1},
    };
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topic_prefix = (char *)"shop";
    cfg.offset_storage = MCDC_OFFSETS_KAFKA;
    cfg.offsets_topic = (char *)"connect-offsets";
    cfg.offsets_flush_timeout_ms = 5000;
    cfg.kafka.items = kv;
    cfg.kafka.count = 2;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    store_list_and_put_raw(store);
    offset_store_close(store);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
}

static void store_kafka_save_load_on_mock_cluster(void **state)
{
    (void)state;
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    assert_non_null(host);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(host, 1);
    assert_non_null(mc);
    /* The mock cluster has no CreateTopics and (librdkafka 2.x) no longer
     * creates topics on a metadata request that disallows it, as the store's
     * does: the topic exists before the store opens, as an operator would
     * create it. */
    assert_int_equal(rd_kafka_mock_topic_create(mc, "mongocdc-offsets", 1, 1),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    struct mcdc_kv kv[2] = {
        {(char *)"bootstrap.servers", (char *)rd_kafka_mock_cluster_bootstraps(mc), 1, 1},
        {(char *)"log_level", (char *)"3", 2, 1},
    };
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topic_prefix = (char *)"shop";
    cfg.offset_storage = MCDC_OFFSETS_KAFKA;
    cfg.offsets_topic = (char *)"mongocdc-offsets";
    cfg.offsets_flush_timeout_ms = 5000;
    cfg.kafka.items = kv;
    cfg.kafka.count = 2;

    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    struct mcdc_position p, q;
    position_init(&q);
    bool found = true;
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_false(found);
    make_pos(&p, 1, 1, "AA01");
    assert_true(offset_store_save(store, "rs0", &p, &err));
    position_clear(&p);
    make_pos(&p, 9, 9, "BB09");
    assert_true(offset_store_save(store, "rs1", &p, &err));
    position_clear(&p);
    make_pos(&p, 2, 2, "AA02");
    assert_true(offset_store_save(store, "rs0", &p, &err));
    position_clear(&p);
    offset_store_close(store);

    store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_true(found);
    assert_int_equal(q.sec, 2);
    assert_string_equal(token_data(&q), "AA02");
    assert_true(offset_store_load(store, "rs1", &q, &found, &err));
    assert_true(found);
    assert_string_equal(token_data(&q), "BB09");
    offset_store_close(store);
    position_clear(&q);

    /* The records themselves: Kafka Connect's key bytes. */
    conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mc), errstr,
                      sizeof errstr);
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, "mongocdc-offsets", NULL);
    assert_int_equal(rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING), 0);
    rd_kafka_message_t *m = NULL;
    for (int i = 0; i < 50 && !m; i++) {
        m = rd_kafka_consume(rkt, 0, 100);
        if (m && m->err) {
            rd_kafka_message_destroy(m);
            m = NULL;
        }
    }
    assert_non_null(m);
    const char *want = "[\"shop\",{\"rs\":\"rs0\",\"server_id\":\"shop\"}]";
    assert_int_equal(m->key_len, strlen(want));
    assert_memory_equal(m->key, want, strlen(want));
    rd_kafka_message_destroy(m);
    rd_kafka_consume_stop(rkt, 0);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(c);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
}

/* test.mock.num.brokers in the kafka: map: the store's producer owns the
 * cluster and the load consumer is pointed at it. */
static void store_kafka_inline_mock_cluster(void **state)
{
    (void)state;
    struct mcdc_kv kv[2] = {{(char *)"test.mock.num.brokers", (char *)"1", 1, 1},
                            {(char *)"log_level", (char *)"3", 2, 1}};
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topic_prefix = (char *)"shop";
    cfg.offset_storage = MCDC_OFFSETS_KAFKA;
    cfg.offsets_flush_timeout_ms = 5000;
    cfg.kafka.items = kv;
    cfg.kafka.count = 2;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_non_null(store);
    struct mcdc_position p, q;
    make_pos(&p, 77, 1, "CC");
    p.initsync = true;
    assert_true(offset_store_save(store, "rs0", &p, &err));
    position_init(&q);
    bool found = false;
    assert_true(offset_store_load(store, "rs0", &q, &found, &err));
    assert_true(found);
    assert_int_equal(q.sec, 77);
    assert_true(q.initsync);
    position_clear(&p);
    position_clear(&q);
    offset_store_close(store);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inflight_in_order_acks_commit_each),
        cmocka_unit_test(inflight_shared_extra_heads_come_back_whole),
        cmocka_unit_test(inflight_ack_out_of_order_commits_only_prefix),
        cmocka_unit_test(inflight_record_without_position_keeps_previous),
        cmocka_unit_test(inflight_advance_while_idle_commits_at_once),
        cmocka_unit_test(inflight_advance_behind_records_waits_for_them),
        cmocka_unit_test(inflight_many_entries_shuffled_acks),
        cmocka_unit_test(position_json_round_trip_base64_token),
        cmocka_unit_test(position_old_hex_token_becomes_data_document),
        cmocka_unit_test(position_initsync_lsid_and_extra_keys),
        cmocka_unit_test(position_oplog_mode_is_remembered),
        cmocka_unit_test(position_stxnid_written_read_and_tracked),
        cmocka_unit_test(position_unmarked_values_classified_by_shape),
        cmocka_unit_test(position_bad_values_are_errors),
        cmocka_unit_test(position_without_usable_position_is_refused),
        cmocka_unit_test(position_range_and_duplicates_are_refused),
        cmocka_unit_test(store_file_two_replica_sets_save_reload),
        cmocka_unit_test(store_file_server_id_partition),
        cmocka_unit_test(store_file_server_id_partition),
        cmocka_unit_test(store_file_other_topic_prefix_is_warned),
        cmocka_unit_test(store_file_replaces_atomically),
        cmocka_unit_test(store_file_handles_of_two_tasks_do_not_clobber),
        cmocka_unit_test(store_file_corrupt_file_is_a_clear_error),
        cmocka_unit_test(store_file_refuses_non_regular_and_empty_files),
        cmocka_unit_test(store_file_is_locked_for_the_whole_run),
        cmocka_unit_test(store_kafka_inline_mock_cluster),
        cmocka_unit_test(store_kafka_save_load_on_mock_cluster),
        cmocka_unit_test(store_file_list_and_put_raw),
        cmocka_unit_test(store_kafka_list_and_put_raw),
    };
    return cmocka_run_group_tests_name("offsets", tests, NULL, NULL);
}
