/*
 * oplog_ids: Debezium 1.9's oplog session transaction id (see oplog.h;
 * debezium-format.md §3.5).
 */
#include <inttypes.h>
#include <stdio.h>

#include "capture/oplog.h"

bool oplog_stxnid(const bson_t *lsid, int64_t txn_number, char *buf, size_t n)
{
    bson_iter_t it;
    uint8_t u[16];
    const char *s = NULL;
    char uuid[40];

    if (!bson_iter_init_find(&it, lsid, "id"))
        return false;
    if (BSON_ITER_HOLDS_BINARY(&it)) {
        bson_subtype_t st;
        uint32_t len;
        const uint8_t *data;
        bson_md5_t md5;
        bson_iter_binary(&it, &st, &len, &data);
        /* Java UUID.nameUUIDFromBytes: MD5, then version 3 and the IETF variant. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        bson_md5_init(&md5);
        bson_md5_append(&md5, data, len);
        bson_md5_finish(&md5, u);
#pragma GCC diagnostic pop
        u[6] = (uint8_t)((u[6] & 0x0f) | 0x30);
        u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
        snprintf(uuid, sizeof uuid,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                 u[15]);
        s = uuid;
    } else if (BSON_ITER_HOLDS_UTF8(&it)) {
        s = bson_iter_utf8(&it, NULL);
    } else {
        return false;
    }
    snprintf(buf, n, "%s:%" PRId64, s, txn_number);
    return true;
}
