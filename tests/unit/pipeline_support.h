/*
 * Helpers shared by the pipeline unit tests (test_pipeline.c,
 * test_pipeline_txn.c).
 */
#ifndef MCDC_TESTS_PIPELINE_SUPPORT_H
#define MCDC_TESTS_PIPELINE_SUPPORT_H

#include <stdio.h>

#include <bson/bson.h>

#include "event/position.h"

/* pos = a change-stream position at cluster time (sec, 1) with a resume
 * token whose _data starts with that time (position_init'ed here). */
static inline void make_pos(struct mcdc_position *pos, int64_t sec)
{
    char data[32];

    position_init(pos);
    pos->sec = sec;
    pos->ord = 1;
    snprintf(data, sizeof data, "82%08llX", (unsigned long long)sec);
    BSON_APPEND_UTF8(&pos->resume_token, "_data", data);
    pos->has_resume_token = true;
}

#endif
