/*
 * common/xalloc: see xalloc.h.
 */
#include "common/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void oom(size_t size)
{
    char msg[96];
    int n = snprintf(msg, sizeof msg, "mongocdc: out of memory allocating %zu bytes\n", size);
    if (n > 0)
        (void)!write(STDERR_FILENO, msg, (size_t)n);
    abort();
}

void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        oom(size);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (p == NULL)
        oom(size);
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s);
    char *p = xmalloc(n + 1);
    memcpy(p, s, n + 1);
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *p;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        oom(0);
    p = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void xlist_add(char **list, const char *name)
{
    size_t n = *list ? strlen(*list) : 0, m = strlen(name);
    *list = xrealloc(*list, n + m + 3);
    if (n > 0) {
        memcpy(*list + n, ", ", 2);
        n += 2;
    }
    memcpy(*list + n, name, m + 1);
}

void *xzalloc_aligned(size_t align, size_t size)
{
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        oom(size);
    memset(p, 0, size ? size : 1);
    return p;
}
