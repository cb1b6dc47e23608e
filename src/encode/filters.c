/*
 * filters: which namespaces are captured (debezium-format.md §7.2, Debezium's
 * Filters) and the server-side $match stage that pre-filters the change
 * stream.
 *
 * Client side, a namespace db.coll is captured when
 *     it is the signal collection (always captured), or
 *     db is not admin/config/local, and db passes database.include.list /
 *     database.exclude.list, and "db.coll" passes collection.include.list /
 *     collection.exclude.list.
 * Regex mode: every entry is one Java-style regular expression, matched
 * anchored at both ends and case-insensitively (Pattern.CASE_INSENSITIVE +
 * matcher.matches()); compiled once with PCRE2. PCRE2_CASELESS with UTF folds
 * non-ASCII letters too, where Java without UNICODE_CASE folds ASCII only.
 * Literal mode: case-insensitive (ASCII) exact comparison of the trimmed entry.
 * Entries arrive split and trimmed from the config.
 */
#include "encode/encode_internal.h"

#include <string.h>
#include <strings.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/xalloc.h"

static const char *const builtin_dbs[] = {"admin", "config", "local"};

static bool compile_list(struct pattern_list *pl, const struct mcdc_strlist *sl, bool literal,
                         const char *what, struct mcdc_error *err)
{
    pl->count = sl->count;
    pl->text = sl->items;
    if (literal || sl->count == 0)
        return true;
    pl->code = xcalloc(sl->count, sizeof *pl->code);
    for (size_t i = 0; i < sl->count; i++) {
        int code = 0;
        PCRE2_SIZE off = 0;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)sl->items[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_CASELESS | PCRE2_UTF | PCRE2_MATCH_INVALID_UTF |
                                           PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                       &code, &off, NULL);
        if (re == NULL) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(code, msg, sizeof msg);
            return mcdc_error_set(err, MCDC_ERR_CONFIG, code,
                                  "%s: invalid regular expression \"%s\" at offset %zu: %s", what,
                                  sl->items[i], (size_t)off, (const char *)msg);
        }
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* best effort */
        pl->code[i] = re;
    }
    return true;
}

static void free_list(struct pattern_list *pl)
{
    if (pl->code) {
        for (size_t i = 0; i < pl->count; i++)
            pcre2_code_free(pl->code[i]);
        free(pl->code);
    }
    memset(pl, 0, sizeof *pl);
}

bool filters_init(struct filters *f, const struct mcdc_config *cfg, struct mcdc_error *err)
{
    memset(f, 0, sizeof *f);
    f->literal = cfg->filters_match_mode == MCDC_FILTER_MATCH_LITERAL;
    if (!compile_list(&f->db_include, &cfg->database_include, f->literal, "database.include.list",
                      err) ||
        !compile_list(&f->db_exclude, &cfg->database_exclude, f->literal, "database.exclude.list",
                      err) ||
        !compile_list(&f->coll_include, &cfg->collection_include, f->literal,
                      "collection.include.list", err) ||
        !compile_list(&f->coll_exclude, &cfg->collection_exclude, f->literal,
                      "collection.exclude.list", err)) {
        filters_free(f);
        return false;
    }
    const char *sig = cfg->signal_data_collection;
    const char *dot = sig ? strchr(sig, '.') : NULL;
    if (dot && dot != sig && dot[1] != '\0') {
        f->signal_db = xstrndup(sig, (size_t)(dot - sig));
        f->signal_coll = xstrdup(dot + 1);
    }
    f->match_data = pcre2_match_data_create(1, NULL);
    return true;
}

void filters_free(struct filters *f)
{
    free_list(&f->db_include);
    free_list(&f->db_exclude);
    free_list(&f->coll_include);
    free_list(&f->coll_exclude);
    free(f->signal_db);
    free(f->signal_coll);
    pcre2_match_data_free(f->match_data);
    memset(f, 0, sizeof *f);
}

/* True if s matches any entry of pl. */
static bool list_matches(const struct filters *f, const struct pattern_list *pl, const char *s,
                         size_t n)
{
    for (size_t i = 0; i < pl->count; i++) {
        if (f->literal) {
            if (strlen(pl->text[i]) == n && strncasecmp(pl->text[i], s, n) == 0)
                return true;
        } else if (pcre2_match(pl->code[i], (PCRE2_SPTR)s, n, 0, 0, f->match_data, NULL) >= 0) {
            return true;
        }
    }
    return false;
}

/* include list given: must match one; else exclude list: must match none. */
static bool passes(const struct filters *f, const struct pattern_list *inc,
                   const struct pattern_list *exc, const char *s, size_t n)
{
    if (inc->count)
        return list_matches(f, inc, s, n);
    if (exc->count)
        return !list_matches(f, exc, s, n);
    return true;
}

bool filters_captures(const struct filters *f, const char *db, size_t db_len, const char *coll,
                      size_t coll_len)
{
    if (f->signal_db && strlen(f->signal_db) == db_len && memcmp(f->signal_db, db, db_len) == 0 &&
        strlen(f->signal_coll) == coll_len && memcmp(f->signal_coll, coll, coll_len) == 0)
        return true;
    for (size_t i = 0; i < sizeof builtin_dbs / sizeof builtin_dbs[0]; i++)
        if (strlen(builtin_dbs[i]) == db_len && memcmp(builtin_dbs[i], db, db_len) == 0)
            return false;
    if (!passes(f, &f->db_include, &f->db_exclude, db, db_len))
        return false;
    if (f->coll_include.count == 0 && f->coll_exclude.count == 0)
        return true;

    char stack[512];
    size_t n = db_len + 1 + coll_len;
    char *ns = n < sizeof stack ? stack : xmalloc(n + 1);
    memcpy(ns, db, db_len);
    ns[db_len] = '.';
    memcpy(ns + db_len + 1, coll, coll_len);
    ns[n] = '\0';
    bool ok = passes(f, &f->coll_include, &f->coll_exclude, ns, n);
    if (ns != stack)
        free(ns);
    return ok;
}

/* ---- server-side $match ------------------------------------------------- */

/*
 * The server refuses a regular expression longer than 16384 bytes (2^14,
 * PCRE2's max_pattern_length as MongoDB sets it; jstests/core/regex_limit.js
 * and jstests/aggregation/expressions/regex_limits.js): error 51091 in a
 * query or $match ($regex, /re/), 51111 in $regexMatch. A long include or
 * exclude list is therefore sent as several alternations, each within it.
 */
#define SERVER_REGEX_MAX 16384

/* Alternations of a list's entries, each at most SERVER_REGEX_MAX bytes. */
struct regex_parts {
    char **re;
    size_t count;
};

static void regex_parts_free(struct regex_parts *rp)
{
    for (size_t i = 0; i < rp->count; i++)
        free(rp->re[i]);
    free(rp->re);
    rp->re = NULL;
    rp->count = 0;
}

static void quote_literal(struct ejson_buf *b, const char *s);

/*
 * Splits pl's entries, in order, into "<head>a1|a2...<tail>" alternations of
 * at most SERVER_REGEX_MAX bytes, an entry ai being "(?:<entry>)" or, when
 * quote, the entry regex-quoted. Returns false (out empty) when one entry does
 * not fit alone: then the list gets no server-side condition and only the
 * client-side filter (filters_captures) applies to it.
 */
static bool split_alternation(const struct pattern_list *pl, bool quote, const char *head,
                              const char *tail, struct regex_parts *out)
{
    struct ejson_buf cur = {0}, one = {0};
    size_t hl = strlen(head), tl = strlen(tail);
    bool ok = true;

    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < pl->count && ok; i++) {
        one.len = 0;
        if (quote) {
            quote_literal(&one, pl->text[i]);
        } else {
            ejson_buf_append(&one, "(?:", 3);
            ejson_buf_append(&one, pl->text[i], strlen(pl->text[i]));
            ejson_buf_append(&one, ")", 1);
        }
        if (hl + one.len + tl > SERVER_REGEX_MAX) {
            ok = false;
            break;
        }
        if (cur.len > 0 && cur.len + 1 + one.len + tl > SERVER_REGEX_MAX) {
            ejson_buf_append(&cur, tail, tl);
            out->re = xrealloc(out->re, (out->count + 1) * sizeof *out->re);
            out->re[out->count++] = xstrndup(cur.data, cur.len);
            cur.len = 0;
        }
        if (cur.len == 0)
            ejson_buf_append(&cur, head, hl);
        else
            ejson_buf_append(&cur, "|", 1);
        ejson_buf_append(&cur, one.data, one.len);
    }
    if (ok && cur.len > 0) {
        ejson_buf_append(&cur, tail, tl);
        out->re = xrealloc(out->re, (out->count + 1) * sizeof *out->re);
        out->re[out->count++] = xstrndup(cur.data, cur.len);
    }
    if (!ok)
        regex_parts_free(out);
    ejson_buf_free(&cur);
    ejson_buf_free(&one);
    return ok;
}

/* Appends to and_arr one condition per part when exclude (each must fail),
 * or one condition, {$or: [one per part]} when there are several, when
 * include. add(doc, re, include) appends a part's condition fields to doc. */
static void append_parts(bson_t *and_arr, int *idx, const struct regex_parts *rp, bool include,
                         void (*add)(bson_t *doc, const char *re, bool include, const char *opts),
                         const char *opts)
{
    char key[16];
    const char *k;
    bson_t cond, or_arr, alt;
    if (!include || rp->count == 1) {
        for (size_t i = 0; i < rp->count; i++) {
            bson_uint32_to_string((uint32_t)(*idx)++, &k, key, sizeof key);
            bson_append_document_begin(and_arr, k, -1, &cond);
            add(&cond, rp->re[i], include, opts);
            bson_append_document_end(and_arr, &cond);
        }
        return;
    }
    bson_uint32_to_string((uint32_t)(*idx)++, &k, key, sizeof key);
    bson_append_document_begin(and_arr, k, -1, &cond);
    bson_append_array_begin(&cond, "$or", -1, &or_arr);
    for (size_t i = 0; i < rp->count; i++) {
        char ik[16];
        const char *ikp;
        bson_uint32_to_string((uint32_t)i, &ikp, ik, sizeof ik);
        bson_append_document_begin(&or_arr, ikp, -1, &alt);
        add(&alt, rp->re[i], include, opts);
        bson_append_document_end(&or_arr, &alt);
    }
    bson_append_array_end(&cond, &or_arr);
    bson_append_document_end(and_arr, &cond);
}

/* {"<field>": /re/opts} or {"<field>": {$not: /re/opts}} */
static void add_field_regex(bson_t *doc, const char *field, const char *re, bool include,
                            const char *opts)
{
    bson_t op;
    if (include) {
        bson_append_regex(doc, field, -1, re, opts);
    } else {
        bson_append_document_begin(doc, field, -1, &op);
        bson_append_regex(&op, "$not", -1, re, opts);
        bson_append_document_end(doc, &op);
    }
}

static void add_db_regex(bson_t *doc, const char *re, bool include, const char *opts)
{
    add_field_regex(doc, "ns.db", re, include, opts);
}

static void add_oplog_ns_regex(bson_t *doc, const char *re, bool include, const char *opts)
{
    add_field_regex(doc, "ns", re, include, opts);
}

/* {$expr: $regexMatch of "<db>.<coll>"} or {$expr: {$not: [that]}} */
static void add_ns_regex_match(bson_t *doc, const char *re, bool include, const char *opts)
{
    bson_t *m = BCON_NEW("$regexMatch", "{", "input", "{", "$concat", "[", "$ns.db", ".",
                         "$ns.coll", "]", "}", "regex", BCON_UTF8(re), "options", opts, "}");
    if (include) {
        bson_append_document(doc, "$expr", -1, m);
    } else {
        bson_t notdoc, notarr;
        bson_append_document_begin(doc, "$expr", -1, &notdoc);
        bson_append_array_begin(&notdoc, "$not", -1, &notarr);
        bson_append_document(&notarr, "0", -1, m);
        bson_append_array_end(&notdoc, &notarr);
        bson_append_document_end(doc, &notdoc);
    }
    bson_destroy(m);
}

/* {"ns.db": {$in|$nin: [...]}}, or the anchored alternations of the
 * entries: {"ns.db": /re/i} (several: $or) / {"ns.db": {$not: /re/i}} each. */
static void db_condition(bson_t *and_arr, int *idx, const struct filters *f,
                         const struct pattern_list *pl, bool include)
{
    char key[16];
    const char *k;
    bson_t cond, op, arr;
    if (!f->literal) {
        struct regex_parts rp;
        if (split_alternation(pl, false, "^(?:", ")$", &rp))
            append_parts(and_arr, idx, &rp, include, add_db_regex, "i");
        regex_parts_free(&rp);
        return;
    }
    bson_uint32_to_string((uint32_t)(*idx)++, &k, key, sizeof key);
    bson_append_document_begin(and_arr, k, -1, &cond);
    bson_append_document_begin(&cond, "ns.db", -1, &op);
    bson_append_array_begin(&op, include ? "$in" : "$nin", -1, &arr);
    for (size_t i = 0; i < pl->count; i++) {
        char ik[16];
        const char *ikp;
        bson_uint32_to_string((uint32_t)i, &ikp, ik, sizeof ik);
        bson_append_utf8(&arr, ikp, -1, pl->text[i], -1);
    }
    bson_append_array_end(&op, &arr);
    bson_append_document_end(&cond, &op);
    bson_append_document_end(and_arr, &cond);
}

/* Literal: {"ns": {$in|$nin: [{db, coll}, ...]}}. Regex: $expr matching
 * $concat(ns.db, ".", ns.coll) against the anchored alternations (several
 * under $or when including, each one negated when excluding). */
static void coll_condition(bson_t *and_arr, int *idx, const struct filters *f,
                           const struct pattern_list *pl, bool include)
{
    char key[16];
    const char *k;
    bson_t cond, op, arr, item;
    if (!f->literal) {
        struct regex_parts rp;
        if (split_alternation(pl, false, "^(?:", ")$", &rp))
            append_parts(and_arr, idx, &rp, include, add_ns_regex_match, "i");
        regex_parts_free(&rp);
        return;
    }
    bson_uint32_to_string((uint32_t)(*idx)++, &k, key, sizeof key);
    bson_append_document_begin(and_arr, k, -1, &cond);
    bson_append_document_begin(&cond, "ns", -1, &op);
    bson_append_array_begin(&op, include ? "$in" : "$nin", -1, &arr);
    for (size_t i = 0; i < pl->count; i++) {
        char ik[16];
        const char *ikp;
        const char *t = pl->text[i];
        const char *dot = strchr(t, '.');
        bson_uint32_to_string((uint32_t)i, &ikp, ik, sizeof ik);
        bson_append_document_begin(&arr, ikp, -1, &item);
        bson_append_utf8(&item, "db", -1, t, dot ? (int)(dot - t) : -1);
        bson_append_utf8(&item, "coll", -1, dot ? dot + 1 : "", -1);
        bson_append_document_end(&arr, &item);
    }
    bson_append_array_end(&op, &arr);
    bson_append_document_end(&cond, &op);
    bson_append_document_end(and_arr, &cond);
}

static void ns_conditions(bson_t *doc, const struct filters *f)
{
    bson_t and_arr, cond, op, arr;
    int idx = 0;
    bson_append_array_begin(doc, "$and", -1, &and_arr);
    bson_append_document_begin(&and_arr, "0", -1, &cond);
    idx++;
    bson_append_document_begin(&cond, "ns.db", -1, &op);
    bson_append_array_begin(&op, "$nin", -1, &arr);
    for (size_t i = 0; i < sizeof builtin_dbs / sizeof builtin_dbs[0]; i++) {
        char ik[16];
        const char *ikp;
        bson_uint32_to_string((uint32_t)i, &ikp, ik, sizeof ik);
        bson_append_utf8(&arr, ikp, -1, builtin_dbs[i], -1);
    }
    bson_append_array_end(&op, &arr);
    bson_append_document_end(&cond, &op);
    bson_append_document_end(&and_arr, &cond);
    if (f->db_include.count)
        db_condition(&and_arr, &idx, f, &f->db_include, true);
    else if (f->db_exclude.count)
        db_condition(&and_arr, &idx, f, &f->db_exclude, false);
    if (f->coll_include.count)
        coll_condition(&and_arr, &idx, f, &f->coll_include, true);
    else if (f->coll_exclude.count)
        coll_condition(&and_arr, &idx, f, &f->coll_exclude, false);
    bson_append_array_end(doc, &and_arr);
}

bool encoder_build_stream_match(const struct encoder *enc, bson_t *stage_out,
                                struct mcdc_error *err)
{
    const struct filters *f = &enc->filters;
    static const struct {
        const char *type;
        enum mcdc_op op;
    } types[] = {{"insert", MCDC_OP_INSERT},
                 {"update", MCDC_OP_UPDATE},
                 {"replace", MCDC_OP_REPLACE},
                 {"delete", MCDC_OP_DELETE}};
    bson_t match, and_arr, or_doc, or_arr, ns_doc, sig, ops, op_in, in_arr;

    (void)err; /* building BSON cannot fail: libbson aborts on out-of-memory */
    bson_init(stage_out);
    bson_append_document_begin(stage_out, "$match", -1, &match);
    bson_append_array_begin(&match, "$and", -1, &and_arr);

    bson_append_document_begin(&and_arr, "0", -1, &or_doc);
    bson_append_array_begin(&or_doc, "$or", -1, &or_arr);
    bson_append_document_begin(&or_arr, "0", -1, &ns_doc);
    ns_conditions(&ns_doc, f);
    bson_append_document_end(&or_arr, &ns_doc);
    if (f->signal_db) {
        bson_append_document_begin(&or_arr, "1", -1, &sig);
        bson_append_utf8(&sig, "ns.db", -1, f->signal_db, -1);
        bson_append_utf8(&sig, "ns.coll", -1, f->signal_coll, -1);
        bson_append_document_end(&or_arr, &sig);
    }
    bson_append_array_end(&or_doc, &or_arr);
    bson_append_document_end(&and_arr, &or_doc);

    bson_append_document_begin(&and_arr, "1", -1, &ops);
    bson_append_document_begin(&ops, "operationType", -1, &op_in);
    bson_append_array_begin(&op_in, "$in", -1, &in_arr);
    uint32_t n = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (enc->skip_op[types[i].op])
            continue;
        char ik[16];
        const char *ikp;
        bson_uint32_to_string(n++, &ikp, ik, sizeof ik);
        bson_append_utf8(&in_arr, ikp, -1, types[i].type, -1);
    }
    /* Namespace events of captured collections pass too, only to be logged
     * (MongoDB "Change Events": drop, rename, dropDatabase); a dropDatabase
     * has no ns.coll, so under a collection filter only the drop of each of
     * its collections, which precedes it, is seen. */
    static const char *const ns_events[] = {"drop", "rename", "dropDatabase"};
    for (size_t i = 0; i < sizeof ns_events / sizeof ns_events[0]; i++) {
        char ik[16];
        const char *ikp;
        bson_uint32_to_string(n++, &ikp, ik, sizeof ik);
        bson_append_utf8(&in_arr, ikp, -1, ns_events[i], -1);
    }
    bson_append_array_end(&op_in, &in_arr);
    bson_append_document_end(&ops, &op_in);
    bson_append_document_end(&and_arr, &ops);

    bson_append_array_end(&match, &and_arr);
    bson_append_document_end(stage_out, &match);
    return true;
}

bool encoder_captures(const struct encoder *enc, const char *db, const char *coll)
{
    return filters_captures(&enc->filters, db, strlen(db), coll, strlen(coll));
}

/* ---- oplog query (capture.mode oplog) ---------------------------------- */

/* Regex-quotes a literal name for the server's PCRE. */
static void quote_literal(struct ejson_buf *b, const char *s)
{
    for (; *s; s++) {
        if (strchr("\\^$.|?*+()[]{}", *s))
            ejson_buf_append(b, "\\", 1);
        ejson_buf_append(b, s, 1);
    }
}

/* {ns: /re/} or {ns: {$not: /re/}} for the alternations "^(?:(?:p1)|(?:p2))<tail>"
 * (regex mode, case-insensitive) or "^(?:lit1|lit2)<tail>" (literal, matched
 * case-sensitively), split within the server's regex limit (several under
 * $or when including, each one negated when excluding). */
static void oplog_ns_condition(bson_t *and_arr, int *idx, const struct filters *f,
                               const struct pattern_list *pl, const char *tail, bool include)
{
    char tl[16];
    struct regex_parts rp;
    snprintf(tl, sizeof tl, ")%s", tail);
    if (split_alternation(pl, f->literal, "^(?:", tl, &rp))
        append_parts(and_arr, idx, &rp, include, add_oplog_ns_regex, f->literal ? "" : "i");
    regex_parts_free(&rp);
}

bool encoder_build_oplog_query(const struct encoder *enc, bson_t *query_out,
                               struct mcdc_error *err)
{
    const struct filters *f = &enc->filters;
    static const struct {
        const char *letter;
        enum mcdc_op op;
    } types[] = {{"i", MCDC_OP_INSERT}, {"u", MCDC_OP_UPDATE}, {"d", MCDC_OP_DELETE}};
    bson_t or_arr, data, ops, in_arr, and_arr, sig, builtin;
    int idx = 0;
    uint32_t n = 0;
    char key[16];
    const char *k;

    (void)err; /* building BSON cannot fail: libbson aborts on out-of-memory */
    bson_init(query_out);
    bson_append_array_begin(query_out, "$or", -1, &or_arr);
    bson_append_document_begin(&or_arr, "0", -1, &data);
    bson_append_document_begin(&data, "op", -1, &ops);
    bson_append_array_begin(&ops, "$in", -1, &in_arr);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char ik[16];
        const char *ikp;
        /* an update and a replace share the oplog letter u */
        if (enc->skip_op[types[i].op])
            continue;
        bson_uint32_to_string(n++, &ikp, ik, sizeof ik);
        bson_append_utf8(&in_arr, ikp, -1, types[i].letter, -1);
    }
    bson_append_array_end(&ops, &in_arr);
    bson_append_document_end(&data, &ops);
    bson_append_array_begin(&data, "$and", -1, &and_arr);
    bson_uint32_to_string((uint32_t)idx++, &k, key, sizeof key);
    bson_append_document_begin(&and_arr, k, -1, &builtin);
    add_oplog_ns_regex(&builtin, "^(?:admin|config|local)\\.", false, "");
    bson_append_document_end(&and_arr, &builtin);
    if (f->db_include.count || f->db_exclude.count) {
        bool inc = f->db_include.count > 0;
        oplog_ns_condition(&and_arr, &idx, f, inc ? &f->db_include : &f->db_exclude, "\\.", inc);
    }
    if (f->coll_include.count || f->coll_exclude.count) {
        bool inc = f->coll_include.count > 0;
        oplog_ns_condition(&and_arr, &idx, f, inc ? &f->coll_include : &f->coll_exclude, "$",
                           inc);
    }
    bson_append_array_end(&data, &and_arr);
    bson_append_document_end(&or_arr, &data);
    if (f->signal_db) {
        char *ns = NULL;
        size_t dl = strlen(f->signal_db), cl = strlen(f->signal_coll);
        ns = xmalloc(dl + cl + 2);
        memcpy(ns, f->signal_db, dl);
        ns[dl] = '.';
        memcpy(ns + dl + 1, f->signal_coll, cl + 1);
        bson_append_document_begin(&or_arr, "1", -1, &sig);
        bson_append_utf8(&sig, "ns", -1, ns, -1);
        bson_append_document_end(&or_arr, &sig);
        free(ns);
    }
    bson_append_array_end(query_out, &or_arr);
    return true;
}
