/*
 * event/position: the stream position's lifecycle and its cluster time (see
 * position.h). The resume token is a bson_t the position owns; copies and
 * moves re-append its bytes, since a bson_t that grew onto the heap points
 * into itself.
 *
 * Thread: any (no shared state).
 */
#include "event/position.h"

#include <stdlib.h>
#include <string.h>

#include "common/hex.h"
#include "common/xalloc.h"

void position_init(struct mcdc_position *pos)
{
    memset(pos, 0, sizeof *pos);
    pos->sec = -1;
    pos->ord = -1;
    bson_init(&pos->resume_token);
}

void position_clear(struct mcdc_position *pos)
{
    bson_destroy(&pos->resume_token);
    free(pos->lsid);
    free(pos->extra_json);
    position_init(pos);
}

void position_copy(struct mcdc_position *dst, const struct mcdc_position *src)
{
    if (dst == src)
        return;
    bson_destroy(&dst->resume_token);
    free(dst->lsid);
    free(dst->extra_json);
    *dst = *src;
    bson_init(&dst->resume_token);
    if (src->has_resume_token)
        bson_concat(&dst->resume_token, &src->resume_token);
    dst->lsid = src->lsid ? xstrdup(src->lsid) : NULL;
    dst->extra_json = src->extra_json ? xstrdup(src->extra_json) : NULL;
}

void position_move(struct mcdc_position *dst, struct mcdc_position *src)
{
    bson_destroy(&dst->resume_token);
    free(dst->lsid);
    free(dst->extra_json);
    memcpy(dst, src, sizeof *dst); /* scalars and the two owned strings */
    bson_init(&dst->resume_token);
    bson_concat(&dst->resume_token, &src->resume_token);
    bson_destroy(&src->resume_token);
    position_init(src);
}

bool position_token_time(const bson_t *token, uint64_t *ts)
{
    bson_iter_t it;
    uint32_t len = 0;
    const char *hex;
    uint64_t v = 0;

    if (token == NULL || !bson_iter_init_find(&it, token, "_data") || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    hex = bson_iter_utf8(&it, &len);
    if (len < 18 || hex[0] != '8' || hex[1] != '2')
        return false;
    for (int i = 2; i < 18; i++) {
        int h = mcdc_hex_digit(hex[i]);
        if (h < 0)
            return false;
        v = (v << 4) | (uint64_t)h;
    }
    *ts = v;
    return true;
}

uint64_t position_time(const struct mcdc_position *pos)
{
    uint64_t t = 0;

    if (pos->sec > 0)
        return ((uint64_t)pos->sec << 32) | (uint32_t)(pos->ord > 0 ? pos->ord : 0);
    if (pos->has_resume_token && position_token_time(&pos->resume_token, &t))
        return t;
    return 0;
}
