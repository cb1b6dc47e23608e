/*
 * encode_bench: throughput of the extended-JSON writer, encode only, one
 * thread (issue "Event encoding", speed section).
 *
 *   encode_bench [SHARED_DIR] [--seconds S] [--set NAME] [--passes N]
 *
 * --set runs one input set only; --passes runs exactly N passes per line
 * instead of S seconds (for instruction counts under callgrind, where the
 * clock is meaningless).
 *
 * Input sets, each held in memory as BSON before timing starts:
 *   datasets   every document of SHARED_DIR/datasets/<db>/<coll>.json (the
 *              directory comes from argv, else env MCDC_SHARED_DIR)
 *   synthetic  ~1 KB documents: strings, ints, a date, an ObjectId, a nested
 *              address, a small array of tags and a few prices
 *   numbers    number-heavy documents: 120 fields, a quarter each prices with
 *              two decimals, full-precision measurements, int32 and int64
 *   prices     the same with the measurements replaced by prices (doubles that
 *              print few digits are cheaper than 16-17 digit ones)
 *
 * For each set it prints MB/s of BSON input and microseconds per document
 * (thread CPU time: mean over all passes, then the best pass; then MB/s by
 * wall-clock time) for
 * mongocdc's writer in STRICT compact (Debezium's `after`), RELAXED compact
 * (the key flavour) and, as the reference line, libbson's
 * bson_as_relaxed_extended_json on the same documents.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "encode/ejson.h"

struct docset {
    const char *name;
    bson_t **docs;
    size_t count;
    size_t cap;
    size_t bytes;
};

static void set_add(struct docset *set, bson_t *doc)
{
    if (set->count == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 1024;
        set->docs = xrealloc(set->docs, set->cap * sizeof set->docs[0]);
    }
    set->docs[set->count++] = doc;
    set->bytes += doc->len;
}

static void set_free(struct docset *set)
{
    for (size_t i = 0; i < set->count; i++) {
        bson_destroy(set->docs[i]);
    }
    free(set->docs);
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this thread: the figure that matters on a shared machine,
 * where wall time also counts other processes' turns on the core. */
static double cpu_s(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static size_t load_json_file(struct docset *set, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return 0;
    }
    char *line = NULL;
    size_t cap = 0, n = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        bson_error_t berr;
        bson_t *doc = bson_new_from_json((const uint8_t *)line, len, &berr);
        if (doc) {
            set_add(set, doc);
            n++;
        }
    }
    free(line);
    fclose(f);
    return n;
}

static void load_datasets(struct docset *set, const char *shared)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/datasets", shared);
    DIR *top = opendir(dir);
    if (!top) {
        fprintf(stderr, "encode_bench: cannot open %s; datasets set skipped\n", dir);
        return;
    }
    struct dirent *db;
    while ((db = readdir(top)) != NULL) {
        if (db->d_name[0] == '.') {
            continue;
        }
        char sub[4096 + 256];
        snprintf(sub, sizeof sub, "%s/%s", dir, db->d_name);
        DIR *d = opendir(sub);
        if (!d) {
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t l = strlen(e->d_name);
            if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
                char path[4096 + 512];
                snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
                load_json_file(set, path);
            }
        }
        closedir(d);
    }
    closedir(top);
}

/* xorshift64*: deterministic inputs */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static void rnd_word(char *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = (char)('a' + rnd() % 26);
    }
    out[n] = '\0';
}

static void make_synthetic(struct docset *set, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        bson_t *doc = bson_new();
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(doc, "_id", &oid);
        char w[160];
        rnd_word(w, 12);
        BSON_APPEND_UTF8(doc, "name", w);
        rnd_word(w, 24);
        BSON_APPEND_UTF8(doc, "email", w);
        BSON_APPEND_INT32(doc, "age", (int32_t)(rnd() % 90));
        BSON_APPEND_INT64(doc, "account", (int64_t)(rnd() >> 2));
        BSON_APPEND_DATE_TIME(doc, "created", 1600000000000 + (int64_t)(rnd() % 100000000000));
        BSON_APPEND_BOOL(doc, "active", rnd() & 1);
        bson_t addr;
        BSON_APPEND_DOCUMENT_BEGIN(doc, "address", &addr);
        rnd_word(w, 20);
        BSON_APPEND_UTF8(&addr, "street", w);
        rnd_word(w, 10);
        BSON_APPEND_UTF8(&addr, "city", w);
        BSON_APPEND_UTF8(&addr, "zip", "0150");
        bson_append_document_end(doc, &addr);
        bson_t tags;
        BSON_APPEND_ARRAY_BEGIN(doc, "tags", &tags);
        for (int t = 0; t < 6; t++) {
            char key[8];
            snprintf(key, sizeof key, "%d", t);
            rnd_word(w, 8);
            BSON_APPEND_UTF8(&tags, key, w);
        }
        bson_append_array_end(doc, &tags);
        for (int p = 0; p < 4; p++) {
            char key[16];
            snprintf(key, sizeof key, "price%d", p);
            BSON_APPEND_DOUBLE(doc, key, (double)(rnd() % 100000) / 100.0);
        }
        rnd_word(w, 150);
        BSON_APPEND_UTF8(doc, "bio", w);
        rnd_word(w, 150);
        BSON_APPEND_UTF8(doc, "notes", w);
        rnd_word(w, 150);
        BSON_APPEND_UTF8(doc, "comment", w);
        BSON_APPEND_UTF8(doc, "text",
                         "Line one\nline \"two\" with a tab\tand unicode \xc3\xa9\xe2\x82\xac");
        set_add(set, doc);
    }
}

/*
 * full: each field cycles through a price (two decimals), a full-precision
 * measurement, an int32 and an int64. Otherwise (the "prices" set) the
 * measurement is replaced by a second price: the cost of doubles depends on
 * how many digits they print.
 */
static void make_numbers(struct docset *set, size_t count, bool full)
{
    for (size_t i = 0; i < count; i++) {
        bson_t *doc = bson_new();
        BSON_APPEND_INT64(doc, "_id", (int64_t)i);
        for (int k = 0; k < 120; k++) {
            char key[8];
            snprintf(key, sizeof key, "v%d", k);
            switch (k % 4) {
            case 0: /* a price */
                BSON_APPEND_DOUBLE(doc, key, (double)(rnd() % 1000000) / 100.0);
                break;
            case 1: /* a measurement with full precision, or another price */
                if (full) {
                    BSON_APPEND_DOUBLE(doc, key,
                                       (double)(rnd() >> 11) / 9007199254740992.0 * 1000.0);
                } else {
                    BSON_APPEND_DOUBLE(doc, key, (double)(rnd() % 1000000) / 100.0);
                }
                break;
            case 2:
                BSON_APPEND_INT32(doc, key, (int32_t)(rnd() % 2000000) - 1000000);
                break;
            default:
                BSON_APPEND_INT64(doc, key, (int64_t)(rnd() >> 1) - (INT64_MAX / 2));
                break;
            }
        }
        set_add(set, doc);
    }
}

enum bench_kind { BENCH_STRICT = 0, BENCH_RELAXED, BENCH_LIBBSON, BENCH_KIND_COUNT };

static const char *const kind_names[BENCH_KIND_COUNT] = {
    "mongocdc STRICT compact", "mongocdc RELAXED compact", "libbson relaxed (reference)"};

/* Runs kind over set for at least `seconds`; prints one line. */
/* One pass over the set; returns the output bytes. */
static size_t pass(const struct docset *set, enum bench_kind kind, struct ejson_buf *buf)
{
    size_t out_bytes = 0;
    for (size_t i = 0; i < set->count; i++) {
        if (kind == BENCH_LIBBSON) {
            size_t len;
            char *s = bson_as_relaxed_extended_json(set->docs[i], &len);
            out_bytes += len;
            bson_free(s);
        } else {
            ejson_buf_reset(buf);
            ejson_write_document(buf, set->docs[i],
                                 kind == BENCH_STRICT ? EJSON_STRICT : EJSON_RELAXED,
                                 EJSON_SEP_COMPACT);
            out_bytes += buf->len;
        }
    }
    return out_bytes;
}

/*
 * Runs kind over set for at least `seconds`; prints one line: the mean rate
 * over all passes (thread CPU time), the best single pass (the figure least
 * disturbed by other processes on a shared machine) and the wall-clock rate.
 */
static void run(const struct docset *set, enum bench_kind kind, double seconds, size_t passes)
{
    struct ejson_buf buf = {0};
    size_t out_bytes = 0, rounds = 0;
    double best = 1e30;
    double t0 = now_s(), t1;
    double c0 = cpu_s();
    do {
        double p0 = cpu_s();
        out_bytes += pass(set, kind, &buf);
        double p = cpu_s() - p0;
        if (p < best) {
            best = p;
        }
        rounds++;
        t1 = now_s();
    } while (passes ? rounds < passes : t1 - t0 < seconds);
    double el = t1 - t0;
    double cpu = cpu_s() - c0;
    double mb = (double)set->bytes / 1e6;
    size_t docs = set->count * rounds;
    printf("%-10s %-28s %7.1f MB/s %7.3f us/doc | best pass %7.1f MB/s %7.3f us/doc | "
           "wall %7.1f MB/s | %zu docs x %zu, %zu B in, %zu B out per doc\n",
           set->name, kind_names[kind], mb * (double)rounds / cpu, cpu * 1e6 / (double)docs,
           mb / best, best * 1e6 / (double)set->count, mb * (double)rounds / el, set->count, rounds,
           set->bytes / set->count, out_bytes / docs);
    ejson_buf_free(&buf);
}

int main(int argc, char **argv)
{
    const char *shared = getenv("MCDC_SHARED_DIR");
    double seconds = 1.0;
    size_t passes = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc) {
            passes = (size_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            shared = argv[i];
        }
    }
    struct docset sets[4] = {
        {.name = "datasets"}, {.name = "synthetic"}, {.name = "numbers"}, {.name = "prices"}};
    if (only == NULL || strcmp(only, "datasets") == 0) {
        if (shared) {
            load_datasets(&sets[0], shared);
        } else {
            fprintf(stderr,
                    "encode_bench: no shared folder (argv or MCDC_SHARED_DIR); datasets skipped\n");
        }
    }
    make_synthetic(&sets[1], 20000);
    make_numbers(&sets[2], 5000, true);
    make_numbers(&sets[3], 5000, false);
    for (int s = 0; s < 4; s++) {
        if (sets[s].count == 0 || (only && strcmp(only, sets[s].name) != 0)) {
            set_free(&sets[s]);
            continue;
        }
        for (int k = 0; k < BENCH_KIND_COUNT; k++) {
            run(&sets[s], (enum bench_kind)k, seconds, passes);
        }
        set_free(&sets[s]);
    }
    return 0;
}
