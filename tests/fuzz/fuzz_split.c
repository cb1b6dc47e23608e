/*
 * fuzz_split: a legacy oplog entry as it arrives from local.oplog.rs
 * (arbitrary BSON): the $v: 2 update diff decoder (oplog_diff_to_v1) on the
 * entry's `o` and on every `o.applyOps` operation, and the 1.9 stxnid of its
 * lsid/txnNumber (oplog_stxnid), the parsers of capture.mode oplog that take
 * server input; plus split-event reassembly (capture/oversize.h) on the
 * same bytes read as a run of change-stream documents, each fed to
 * split_add and every reassembled event to event_from_change.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "capture/oplog.h"
#include "capture/oplog_diff.h"
#include "capture/oversize.h"
#include "event/event.h"

static void decode_update(const bson_t *op)
{
    bson_iter_t it;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    bson_t o, out;
    struct mcdc_error err = MCDC_ERROR_INIT;

    if (!bson_iter_init_find(&it, op, "o") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&o, data, len))
        return;
    if (oplog_diff_to_v1(&o, &out, &err) == OPLOG_DIFF_DECODED)
        bson_destroy(&out);
}

static void entry(const bson_t *doc)
{
    bson_iter_t it, ops;
    char stxnid[160];

    decode_update(doc);
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "o.applyOps", &it) &&
        BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ops)) {
        while (bson_iter_next(&ops)) {
            uint32_t len = 0;
            const uint8_t *data = NULL;
            bson_t op;
            if (!BSON_ITER_HOLDS_DOCUMENT(&ops))
                continue;
            bson_iter_document(&ops, &len, &data);
            if (bson_init_static(&op, data, len))
                decode_update(&op);
        }
    }
    if (bson_iter_init_find(&it, doc, "lsid") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len = 0;
        const uint8_t *data = NULL;
        bson_t lsid;
        int64_t txn = 0;
        bson_iter_t t;
        bson_iter_document(&it, &len, &data);
        if (bson_iter_init_find(&t, doc, "txnNumber") && BSON_ITER_HOLDS_INT64(&t))
            txn = bson_iter_int64(&t);
        if (bson_init_static(&lsid, data, len))
            (void)oplog_stxnid(&lsid, txn, stxnid, sizeof stxnid);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct split_buffer b;
    size_t at = 0;

    split_init(&b);
    while (size - at >= 5) {
        uint32_t n;
        bson_t doc;
        memcpy(&n, data + at, 4);
        n = BSON_UINT32_FROM_LE(n);
        if (n < 5 || n > size - at || !bson_init_static(&doc, data + at, n) ||
            !bson_validate(&doc, 0, NULL))
            break;
        entry(&doc);
        const bson_t *merged = NULL;
        char why[200];
        if (split_add(&b, &doc, &merged, why, sizeof why) == SPLIT_DONE) {
            struct mcdc_event ev;
            struct mcdc_error err = MCDC_ERROR_INIT;
            bool emit = false;
            (void)event_from_change(merged, &ev, &emit, &err);
        }
        at += n;
    }
    split_destroy(&b);
    return 0;
}
