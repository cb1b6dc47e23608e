/*
 * preflight/offsets: the offsets check of `mongocdc check` (preflight.h):
 * the stored position of a replica set, a shard or the merged stream, looked
 * up as the daemon does (every partition form, both connector names;
 * offsets.h), the key and writer found, and entries of another connector
 * name or topic.prefix named instead of a PASS.
 */
#include "preflight/preflight_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "offsets/offsets.h"

/* Opens the store for check: read-only when a running daemon holds the
 * file (said as WARN). NULL after a FAIL line. */
static struct offset_store *open_for_check(struct pf *p, const struct mcdc_config *cfg)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(cfg, &err);

    if (store == NULL && err.domain == MCDC_ERR_CONFIG && err.code == EWOULDBLOCK) {
        /* A daemon holds the file's run-long lock: it is running, which is
         * no failure of the setup; its positions are still read. */
        pf_say(p, "WARN", "offsets",
               "a mongocdc daemon is running on %s (it holds %s.lock); its stored positions "
               "are read without the lock, and a second daemon on this file would be refused",
               cfg->offsets_file, cfg->offsets_file);
        err = (struct mcdc_error)MCDC_ERROR_INIT;
        store = offset_store_open_read_only(cfg, &err);
    }
    if (store == NULL)
        pf_say(p, "FAIL", "offsets", "cannot open the offset store: %s", err.msg);
    return store;
}

/* Whether a key the daemon does not adopt still shares the connector name
 * or the server_id (topic.prefix) with this configuration: most likely this
 * source's position under a name or prefix set wrong, so that the start
 * would snapshot and skip the changes since (a FAIL). An entry sharing
 * neither is another connector's on a shared offsets topic (a WARN). */
static bool same_source_hint(const struct mcdc_config *cfg, const char *key)
{
    char *name = NULL, *server_id = NULL, *rs = NULL;
    if (!offsets_parse_key(key, &name, &server_id, &rs))
        return false;
    bool hint = !strcmp(server_id, cfg->topic_prefix) ||
                !strcmp(name, mcdc_config_connector_name(cfg)) ||
                !strcmp(name, cfg->topic_prefix);
    free(name);
    free(server_id);
    free(rs);
    return hint;
}

/*
 * Loads the position of one task as the daemon would (every partition form,
 * both connector names; offsets.h) and reports it. Found: *found, pos filled,
 * and an INFO-like PASS naming the key and its writer is left to the caller;
 * none found but entries of another name or topic.prefix exist: a line
 * naming each ("is `name` right?") instead of a PASS, a FAIL when the entry
 * shares the name or the prefix (same_source_hint), else a WARN. what: "rs0", "the merged
 * stream".
 */
static bool load_for_check(struct pf *p, struct offset_store *store,
                           const struct mcdc_config *cfg, const char *rs, bool merged,
                           bool per_shard, const char *what, struct mcdc_position *pos,
                           bool *found)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_origin origin = {0};
    const char *forms[3];
    size_t nforms = offsets_partition_forms(cfg, rs, merged, per_shard, forms);
    size_t nforeign = 0;
    const char *const *foreign;
    char *own = offsets_partition_key(mcdc_config_connector_name(cfg), cfg->topic_prefix,
                                      offsets_layout_partition(cfg, rs, merged, per_shard));

    *found = false;
    if (!offset_store_load_forms(store, forms, nforms, pos, found, &origin, &err)) {
        pf_say(p, "FAIL", "offsets", "cannot read the stored position of %s: %s", what, err.msg);
        free(own);
        return false;
    }
    foreign = offset_store_foreign(store, &nforeign);
    if (*found) {
        pf_say(p, "PASS", "offsets", "stored position of %s under %s, written by %s%s", what,
               origin.key, offset_writer_name(origin.writer),
               strcmp(origin.key, own) ? " (adopted at start; then stored under this layout's key)"
                                       : "");
    }
    for (size_t i = 0; i < nforeign; i++) {
        if (*found)
            pf_say(p, "WARN", "offsets",
                   "%s also holds a position under %s, another connector name or topic.prefix "
                   "than this source's: it is not used",
                   cfg->offset_storage == MCDC_OFFSETS_KAFKA ? "the offsets topic"
                                                               : "the offsets file",
                   foreign[i]);
        else
            pf_say(p, same_source_hint(cfg, foreign[i]) ? "FAIL" : "WARN", "offsets",
                   "no position under %s; found one under %s: is `name` (connector name, "
                   "default topic.prefix) or topic.prefix right? Without a match the first "
                   "start follows snapshot.mode",
                   own, foreign[i]);
    }
    offset_origin_clear(&origin);
    free(own);
    return true;
}

void pf_check_offsets(struct pf *p, const struct mcdc_config *cfg, const char *rs, bool per_shard,
                      int64_t oldest)
{
    struct offset_store *store = open_for_check(p, cfg);
    struct mcdc_position pos;
    bool found = false;
    uint32_t sec = 0;
    size_t nforeign = 0;

    if (store == NULL)
        return;
    position_init(&pos);
    if (!load_for_check(p, store, cfg, rs, false, per_shard, rs, &pos, &found)) {
        /* said */
    } else if (!found) {
        (void)offset_store_foreign(store, &nforeign);
        if (nforeign == 0)
            pf_say(p, "PASS", "offsets",
                   "no stored position for %s: the first start follows "
                   "snapshot.mode",
                   rs);
    } else {
        sec = (uint32_t)(position_time(&pos) >> 32);
        if (sec == 0 || oldest == 0)
            pf_say(p, "WARN", "offsets",
                   "stored position of %s found; its place in the oplog "
                   "cannot be checked",
                   rs);
        else if ((int64_t)sec < oldest)
            pf_say(p, "FAIL", "offsets",
                   "the stored position of %s (%u) is older than the oldest oplog entry (%lld): "
                   "resuming fails with ChangeStreamHistoryLost; snapshot.mode decides what "
                   "happens next",
                   rs, sec, (long long)oldest);
        else
            pf_say(p, "PASS", "offsets",
                   "stored position of %s is inside the oplog, %lld s after "
                   "its oldest entry",
                   rs, (long long)sec - oldest);
    }
    position_clear(&pos);
    offset_store_close(store);
}

void pf_check_offsets_merged(struct pf *p, const struct mcdc_config *cfg)
{
    struct offset_store *store = open_for_check(p, cfg);
    struct mcdc_position pos;
    bool found = false;
    size_t nforeign = 0;

    if (store == NULL)
        return;
    position_init(&pos);
    if (load_for_check(p, store, cfg, NULL, true, false, "the merged stream", &pos, &found) &&
        !found) {
        (void)offset_store_foreign(store, &nforeign);
        if (nforeign == 0)
            pf_say(p, "PASS", "offsets",
                   "no stored position for the merged stream: the first start continues from "
                   "per-shard offsets or follows snapshot.mode");
    }
    position_clear(&pos);
    offset_store_close(store);
}
