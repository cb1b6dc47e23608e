/*
 * common/xalloc: allocation that aborts with a message on out-of-memory, so no
 * caller checks for NULL (style.md §4.6; redis zmalloc, jq jv_alloc).
 */
#ifndef MCDC_COMMON_XALLOC_H
#define MCDC_COMMON_XALLOC_H

#include <stddef.h>

/* malloc(size); never returns NULL (aborts). size 0 returns a unique pointer. */
void *xmalloc(size_t size);
/* calloc(n, size), zeroed; aborts on overflow or out-of-memory. */
void *xcalloc(size_t n, size_t size);
/*
 * size zeroed bytes aligned to align (a power of two; raised to at least
 * sizeof(void *)), for a struct that holds a bson_t by value: libbson
 * declares bson_t 128-byte aligned (BSON_EXTRA_ALIGN), more than malloc
 * gives, and UBSan reports every member access of a misaligned one. Aborts
 * on out-of-memory; the caller frees with free(). Such a struct must not be
 * moved by realloc or memcpy either: a bson_t grown past its inline size
 * points into itself.
 */
void *xzalloc_aligned(size_t align, size_t size);
/* realloc(ptr, size); aborts on out-of-memory. */
void *xrealloc(void *ptr, size_t size);
/* strdup(s); s must not be NULL. Caller frees. */
char *xstrdup(const char *s);
/* Copies at most n bytes of s and NUL-terminates. Caller frees. */
char *xstrndup(const char *s, size_t n);
/* Appends ", name" to the malloc'd list text *list (or makes it "name" when
 * *list is NULL or empty); *list is reallocated, the caller frees it. For
 * messages that name several things (shards, collections). */
void xlist_add(char **list, const char *name);
/* Like asprintf; returns a newly allocated string the caller frees. */
char *xasprintf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
