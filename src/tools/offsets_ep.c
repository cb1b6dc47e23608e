/*
 * tools/offsets_ep: the offsets stores `mongocdc offsets` reads and writes
 * (tools_internal.h): the configured store, another mongocdc file store or
 * Kafka topic, and a Debezium Server offsets file (offsets/dbzfile.h), keys
 * and values copied byte for byte. A file store is written under the
 * daemon's lock; a Kafka topic and a Debezium file have none (said on
 * stderr).
 *
 * Thread: main.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "offsets/dbzfile.h"
#include "offsets/offsets.h"
#include "offsets/offsets_internal.h"
#include "tools/tools_internal.h"

void kvlist_free(struct kvlist *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

/* Sets key to value (NULL: deletion), last write wins. */
void kvlist_set(struct kvlist *l, const char *key, size_t klen, const char *value, size_t vlen)
{
    for (size_t i = 0; i < l->count; i++) {
        struct kv *e = &l->items[i];
        if (strlen(e->key) == klen && !memcmp(e->key, key, klen)) {
            free(e->value);
            e->value = value ? xstrndup(value, vlen) : NULL;
            return;
        }
    }
    l->items = xrealloc(l->items, (l->count + 1) * sizeof *l->items);
    l->items[l->count].key = xstrndup(key, klen);
    l->items[l->count].value = value ? xstrndup(value, vlen) : NULL;
    l->count++;
}

bool parse_endpoint(const struct mcdc_config *cfg, const char *spec, struct endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    ep->cfg = *cfg;
    ep->spec = spec;
    if (!strcmp(spec, "store"))
        return true;
    if (!strncmp(spec, "file:", 5) && spec[5]) {
        ep->cfg.offset_storage = MCDC_OFFSETS_FILE;
        ep->cfg.offsets_file = (char *)spec + 5;
        return true;
    }
    if (!strncmp(spec, "kafka:", 6) && spec[6]) {
        ep->cfg.offset_storage = MCDC_OFFSETS_KAFKA;
        ep->cfg.offsets_topic = (char *)spec + 6;
        return true;
    }
    if (!strncmp(spec, "debezium-file:", 14) && spec[14]) {
        ep->kind = EP_DBZFILE;
        ep->path = spec + 14;
        return true;
    }
    fprintf(stderr,
            "mongocdc offsets: '%s' is not an offsets store (store, file:PATH, kafka:TOPIC, "
            "debezium-file:PATH)\n",
            spec);
    return false;
}

const char *ep_label(const struct endpoint *ep, char *buf, size_t n)
{
    if (ep->kind == EP_DBZFILE)
        snprintf(buf, n, "Debezium offsets file %s", ep->path);
    else if (ep->cfg.offset_storage == MCDC_OFFSETS_KAFKA)
        snprintf(buf, n, "offsets topic %s",
                 ep->cfg.offsets_topic ? ep->cfg.offsets_topic : "mongocdc-offsets");
    else
        snprintf(buf, n, "offsets file %s", ep->cfg.offsets_file);
    return buf;
}

/* JsonConverter with schemas.enable=true wraps what it writes as
 * {"schema":null,"payload":X} when there is no schema: Debezium 1.x's
 * embedded engine (so Debezium Server 1.x) writes its offsets keys that way,
 * 2.x and later and Kafka Connect workers write X alone. */
#define ENVELOPE_HEAD "{\"schema\":null,\"payload\":"

/* The length of X when s (n bytes) is such an envelope, else 0. */
static size_t envelope_inner(const char *s, size_t n)
{
    size_t h = sizeof ENVELOPE_HEAD - 1;
    if (n > h + 1 && !memcmp(s, ENVELOPE_HEAD, h) && s[n - 1] == '}')
        return n - h - 1;
    return 0;
}

/* Every entry of ep (read-only: a running daemon's store can be read). Keys
 * and values of a Debezium file are given without the envelope. */
bool ep_list(const struct endpoint *ep, struct kvlist *out, struct mcdc_error *err)
{
    if (ep->kind == EP_DBZFILE) {
        struct dbz_offsets m = {0};
        bool exists;
        if (!dbzfile_read(ep->path, &m, &exists, err))
            return false;
        if (!exists) {
            return mcdc_error_set(err, MCDC_ERR_IO, ENOENT, "Debezium offsets file %s: %s",
                                  ep->path, strerror(ENOENT));
        }
        for (size_t i = 0; i < m.count; i++) {
            const struct dbz_offset_entry *e = &m.items[i];
            if (!e->key || !e->value)
                continue; /* null: nothing stored (FileOffsetBackingStore keeps the slot) */
            const char *k = (const char *)e->key, *v = (const char *)e->value;
            size_t kl = e->key_len, vl = e->value_len, in;
            if ((in = envelope_inner(k, kl)) > 0) {
                k += sizeof ENVELOPE_HEAD - 1;
                kl = in;
            }
            if ((in = envelope_inner(v, vl)) > 0) {
                v += sizeof ENVELOPE_HEAD - 1;
                vl = in;
            }
            kvlist_set(out, k, kl, v, vl);
        }
        dbz_offsets_free(&m);
        return true;
    }
    struct offset_store *store = offset_store_open_read_only(&ep->cfg, err);
    if (!store)
        return false;
    struct offset_entry *all = NULL;
    size_t n = 0;
    bool ok = offset_store_scan(store, &all, &n, err);
    offset_store_close(store);
    for (size_t i = 0; ok && i < n; i++)
        if (all[i].value_json) /* NULL: deleted */
            kvlist_set(out, all[i].key, strlen(all[i].key), all[i].value_json,
                       strlen(all[i].value_json));
    offset_entries_free(all, n);
    return ok;
}

/* Writes every entry of in (value NULL: deletes the key) into ep, in one
 * go: one lock and one rewrite for a file store and a Debezium file. */
bool ep_write(const struct endpoint *ep, const struct kvlist *in, struct mcdc_error *err)
{
    char label[512];
    ep_label(ep, label, sizeof label);
    if (ep->kind == EP_DBZFILE) {
        struct dbz_offsets m = {0};
        bool exists;
        if (!dbzfile_read(ep->path, &m, &exists, err))
            return false;
        /* the form the file already uses (Debezium 1.x: keys in the envelope) */
        bool wrap_keys = false, wrap_values = false;
        for (size_t i = 0; i < m.count; i++) {
            wrap_keys |=
                m.items[i].key && envelope_inner((char *)m.items[i].key, m.items[i].key_len);
            wrap_values |=
                m.items[i].value && envelope_inner((char *)m.items[i].value, m.items[i].value_len);
        }
        for (size_t i = 0; i < in->count; i++) {
            const char *key = in->items[i].key, *value = in->items[i].value;
            char *plain_key = xstrdup(key);
            char *wrapped_key = xasprintf(ENVELOPE_HEAD "%s}", key);
            char *v = value && wrap_values ? xasprintf(ENVELOPE_HEAD "%s}", value)
                                           : (value ? xstrdup(value) : NULL);
            /* one entry per partition, in the file's form */
            const char *drop = wrap_keys ? plain_key : wrapped_key;
            const char *keep = wrap_keys ? wrapped_key : plain_key;
            dbz_offsets_remove(&m, drop, strlen(drop));
            dbz_offsets_put(&m, keep, strlen(keep), v, v ? strlen(v) : 0);
            free(plain_key);
            free(wrapped_key);
            free(v);
        }
        fprintf(stderr,
                "mongocdc offsets: note: %s has no lock; Debezium Server or the engine must be "
                "stopped, or it overwrites this at its next offset flush\n",
                label);
        bool ok = dbzfile_write(ep->path, &m, err);
        dbz_offsets_free(&m);
        return ok;
    }
    if (ep->cfg.offset_storage == MCDC_OFFSETS_KAFKA)
        fprintf(stderr,
                "mongocdc offsets: note: a running writer of %s cannot be detected; mongocdc, "
                "Kafka Connect or Debezium Server on it must be stopped, or it overwrites this "
                "at its next offset flush\n",
                label);
    /* The daemon's lock: refused while a daemon runs on this file. */
    struct offset_store *store = offset_store_open(&ep->cfg, err);
    if (!store)
        return false;
    bool ok = true;
    for (size_t i = 0; ok && i < in->count; i++)
        ok = offset_store_put(store, in->items[i].key, in->items[i].value, err);
    offset_store_close(store);
    return ok;
}
