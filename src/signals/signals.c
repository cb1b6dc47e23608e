/*
 * signals/signals.c: parsing signals from the signal collection (positional,
 * Debezium's MongoDbConnectorConfig.parseSignallingMessage) and from the
 * kafka and file channels (named fields, Debezium's KafkaSignalChannel and
 * FileSignalChannel), and checking execute-snapshot / stop-snapshot data
 * (Debezium's ExecuteSnapshot / StopSnapshot actions), debezium-format.md
 * §5.3. The bus is in bus.c.
 */
#include "signals/signals.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <inttypes.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "signals/signals_internal.h"

static const char *const type_names[] = {
    [MCDC_SIGNAL_EXECUTE_SNAPSHOT] = "execute-snapshot",
    [MCDC_SIGNAL_STOP_SNAPSHOT] = "stop-snapshot",
    [MCDC_SIGNAL_PAUSE_SNAPSHOT] = "pause-snapshot",
    [MCDC_SIGNAL_RESUME_SNAPSHOT] = "resume-snapshot",
    [MCDC_SIGNAL_LOG] = "log",
    [MCDC_SIGNAL_WINDOW_OPEN] = "snapshot-window-open",
    [MCDC_SIGNAL_WINDOW_CLOSE] = "snapshot-window-close",
};
#define TYPE_COUNT (sizeof type_names / sizeof type_names[0])

const char *mcdc_signal_type_name(enum mcdc_signal_type t)
{
    if ((size_t)t < TYPE_COUNT && type_names[t])
        return type_names[t];
    return "unknown";
}

/* Debezium looks actions up by their exact name (SignalProcessor's map). */
static bool type_from_name(const char *s, enum mcdc_signal_type *out)
{
    for (size_t i = 0; i < TYPE_COUNT; i++)
        if (strcmp(s, type_names[i]) == 0) {
            *out = (enum mcdc_signal_type)i;
            return true;
        }
    return false;
}

/* Debezium's toString() of the first field: ObjectId as 24 hex, strings as
 * they are, numbers as Java prints integers; anything else as relaxed
 * extended JSON (Document/Binary toString() has no stable text worth
 * copying). Returns a new string. */
static char *id_text(const bson_iter_t *it)
{
    char buf[32];
    switch (bson_iter_type(it)) {
    case BSON_TYPE_OID:
        bson_oid_to_string(bson_iter_oid(it), buf);
        return xstrdup(buf);
    case BSON_TYPE_UTF8: {
        uint32_t len = 0;
        const char *s = bson_iter_utf8(it, &len);
        return xstrndup(s, len);
    }
    case BSON_TYPE_INT32:
        snprintf(buf, sizeof buf, "%" PRId32, bson_iter_int32(it));
        return xstrdup(buf);
    case BSON_TYPE_INT64:
        snprintf(buf, sizeof buf, "%" PRId64, bson_iter_int64(it));
        return xstrdup(buf);
    default: {
        /* relaxed extended JSON of the value alone, the project's writer */
        struct ejson_buf b = {0};
        ejson_write_value(&b, it, EJSON_RELAXED, EJSON_SEP_DEFAULT);
        char *out = b.len ? ejson_buf_steal(&b, NULL) : xstrdup("?");
        ejson_buf_free(&b);
        return out;
    }
    }
}

/* A JSON object text (data as a string) into *doc (initialised on return
 * either way). "" and whitespace are an empty data, as Debezium's window
 * markers' `payload: ""`. */
static bool data_from_json(const char *s, size_t len, bson_t *doc, char *why, size_t cap)
{
    size_t i = 0;
    while (i < len && isspace((unsigned char)s[i]))
        i++;
    if (i == len) {
        bson_init(doc);
        return true;
    }
    if (s[i] != '{') {
        bson_init(doc);
        snprintf(why, cap, "data is not a JSON object");
        return false;
    }
    bson_error_t berr;
    if (!bson_init_from_json(doc, s, (ssize_t)len, &berr)) {
        bson_init(doc);
        snprintf(why, cap, "data is not valid JSON: %.160s", berr.message);
        return false;
    }
    return true;
}

static void sig_init(struct mcdc_signal *out, enum mcdc_signal_channel channel)
{
    memset(out, 0, sizeof *out);
    bson_init(&out->data);
    out->channel = channel;
}

bool mcdc_signal_parse_doc(const bson_t *doc, enum mcdc_signal_channel channel,
                           struct mcdc_signal *out, struct mcdc_error *err)
{
    bson_iter_t it;
    char why[200];
    sig_init(out, channel);
    if (!doc || !bson_iter_init(&it, doc))
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal: not a document");
    uint32_t fields = bson_count_keys(doc);
    if (fields > 0 && bson_iter_next(&it))
        out->id = id_text(&it);
    if (fields != 3) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "signal '%s': has %" PRIu32 " fields (expected exactly 3: id, type, data)",
                       out->id ? out->id : "?", fields);
        mcdc_signal_destroy(out);
        return false;
    }
    if (!bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it)) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal '%s': the 2nd field (type) is not a string",
                       out->id);
        mcdc_signal_destroy(out);
        return false;
    }
    const char *type = bson_iter_utf8(&it, NULL);
    if (!type_from_name(type, &out->type)) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal '%s': unknown type '%s'", out->id, type);
        mcdc_signal_destroy(out);
        return false;
    }
    bson_iter_next(&it);
    bool ok = true;
    switch (bson_iter_type(&it)) {
    case BSON_TYPE_DOCUMENT: {
        uint32_t len = 0;
        const uint8_t *data = NULL;
        bson_t view;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&view, data, len)) {
            snprintf(why, sizeof why, "data is not a valid document");
            ok = false;
        } else {
            bson_destroy(&out->data);
            bson_copy_to(&view, &out->data); /* own a copy: view points into doc */
        }
        break;
    }
    case BSON_TYPE_UTF8: {
        uint32_t len = 0;
        const char *s = bson_iter_utf8(&it, &len);
        bson_destroy(&out->data);
        ok = data_from_json(s, len, &out->data, why, sizeof why);
        break;
    }
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
        break; /* no data: Debezium passes null */
    default:
        snprintf(why, sizeof why, "the 3rd field (data) is neither a document nor a JSON string");
        ok = false;
    }
    if (!ok) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal '%s' (%s): %s", out->id, type, why);
        mcdc_signal_destroy(out);
        return false;
    }
    return true;
}

bool mcdc_signal_parse_json(const char *json, size_t len, enum mcdc_signal_channel channel,
                            struct mcdc_signal *out, struct mcdc_error *err)
{
    char why[200];
    bson_t doc;
    sig_init(out, channel);
    size_t lead = 0;
    while (json && lead < len && isspace((unsigned char)json[lead]))
        lead++;
    if (!json || lead == len)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                              "signal: empty text (expected a JSON object)");
    if (!data_from_json(json, len, &doc, why, sizeof why)) {
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal: %s",
                              strstr(why, "data ") == why ? why + 5 : why);
    }
    bson_iter_t it;
    if (bson_iter_init_find(&it, &doc, "id")) {
        out->id = id_text(&it);
    }
    if (!out->id || !*out->id) {
        bson_destroy(&doc);
        mcdc_signal_destroy(out);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal: no \"id\" field");
    }
    if (!bson_iter_init_find(&it, &doc, "type") || !BSON_ITER_HOLDS_UTF8(&it)) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal '%s': no \"type\" string", out->id);
        goto fail;
    }
    const char *type = bson_iter_utf8(&it, NULL);
    if (!type_from_name(type, &out->type)) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal '%s': unknown type '%s'", out->id, type);
        goto fail;
    }
    if (bson_iter_init_find(&it, &doc, "data")) {
        bool ok = true;
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t dlen = 0;
            const uint8_t *data = NULL;
            bson_iter_document(&it, &dlen, &data);
            bson_t view;
            bson_destroy(&out->data);
            if (bson_init_static(&view, data, dlen)) {
                bson_copy_to(&view, &out->data);
            } else {
                bson_init(&out->data);
                ok = false;
                snprintf(why, sizeof why, "data is not a valid document");
            }
        } else if (BSON_ITER_HOLDS_UTF8(&it)) {
            uint32_t dlen = 0;
            const char *s = bson_iter_utf8(&it, &dlen);
            bson_destroy(&out->data);
            ok = data_from_json(s, dlen, &out->data, why, sizeof why);
        } else if (!BSON_ITER_HOLDS_NULL(&it)) {
            ok = false;
            snprintf(why, sizeof why, "\"data\" is neither an object nor a JSON string");
        }
        if (!ok) {
            mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal '%s' (%s): %s", out->id, type, why);
            goto fail;
        }
    }
    bson_destroy(&doc);
    return true;
fail:
    bson_destroy(&doc);
    mcdc_signal_destroy(out);
    return false;
}

void mcdc_signal_destroy(struct mcdc_signal *sig)
{
    if (!sig)
        return;
    free(sig->id);
    sig->id = NULL;
    bson_destroy(&sig->data);
    bson_init(&sig->data); /* destroying twice stays harmless */
}

/* ---- execute-snapshot / stop-snapshot data ------------------------------ */

/* Compiles re (as Debezium's Pattern.compile, here PCRE2) to check it; the
 * users of the request compile their own. */
static bool regex_ok(const char *re, bool caseless, char *why, size_t cap)
{
    int code = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *p = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                                  caseless ? PCRE2_CASELESS : 0, &code, &at, NULL);
    if (p) {
        pcre2_code_free(p);
        return true;
    }
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(code, msg, sizeof msg);
    snprintf(why, cap, "at offset %zu: %s", (size_t)at, (const char *)msg);
    return false;
}

static bool request_fail(struct mcdc_snapshot_request *out, struct mcdc_error *err,
                         const struct mcdc_signal *sig, const char *what)
{
    mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "signal '%s' (%s): %s", sig->id ? sig->id : "?",
                   mcdc_signal_type_name(sig->type), what);
    mcdc_snapshot_request_destroy(out);
    return false;
}

static bool read_collections(const struct mcdc_signal *sig, bson_iter_t *it,
                             struct mcdc_snapshot_request *out, char *why, size_t cap)
{
    bson_iter_t arr;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr)) {
        snprintf(why, cap, "data-collections is not an array of strings");
        return false;
    }
    size_t n = 0;
    bson_iter_t count = arr;
    while (bson_iter_next(&count))
        n++;
    out->collections = xcalloc(n ? n : 1, sizeof *out->collections);
    while (bson_iter_next(&arr)) {
        if (!BSON_ITER_HOLDS_UTF8(&arr)) {
            snprintf(why, cap, "data-collections entry %zu is not a string", out->collection_count);
            return false;
        }
        const char *re = bson_iter_utf8(&arr, NULL);
        char rewhy[200];
        if (!*re) {
            snprintf(why, cap, "data-collections entry %zu is empty", out->collection_count);
            return false;
        }
        if (!regex_ok(re, false, rewhy, sizeof rewhy)) {
            snprintf(why, cap, "data-collections '%s' is not a valid regex %s", re, rewhy);
            return false;
        }
        out->collections[out->collection_count++] = xstrdup(re);
    }
    if (out->collection_count == 0 && sig->type == MCDC_SIGNAL_EXECUTE_SNAPSHOT) {
        snprintf(why, cap, "data-collections is empty");
        return false;
    }
    return true;
}

static bool read_conditions(bson_iter_t *it, struct mcdc_snapshot_request *out, char *why,
                            size_t cap)
{
    bson_iter_t arr;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr)) {
        snprintf(why, cap, "additional-conditions is not an array");
        return false;
    }
    size_t n = 0;
    bson_iter_t count = arr;
    while (bson_iter_next(&count))
        n++;
    out->conditions = xzalloc_aligned(_Alignof(struct mcdc_snapshot_condition),
                                         (n ? n : 1) * sizeof *out->conditions);
    while (bson_iter_next(&arr)) {
        size_t i = out->condition_count;
        bson_iter_t e, f;
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &e)) {
            snprintf(why, cap, "additional-conditions entry %zu is not an object", i);
            return false;
        }
        struct mcdc_snapshot_condition *c = &out->conditions[i];
        bson_init(&c->filter);
        out->condition_count++;
        f = e;
        if (!bson_iter_find(&e, "data-collection") || !BSON_ITER_HOLDS_UTF8(&e)) {
            snprintf(why, cap, "additional-conditions entry %zu has no data-collection string", i);
            return false;
        }
        const char *re = bson_iter_utf8(&e, NULL);
        char rewhy[200];
        if (!regex_ok(re, true, rewhy, sizeof rewhy)) {
            snprintf(why, cap,
                     "additional-conditions data-collection '%.60s' is not a valid regex %.120s",
                     re, rewhy);
            return false;
        }
        c->collection = xstrdup(re);
        if (!bson_iter_find(&f, "filter")) {
            snprintf(why, cap, "additional-conditions entry %zu (%s) has no filter", i, re);
            return false;
        }
        if (BSON_ITER_HOLDS_UTF8(&f)) {
            uint32_t len = 0;
            const char *s = bson_iter_utf8(&f, &len);
            char fwhy[200];
            bson_destroy(&c->filter);
            if (!data_from_json(s, len, &c->filter, fwhy, sizeof fwhy)) {
                snprintf(why, cap, "additional-conditions filter of %s: %s", re,
                         strstr(fwhy, "data ") == fwhy ? fwhy + 5 : fwhy);
                return false;
            }
        } else if (BSON_ITER_HOLDS_DOCUMENT(&f)) {
            /* a sub-document is what the JSON string would have given */
            uint32_t len = 0;
            const uint8_t *data = NULL;
            bson_t view;
            bson_iter_document(&f, &len, &data);
            if (!bson_init_static(&view, data, len)) {
                snprintf(why, cap, "additional-conditions filter of %s is not a document", re);
                return false;
            }
            bson_destroy(&c->filter);
            bson_copy_to(&view, &c->filter);
        } else {
            snprintf(why, cap, "additional-conditions filter of %s is not a JSON string", re);
            return false;
        }
    }
    return true;
}

bool mcdc_signal_snapshot_request(const struct mcdc_signal *sig, struct mcdc_snapshot_request *out,
                                  struct mcdc_error *err)
{
    char why[MCDC_ERROR_MSG_SIZE];
    bson_iter_t it;
    memset(out, 0, sizeof *out);
    if (sig->type != MCDC_SIGNAL_EXECUTE_SNAPSHOT && sig->type != MCDC_SIGNAL_STOP_SNAPSHOT)
        return request_fail(out, err, sig, "not a snapshot request");
    if (bson_iter_init_find(&it, &sig->data, "type") && !BSON_ITER_HOLDS_NULL(&it)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return request_fail(out, err, sig, "data type is not a string");
        const char *t = bson_iter_utf8(&it, NULL);
        if (strcasecmp(t, "blocking") == 0) {
            out->blocking = true;
        } else if (strcasecmp(t, "incremental") != 0) {
            snprintf(why, sizeof why,
                     "unknown snapshot type '%s' (expected incremental or blocking)", t);
            return request_fail(out, err, sig, why);
        }
    }
    if (bson_iter_init_find(&it, &sig->data, "surrogate-key") && !BSON_ITER_HOLDS_NULL(&it))
        return request_fail(out, err, sig, "Surrogate key not supported for MongoDB");
    if (bson_iter_init_find(&it, &sig->data, "data-collections") && !BSON_ITER_HOLDS_NULL(&it)) {
        if (!read_collections(sig, &it, out, why, sizeof why))
            return request_fail(out, err, sig, why);
    } else if (sig->type == MCDC_SIGNAL_EXECUTE_SNAPSHOT) {
        return request_fail(out, err, sig, "no data-collections");
    }
    if (bson_iter_init_find(&it, &sig->data, "additional-conditions") &&
        !BSON_ITER_HOLDS_NULL(&it)) {
        if (!read_conditions(&it, out, why, sizeof why))
            return request_fail(out, err, sig, why);
    }
    return true;
}

void mcdc_snapshot_request_destroy(struct mcdc_snapshot_request *req)
{
    if (!req)
        return;
    for (size_t i = 0; i < req->collection_count; i++)
        free(req->collections[i]);
    free(req->collections);
    for (size_t i = 0; i < req->condition_count; i++) {
        free(req->conditions[i].collection);
        bson_destroy(&req->conditions[i].filter);
    }
    free(req->conditions);
    memset(req, 0, sizeof *req);
}

void mcdc_signal_log(const struct mcdc_signal *sig, const char *offset_json)
{
    bson_iter_t it;
    const char *msg = NULL;
    if (bson_iter_init_find(&it, &sig->data, "message") && BSON_ITER_HOLDS_UTF8(&it))
        msg = bson_iter_utf8(&it, NULL);
    if (!msg || !*msg) {
        LOG_WARN("Logging signal '%s' has arrived but the requested field 'message' is missing "
                 "from data",
                 sig->id ? sig->id : "?");
        return;
    }
    const char *hole = strstr(msg, "{}");
    if (!hole) {
        LOG_INFO("%s", msg);
        return;
    }
    LOG_INFO("%.*s%s%s", (int)(hole - msg), msg, offset_json ? offset_json : "<none>", hole + 2);
}
