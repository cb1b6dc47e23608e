/*
 * event: parses MongoDB change-stream event documents (MongoDB manual,
 * "Change Events"; mongo-sim-spec.md §3.5-3.9) and snapshot documents into
 * the one change record, struct mcdc_event.
 *
 * Nothing is copied: every bson_t member is a bson_init_static() view over
 * the sub-document bytes of the parsed document, and db/coll point at its
 * NUL-terminated strings. Parsing walks the top level once with bson_iter_t.
 *
 * Thread: pure functions, called from the capture or snapshot thread.
 */
#include "event/event.h"

#include <string.h>

/* Points view at the document or array the iterator is on. */
static bool view_of(const bson_iter_t *it, bson_t *view)
{
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        bson_iter_document(it, &len, &data);
    else
        bson_iter_array(it, &len, &data);
    /* bson_iter_document/array give no data for an embedded document whose
     * length prefix is inconsistent (found by fuzz_event: it used to abort). */
    if (data != NULL && bson_init_static(view, data, len))
        return true;
    bson_init(view);
    return false;
}

/* The ENCODE error for an embedded document view_of could not read. */
static bool corrupt(struct mcdc_error *err, const char *k)
{
    return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "change event: \"%s\" is corrupt BSON", k);
}

void event_init(struct mcdc_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->op = MCDC_OP_INSERT;
    ev->snapshot = MCDC_SNAP_FALSE;
}

const char *event_op_letter(enum mcdc_op op)
{
    switch (op) {
    case MCDC_OP_INSERT:
        return "c";
    case MCDC_OP_UPDATE:
    case MCDC_OP_REPLACE:
        return "u";
    case MCDC_OP_DELETE:
        return "d";
    case MCDC_OP_READ:
        return "r";
    case MCDC_OP_COUNT:
        break;
    }
    return "?";
}

/* Maps operationType to an op; false for every non-data type (drop, rename,
 * dropDatabase, invalidate, DDL events of showExpandedEvents, ...). */
static bool op_from_type(const char *type, enum mcdc_op *op)
{
    static const struct {
        const char *name;
        enum mcdc_op op;
    } map[] = {
        {"insert", MCDC_OP_INSERT},
        {"update", MCDC_OP_UPDATE},
        {"replace", MCDC_OP_REPLACE},
        {"delete", MCDC_OP_DELETE},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(type, map[i].name) == 0) {
            *op = map[i].op;
            return true;
        }
    }
    return false;
}

static bool parse_ns(const bson_iter_t *it, struct mcdc_event *ev, struct mcdc_error *err)
{
    bson_iter_t child;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &child))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "change event: ns is not a document");
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        if (!BSON_ITER_HOLDS_UTF8(&child))
            continue;
        uint32_t len = 0;
        const char *s = bson_iter_utf8(&child, &len);
        if (strcmp(k, "db") == 0) {
            ev->db = s;
            ev->db_len = len;
        } else if (strcmp(k, "coll") == 0) {
            ev->coll = s;
            ev->coll_len = len;
        }
    }
    return true;
}

static bool parse_update_description(const bson_iter_t *it, struct mcdc_event *ev,
                                     struct mcdc_error *err)
{
    bson_iter_t child;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &child))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0,
                              "change event: updateDescription is not a document");
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        if (strcmp(k, "updatedFields") == 0 && BSON_ITER_HOLDS_DOCUMENT(&child)) {
            if (!view_of(&child, &ev->updated_fields))
                return corrupt(err, k);
            ev->has_updated_fields = true;
        } else if (strcmp(k, "removedFields") == 0 && BSON_ITER_HOLDS_ARRAY(&child)) {
            if (!view_of(&child, &ev->removed_fields))
                return corrupt(err, k);
            ev->has_removed_fields = true;
        } else if (strcmp(k, "truncatedArrays") == 0 && BSON_ITER_HOLDS_ARRAY(&child)) {
            if (!view_of(&child, &ev->truncated_arrays))
                return corrupt(err, k);
            ev->has_truncated_arrays = true;
        }
        /* disambiguatedPaths (6.1+, expanded events) is not part of Debezium's
         * envelope and is ignored. */
    }
    if (!ev->has_updated_fields)
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0,
                              "change event: updateDescription without updatedFields");
    return true;
}

/* A document member that may also be null (fullDocument after a lookup that
 * found nothing, a missing pre-image): null leaves has_* false. */
static bool doc_or_null(const bson_iter_t *it, const char *name, bson_t *view, bool *has,
                        struct mcdc_error *err)
{
    if (BSON_ITER_HOLDS_NULL(it))
        return true;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "change event: %s is not a document", name);
    if (!view_of(it, view))
        return corrupt(err, name);
    *has = true;
    return true;
}

/* One top-level member of a change event. */
static bool parse_member(const bson_iter_t *it, struct mcdc_event *ev, const char **type,
                         struct mcdc_error *err)
{
    const char *k = bson_iter_key(it);
    switch (k[0]) {
    case '_':
        if (strcmp(k, "_id") == 0 && BSON_ITER_HOLDS_DOCUMENT(it)) {
            if (!view_of(it, &ev->resume_token))
                return corrupt(err, k);
            ev->has_resume_token = true;
        }
        return true;
    case 'o':
        if (strcmp(k, "operationType") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(it))
                return mcdc_error_set(err, MCDC_ERR_ENCODE, 0,
                                      "change event: operationType is not a string");
            *type = bson_iter_utf8(it, NULL);
        }
        return true;
    case 'n':
        return strcmp(k, "ns") == 0 ? parse_ns(it, ev, err) : true;
    case 'd':
        if (strcmp(k, "documentKey") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(it))
                return mcdc_error_set(err, MCDC_ERR_ENCODE, 0,
                                      "change event: documentKey is not a document");
            if (!view_of(it, &ev->document_key))
                return corrupt(err, k);
            ev->has_document_key = true;
        }
        return true;
    case 'f':
        if (strcmp(k, "fullDocument") == 0)
            return doc_or_null(it, k, &ev->full_document, &ev->has_full_document, err);
        if (strcmp(k, "fullDocumentBeforeChange") == 0)
            return doc_or_null(it, k, &ev->before, &ev->has_before, err);
        return true;
    case 'u':
        return strcmp(k, "updateDescription") == 0 ? parse_update_description(it, ev, err) : true;
    case 'c':
        if (strcmp(k, "clusterTime") == 0) {
            if (!BSON_ITER_HOLDS_TIMESTAMP(it))
                return mcdc_error_set(err, MCDC_ERR_ENCODE, 0,
                                      "change event: clusterTime is not a timestamp");
            bson_iter_timestamp(it, &ev->ts_sec, &ev->ts_inc);
            ev->has_cluster_time = true;
        }
        return true;
    case 'w':
        if (strcmp(k, "wallTime") == 0 && BSON_ITER_HOLDS_DATE_TIME(it)) {
            ev->wall_time_ms = bson_iter_date_time(it);
            ev->has_wall_time = true;
        }
        return true;
    case 'l':
        if (strcmp(k, "lsid") == 0 && BSON_ITER_HOLDS_DOCUMENT(it)) {
            if (!view_of(it, &ev->lsid))
                return corrupt(err, k);
            ev->has_lsid = true;
        }
        return true;
    case 't':
        if (strcmp(k, "txnNumber") == 0 &&
            (BSON_ITER_HOLDS_INT64(it) || BSON_ITER_HOLDS_INT32(it))) {
            ev->txn_number = bson_iter_as_int64(it);
            ev->has_txn_number = true;
        }
        return true;
    default:
        return true;
    }
}

bool event_from_change(const bson_t *doc, struct mcdc_event *ev, bool *emit, struct mcdc_error *err)
{
    bson_iter_t it;
    const char *type = NULL;

    *emit = false;
    event_init(ev);
    if (!bson_iter_init(&it, doc))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "change event: corrupt BSON");
    while (bson_iter_next(&it)) {
        if (!parse_member(&it, ev, &type, err))
            return false;
    }
    if (type == NULL)
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "change event without operationType");
    ev->op_type = type;
    if (!op_from_type(type, &ev->op))
        return true; /* not a data event: the caller skips it but keeps the position */

    if (ev->db == NULL || ev->coll == NULL)
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "%s event without ns.db/ns.coll", type);
    bson_iter_t id;
    if (!ev->has_document_key || !bson_iter_init_find(&id, &ev->document_key, "_id"))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "%s event on %s.%s without documentKey._id",
                              type, ev->db, ev->coll);
    if (ev->op == MCDC_OP_UPDATE && !ev->has_updated_fields)
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0,
                              "update event on %s.%s without updateDescription", ev->db, ev->coll);
    /* insert and replace always carry the new document (MongoDB "Change
     * Events": fullDocument is present for insert and replace events). */
    if ((ev->op == MCDC_OP_INSERT || ev->op == MCDC_OP_REPLACE) && !ev->has_full_document)
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "%s event on %s.%s without fullDocument",
                              type, ev->db, ev->coll);
    /* Inserts and deletes carry no updateDescription; drop a stray one so the
     * envelope stays what Debezium emits for the operation. */
    if (ev->op != MCDC_OP_UPDATE)
        ev->has_updated_fields = ev->has_removed_fields = ev->has_truncated_arrays = false;
    *emit = true;
    return true;
}

bool event_from_snapshot_doc(const bson_t *doc, const char *db, const char *coll,
                             enum mcdc_snapshot_flag flag, struct mcdc_event *ev,
                             struct mcdc_error *err)
{
    bson_iter_t id;
    event_init(ev);
    if (!bson_iter_init_find(&id, doc, "_id"))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "snapshot document from %s.%s without _id",
                              db, coll);
    ev->op = MCDC_OP_READ;
    ev->snapshot = flag;
    ev->db = db;
    ev->db_len = strlen(db);
    ev->coll = coll;
    ev->coll_len = strlen(coll);
    bool ok = bson_init_static(&ev->full_document, bson_get_data(doc), doc->len);
    BSON_ASSERT(ok);
    ev->has_full_document = true;
    /* The key uses only _id (Debezium >= 2.5, DBZ-7157), so the whole
     * document serves as the document key: no copy of _id is needed. */
    ok = bson_init_static(&ev->document_key, bson_get_data(doc), doc->len);
    BSON_ASSERT(ok);
    ev->has_document_key = true;
    return true;
}
