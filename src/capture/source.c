/*
 * source: the interface's dispatch and the step contents both
 * implementations share (source.h).
 */
#include "capture/source.h"

#include <string.h>

void source_change_reset(struct source_change *ch)
{
    ch->has_pos = ch->emit = ch->split = ch->fatal = false;
    ch->raw = NULL;
    ch->full_size = ch->before_size = -1;
}

enum source_step source_next(struct mcdc_source *s, struct source_change **ch)
{
    *ch = &s->ch;
    return s->ops->next(s, &s->ch);
}

bool source_start_position(struct mcdc_source *s, struct mcdc_position *pos)
{
    return s->ops->start_position(s, pos);
}

const char *source_name(const struct mcdc_source *s)
{
    return s->ops->name;
}

void source_close(struct mcdc_source *s)
{
    if (s != NULL)
        s->ops->close(s);
}
