/*
 * capture/resume: pure start-point, snapshot-plan, error and backoff
 * decisions (see resume.h for the sources of each rule).
 */
#include "capture/resume.h"

#include <stdio.h>
#include <string.h>

#include <mongoc/mongoc.h>

void resume_start_point(const struct mcdc_position *pos, int64_t start_op_time,
                        struct resume_start *out)
{
    memset(out, 0, sizeof *out);
    out->kind = RESUME_START_NOW;
    if (pos != NULL && pos->has_resume_token && !bson_empty(&pos->resume_token)) {
        out->kind = RESUME_START_AFTER_TOKEN;
        out->token = &pos->resume_token;
        return;
    }
    if (pos != NULL && pos->sec > 0 && pos->ord >= 0) {
        out->kind = RESUME_START_AT_OPTIME;
        out->sec = (uint32_t)pos->sec;
        out->ord = (uint32_t)pos->ord;
        return;
    }
    if (start_op_time >= 0) {
        /* A BSON timestamp value: seconds in the high 32 bits, increment low. */
        out->kind = RESUME_START_AT_OPTIME;
        out->sec = (uint32_t)((uint64_t)start_op_time >> 32);
        out->ord = (uint32_t)((uint64_t)start_op_time & 0xffffffffu);
    }
}

enum resume_plan resume_plan_start(enum mcdc_snapshot_mode mode, bool found,
                                   const struct mcdc_position *pos, bool *warn)
{
    bool interrupted = found && pos != NULL && pos->initsync;
    bool need = !found || interrupted;

    if (warn != NULL)
        *warn = false;
    switch (mode) {
    case MCDC_SNAPSHOT_ALWAYS:
        return RESUME_PLAN_SNAPSHOT_THEN_STREAM;
    case MCDC_SNAPSHOT_INITIAL_ONLY:
        return need ? RESUME_PLAN_SNAPSHOT_ONLY : RESUME_PLAN_NOTHING;
    case MCDC_SNAPSHOT_NEVER:
    case MCDC_SNAPSHOT_NO_DATA:
        if (interrupted && warn != NULL)
            *warn = true;
        return RESUME_PLAN_STREAM;
    case MCDC_SNAPSHOT_INITIAL:
    case MCDC_SNAPSHOT_WHEN_NEEDED:
    default:
        return need ? RESUME_PLAN_SNAPSHOT_THEN_STREAM : RESUME_PLAN_STREAM;
    }
}

bool resume_resnapshot_on_history_lost(enum mcdc_snapshot_mode mode)
{
    return mode == MCDC_SNAPSHOT_INITIAL || mode == MCDC_SNAPSHOT_WHEN_NEEDED ||
           mode == MCDC_SNAPSHOT_ALWAYS;
}

static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (hay == NULL)
        return false;
    for (; *hay != '\0'; hay++) {
        size_t i = 0;
        while (i < n && hay[i] != '\0') {
            char a = hay[i], b = needle[i];
            if (a >= 'A' && a <= 'Z')
                a = (char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z')
                b = (char)(b - 'A' + 'a');
            if (a != b)
                break;
            i++;
        }
        if (i == n)
            return true;
    }
    return false;
}

static bool history_lost_text(const char *msg)
{
    return contains_ci(msg, "no longer be in the oplog") ||
           contains_ci(msg, "no longer in the oplog") || contains_ci(msg, "history lost") ||
           contains_ci(msg, "historylost") ||
           contains_ci(msg, "position in capped collection being deleted") ||
           /* The token's event does not exist in this oplog at all: the replica
            * set was wiped or re-created since the position was stored. */
           contains_ci(msg, "resume token was not found");
}

enum resume_action resume_classify(const struct resume_failure *f)
{
    switch (f->domain) {
    case MONGOC_ERROR_STREAM:           /* connect, socket, name resolution */
    case MONGOC_ERROR_PROTOCOL:         /* malformed reply */
    case MONGOC_ERROR_SERVER_SELECTION: /* no primary yet (election, all down) */
        return RESUME_ACTION_RETRY;
    case MONGOC_ERROR_SASL:
    case MONGOC_ERROR_SCRAM:
        return RESUME_ACTION_FATAL;
    case MONGOC_ERROR_CLIENT:
        if (f->code == MONGOC_ERROR_CLIENT_AUTHENTICATE)
            return RESUME_ACTION_FATAL;
        return RESUME_ACTION_RETRY;
    case MONGOC_ERROR_SERVER:
    case MONGOC_ERROR_QUERY:
    case MONGOC_ERROR_COMMAND:
    case MONGOC_ERROR_CURSOR:
        break;
    default:
        return RESUME_ACTION_RETRY;
    }

    switch (f->code) {
    case 286:   /* ChangeStreamHistoryLost */
    case 136:   /* CappedPositionLost: the open cursor's position was truncated */
    case 40576: /* history lost, MongoDB < 4.4 */
    case 40585: /* resume token not found, MongoDB < 4.4: same as 280 "not found" */
        return RESUME_ACTION_HISTORY_LOST;
    case 280: /* ChangeStreamFatalError */
        if (history_lost_text(f->message))
            return RESUME_ACTION_HISTORY_LOST;
        if (f->label_resumable) /* an explicit label wins (CS spec) */
            return RESUME_ACTION_RETRY;
        return RESUME_ACTION_FATAL;
    case 13:    /* Unauthorized */
    case 18:    /* AuthenticationFailed */
    case 260:   /* InvalidResumeToken (an invalidate token) */
    case 40647: /* malformed resume token */
    case 40573: /* change streams on a standalone */
    case 73:    /* InvalidNamespace */
    case 40415: /* unknown field */
    case 40324: /* unknown pipeline stage */
    case 2:     /* BadValue */
    case 9:     /* FailedToParse */
    case 10334: /* BSONObjectTooLarge: the same event fails again on resume */
    case 7182500: /* a split event's field too large for any fragment: the same again */
    case 47:    /* NoMatchingDocument: a required image is missing */
    case 59:    /* CommandNotFound */
    case 50865: /* resumeAfter with startAfter */
    case 40674: /* a token with startAtOperationTime */
    case 51091: /* a regular expression the server refuses (e.g. over its 16384-byte limit) */
    case 51111: /* the same in $regexMatch: the pipeline is refused on every attempt */
        return RESUME_ACTION_FATAL;
    default:
        if (f->label_non_resumable && history_lost_text(f->message))
            return RESUME_ACTION_HISTORY_LOST;
        return RESUME_ACTION_RETRY;
    }
}

const char *resume_action_name(enum resume_action a)
{
    switch (a) {
    case RESUME_ACTION_RETRY:
        return "retry";
    case RESUME_ACTION_HISTORY_LOST:
        return "history lost";
    case RESUME_ACTION_FATAL:
    default:
        return "fatal";
    }
}

int64_t resume_backoff_ms(int64_t initial_ms, int64_t max_ms, int64_t attempt)
{
    int64_t d = initial_ms > 0 ? initial_ms : 1;
    for (int64_t i = 1; i < attempt && d < max_ms; i++)
        d *= 2;
    return d > max_ms ? max_ms : d;
}

bool resume_token_time(const bson_t *token, uint32_t *sec, uint32_t *ord)
{
    uint64_t t;

    if (!position_token_time(token, &t))
        return false;
    *sec = (uint32_t)(t >> 32);
    *ord = (uint32_t)(t & 0xffffffffu);
    return true;
}

void resume_describe_position(const struct mcdc_position *pos, char *buf, size_t cap)
{
    uint32_t s, o;
    if (pos == NULL) {
        snprintf(buf, cap, "none");
    } else if (pos->has_resume_token && resume_token_time(&pos->resume_token, &s, &o)) {
        snprintf(buf, cap, "resume token at Timestamp(%u, %u)", s, o);
    } else if (pos->has_resume_token) {
        snprintf(buf, cap, "resume token (time not readable)");
    } else if (pos->sec >= 0) {
        snprintf(buf, cap, "Timestamp(%lld, %lld)", (long long)pos->sec, (long long)pos->ord);
    } else {
        snprintf(buf, cap, "none");
    }
}
