/*
 * signals/bus.c: the daemon-wide signal bus. One mutex guards every queue
 * (signals are rare: a handful per snapshot chunk at most), each queue a
 * ring of SIGNAL_QUEUE_MAX copies. A queue that is full refuses the new
 * signal for that task with an ERROR naming the signal and the task, and
 * counts it (signal_queue_dropped); it never blocks the publisher, which may
 * be another task's stream or a channel thread, so a stalled task cannot
 * stall the others.
 */
#include "signals/signals.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "signals/signals_internal.h"

struct signal_queue {
    struct signal_bus *bus;
    struct signal_queue *next;
    char task[128];
    struct mcdc_signal ring[SIGNAL_QUEUE_MAX];
    size_t head;
    _Atomic size_t count; /* written under the bus lock, read without it */
    uint64_t dropped;
    void (*wake)(void *ctx);
    void *wake_ctx;
};

struct signal_bus {
    pthread_mutex_t mu;
    struct signal_queue *queues;
    bool closed; /* the daemon stops: nothing more is delivered */
};

void mcdc_signal_copy(const struct mcdc_signal *src, struct mcdc_signal *dst)
{
    memset(dst, 0, sizeof *dst);
    dst->id = src->id ? xstrdup(src->id) : NULL;
    dst->type = src->type;
    bson_copy_to(&src->data, &dst->data);
    dst->channel = src->channel;
    memcpy(dst->task, src->task, sizeof dst->task);
}

struct signal_bus *signal_bus_new(void)
{
    struct signal_bus *bus = xcalloc(1, sizeof *bus);
    pthread_mutex_init(&bus->mu, NULL);
    return bus;
}

void signal_bus_destroy(struct signal_bus *bus)
{
    if (!bus)
        return;
    struct signal_queue *q = bus->queues;
    while (q) {
        struct signal_queue *next = q->next;
        for (size_t i = 0; i < q->count; i++)
            mcdc_signal_destroy(&q->ring[(q->head + i) % SIGNAL_QUEUE_MAX]);
        free(q);
        q = next;
    }
    pthread_mutex_destroy(&bus->mu);
    free(bus);
}

struct signal_queue *signal_bus_subscribe(struct signal_bus *bus, const char *task)
{
    struct signal_queue *q = xzalloc_aligned(_Alignof(struct signal_queue), sizeof *q);
    q->bus = bus;
    snprintf(q->task, sizeof q->task, "%s", task ? task : "");
    pthread_mutex_lock(&bus->mu);
    /* appended, so publish visits tasks in the order they started */
    struct signal_queue **tail = &bus->queues;
    while (*tail)
        tail = &(*tail)->next;
    *tail = q;
    pthread_mutex_unlock(&bus->mu);
    return q;
}

void signal_queue_set_wake(struct signal_queue *q, void (*wake)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&q->bus->mu);
    q->wake = wake;
    q->wake_ctx = ctx;
    pthread_mutex_unlock(&q->bus->mu);
}

void signal_bus_close(struct signal_bus *bus)
{
    if (!bus)
        return;
    pthread_mutex_lock(&bus->mu);
    bus->closed = true;
    pthread_mutex_unlock(&bus->mu);
}

bool signal_bus_closed(struct signal_bus *bus)
{
    if (!bus)
        return true;
    pthread_mutex_lock(&bus->mu);
    bool c = bus->closed;
    pthread_mutex_unlock(&bus->mu);
    return c;
}

bool signal_bus_publish(struct signal_bus *bus, const struct mcdc_signal *sig)
{
    if (!bus || !sig)
        return false;
    pthread_mutex_lock(&bus->mu);
    if (bus->closed) {
        /* Tasks are stopping and have drained (or are draining) their
         * queues for the last commit: the signal's source keeps it. */
        pthread_mutex_unlock(&bus->mu);
        return false;
    }
    for (struct signal_queue *q = bus->queues; q; q = q->next) {
        if (q->count == SIGNAL_QUEUE_MAX) {
            q->dropped++;
            LOG_ERROR("signal '%s' (%s) not delivered to task %s: %d signals already wait "
                      "there (the task is not draining its queue)",
                      sig->id ? sig->id : "?", mcdc_signal_type_name(sig->type), q->task,
                      SIGNAL_QUEUE_MAX);
            continue;
        }
        mcdc_signal_copy(sig, &q->ring[(q->head + q->count) % SIGNAL_QUEUE_MAX]);
        atomic_store_explicit(&q->count, q->count + 1, memory_order_release);
        if (q->wake)
            q->wake(q->wake_ctx);
    }
    pthread_mutex_unlock(&bus->mu);
    return true;
}

bool signal_queue_pop(struct signal_queue *q, struct mcdc_signal *out)
{
    if (!q)
        return false;
    /* Called between every two events of a task: the bus lock is taken
     * only when the queue holds something (count is written under the lock,
     * read here without it; a signal pushed meanwhile is seen next time). */
    if (atomic_load_explicit(&q->count, memory_order_acquire) == 0)
        return false;
    bool got = false;
    pthread_mutex_lock(&q->bus->mu);
    if (q->count > 0) {
        /* copied, not moved by assignment: a heap bson_t points into itself */
        mcdc_signal_copy(&q->ring[q->head], out);
        mcdc_signal_destroy(&q->ring[q->head]);
        q->head = (q->head + 1) % SIGNAL_QUEUE_MAX;
        atomic_store_explicit(&q->count, q->count - 1, memory_order_release);
        got = true;
    }
    pthread_mutex_unlock(&q->bus->mu);
    return got;
}

size_t signal_bus_subscribers(struct signal_bus *bus)
{
    size_t n = 0;
    pthread_mutex_lock(&bus->mu);
    for (struct signal_queue *q = bus->queues; q; q = q->next)
        n++;
    pthread_mutex_unlock(&bus->mu);
    return n;
}

size_t signal_queue_pending(struct signal_queue *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->bus->mu);
    size_t n = q->count;
    pthread_mutex_unlock(&q->bus->mu);
    return n;
}

uint64_t signal_queue_dropped(struct signal_queue *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->bus->mu);
    uint64_t n = q->dropped;
    pthread_mutex_unlock(&q->bus->mu);
    return n;
}

const char *signal_queue_task(const struct signal_queue *q)
{
    return q ? q->task : "";
}
