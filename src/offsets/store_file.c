/*
 * offsets/store_file: the default offset store, one JSON file for every
 * replica set (offsets.file.path). Layout: a JSON object whose member names are
 * the Kafka Connect partition keys and whose values are the offset values,
 * one member per line:
 *
 *   {
 *   "[\"shop\",{\"rs\":\"rs0\",\"server_id\":\"shop\"}]":{"sec":1694627139,"ord":3,...},
 *   "[\"shop\",{\"rs\":\"rs1\",\"server_id\":\"shop\"}]":{"sec":1694627140,"ord":1,...}
 *   }
 *
 * which is Kafka Connect's own file store (FileOffsetBackingStore: a map of
 * serialized key → serialized value) in readable form, so moving offsets
 * between the file and the Kafka topic is a copy of key and value bytes.
 *
 * Every save rewrites the whole file atomically (style.md §4.9, redis
 * rdbSave): write "<path>.tmp", fsync, rename over <path>, fsync the folder.
 * A crash leaves either the old or the new file, never a torn one.
 *
 * One daemon owns the file for its whole run: the first handle of a process
 * takes an exclusive, non-blocking flock on "<path>.lock" and keeps it until
 * its last handle closes (a per-process registry keyed by the lock file's
 * device and inode, since several capture tasks of one daemon share the
 * file). A second daemon on the same file is refused at start instead of
 * overwriting the first one's positions. Within the process each save takes
 * the process mutex, re-reads the file and replaces only its own member.
 * Saves happen on the offsets flush interval, not per event, so the re-read
 * is cheap.
 *
 * Only a regular file (or none) is read, at most OFFSETS_FILE_MAX bytes. An
 * empty file is corruption, not "no stored position": saves never leave one
 * (temp + rename), and treating it as absent would silently redo the
 * initial snapshot.
 *
 * Thread: worker (any task; serialised by the lock).
 */
#include "offsets/offsets.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "offsets/offsets_internal.h"

/* The largest offsets file read (bytes): a real one holds a few hundred
 * bytes per replica set. */
#define OFFSETS_FILE_MAX (64u * 1024 * 1024)

/* One held "<path>.lock" of this process, shared by its handles. */
struct held_lock {
    struct held_lock *next;
    dev_t dev;
    ino_t ino;
    int fd;
    unsigned refs;
};

struct file_store {
    char *path, *tmp_path, *lock_path, *dir;
    struct held_lock *held;
};

static pthread_mutex_t file_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct held_lock *held_locks; /* guarded by file_mutex */

static bool read_all(const char *path, char **out, size_t *out_len, bool *exists,
                     struct mcdc_error *err)
{
    *exists = false;
    *out = NULL;
    *out_len = 0;
    /* O_NONBLOCK: opening a FIFO must not hang; fstat then refuses it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return true;
        return mcdc_error_set(err, MCDC_ERR_IO, errno, "offsets file %s: %s", path,
                              strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mcdc_error_set(err, MCDC_ERR_IO, e, "offsets file %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, EINVAL,
                              "offsets file %s is not a regular file; set offsets.file.path to "
                              "a file in a writable folder",
                              path);
    }
    if ((unsigned long long)st.st_size > OFFSETS_FILE_MAX) {
        close(fd);
        return mcdc_error_set(err, MCDC_ERR_IO, EFBIG,
                              "offsets file %s is %lld bytes, over the %u MiB an offsets file "
                              "can be: it is not one; fix offsets.file.path or move the file away",
                              path, (long long)st.st_size, OFFSETS_FILE_MAX >> 20);
    }
    *exists = true;
    int e = offsets_read_all(fd, (size_t)st.st_size, OFFSETS_FILE_MAX, out, out_len);
    close(fd);
    if (e == EFBIG)
        return mcdc_error_set(err, MCDC_ERR_IO, EFBIG,
                              "offsets file %s is over the %u MiB an offsets file can be; "
                              "fix offsets.file.path or move the file away",
                              path, OFFSETS_FILE_MAX >> 20);
    if (e != 0)
        return mcdc_error_set(err, MCDC_ERR_IO, e, "offsets file %s: read: %s", path,
                              strerror(e));
    return true;
}

/* Reads and parses the file into *doc (an empty document when absent; an
 * empty or blank file is an error: saves never leave one). */
static bool load_doc(const struct file_store *fs, bson_t **doc, struct mcdc_error *err)
{
    char *text;
    size_t len;
    bool exists;
    if (!read_all(fs->path, &text, &len, &exists, err))
        return false;
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
        i++;
    if (!exists) {
        free(text);
        *doc = bson_new();
        return true;
    }
    if (i == len) {
        free(text);
        *doc = NULL;
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                              "offsets file %s is empty, which a save never leaves (it writes a "
                              "temp file and renames it): the file was damaged. Move it away "
                              "to start over with a new snapshot, or restore it from a backup",
                              fs->path);
    }
    bson_error_t berr;
    *doc = bson_new_from_json((const uint8_t *)text, (ssize_t)len, &berr);
    free(text);
    if (!*doc)
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                              "offsets file %s is corrupt (%s); fix or move it away to "
                              "start without stored offsets",
                              fs->path, berr.message);
    bson_iter_t it;
    bson_iter_init(&it, *doc);
    while (bson_iter_next(&it)) {
        bson_iter_t later = it;
        /* The same partition stored twice: which position is meant cannot be
         * known (a JSON object's keys are unique, RFC 8259 §4 "SHOULD"), and
         * taking either could skip changes. A save never writes this. */
        while (bson_iter_next(&later)) {
            if (strcmp(bson_iter_key(&later), bson_iter_key(&it)) == 0) {
                mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                               "offsets file %s is corrupt: partition %.120s is stored twice; "
                               "keep the right one or move the file away",
                               fs->path, bson_iter_key(&it));
                bson_destroy(*doc);
                *doc = NULL;
                return false;
            }
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                           "offsets file %s is corrupt: member %.80s is not an object", fs->path,
                           bson_iter_key(&it));
            bson_destroy(*doc);
            *doc = NULL;
            return false;
        }
    }
    return true;
}

/* Saves and loads of this process are serialised by the mutex; other
 * processes are kept out by the flock held for the whole run (hold_lock). */
static bool lock(const struct file_store *fs, int *lock_fd, struct mcdc_error *err)
{
    (void)err;
    pthread_mutex_lock(&file_mutex);
    *lock_fd = fs->held != NULL ? fs->held->fd : -1;
    return true;
}

static void unlock(int lock_fd)
{
    (void)lock_fd;
    pthread_mutex_unlock(&file_mutex);
}

/* Takes (or shares, within this process) the run-long exclusive flock on
 * "<path>.lock". */
static bool hold_lock(struct file_store *fs, struct mcdc_error *err)
{
    struct stat st;
    int fd = open(fs->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return mcdc_error_set(err, MCDC_ERR_IO, errno, "offsets lock %s: %s", fs->lock_path,
                              strerror(errno));
    /* created by root (an offsets command under sudo): the owner of the
     * offsets file or the folder, so that the daemon's user can lock it */
    offsets_file_match_owner(fd, fs->lock_path, fs->path, fs->dir);
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mcdc_error_set(err, MCDC_ERR_IO, e, "offsets lock %s: %s", fs->lock_path,
                              strerror(e));
    }
    pthread_mutex_lock(&file_mutex);
    for (struct held_lock *h = held_locks; h != NULL; h = h->next) {
        if (h->dev == st.st_dev && h->ino == st.st_ino) {
            h->refs++;
            fs->held = h;
            pthread_mutex_unlock(&file_mutex);
            close(fd);
            return true;
        }
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        pthread_mutex_unlock(&file_mutex);
        close(fd);
        if (e == EWOULDBLOCK)
            return mcdc_error_set(err, MCDC_ERR_CONFIG, e,
                                  "offsets file %s is in use by another mongocdc process (it "
                                  "holds %s); stop that one, or give each daemon its own "
                                  "offsets.file.path",
                                  fs->path, fs->lock_path);
        return mcdc_error_set(err, MCDC_ERR_IO, e, "offsets lock %s: %s", fs->lock_path,
                              strerror(e));
    }
    struct held_lock *h = xcalloc(1, sizeof *h);
    h->dev = st.st_dev;
    h->ino = st.st_ino;
    h->fd = fd;
    h->refs = 1;
    h->next = held_locks;
    held_locks = h;
    fs->held = h;
    pthread_mutex_unlock(&file_mutex);
    return true;
}

static void release_lock(struct file_store *fs)
{
    struct held_lock *h = fs->held;
    if (h == NULL)
        return;
    fs->held = NULL;
    pthread_mutex_lock(&file_mutex);
    if (--h->refs == 0) {
        for (struct held_lock **pp = &held_locks; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == h) {
                *pp = h->next;
                break;
            }
        }
        close(h->fd); /* releases the flock */
        free(h);
    }
    pthread_mutex_unlock(&file_mutex);
}

static bool file_scan(struct offset_store *store, struct offset_entry **entries, size_t *n,
                      struct mcdc_error *err)
{
    struct file_store *fs = store->impl;
    int lock_fd;
    bson_t *doc = NULL;
    *entries = NULL;
    *n = 0;
    if (!lock(fs, &lock_fd, err))
        return false;
    bool ok = load_doc(fs, &doc, err);
    unlock(lock_fd);
    if (!ok)
        return false;
    bson_iter_t it;
    size_t cap = 0;
    if (bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            if (*n == cap) {
                cap = cap ? cap * 2 : 8;
                *entries = xrealloc(*entries, cap * sizeof **entries);
            }
            struct jbuf b;
            jbuf_init(&b);
            jbuf_bson_value(&b, &it);
            (*entries)[*n].key = xstrdup(bson_iter_key(&it));
            (*entries)[*n].value_json = jbuf_steal(&b);
            (*n)++;
        }
    }
    bson_destroy(doc);
    return true;
}

/* Writes all n bytes of p to fd, retrying short writes and EINTR; false
 * with errno set on a write error. Shared by the offsets files and the
 * Debezium offsets file (dbzfile_io.c). */
int offsets_read_all(int fd, size_t hint, size_t max, char **out, size_t *out_len)
{
    size_t cap = hint + 1 > 4096 ? hint + 1 : 4096, len = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            return e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max) { /* grew while being read */
            free(buf);
            return EFBIG;
        }
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return 0;
}

bool offsets_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* temp file, fsync, rename, fsync of the folder (style.md §4.9). */
static bool replace_file(const struct file_store *fs, const char *text, size_t len,
                         struct mcdc_error *err)
{
    int fd = open(fs->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return mcdc_error_set(err, MCDC_ERR_IO, errno, "offsets file %s: %s", fs->tmp_path,
                              strerror(errno));
    offsets_file_match_owner(fd, fs->tmp_path, fs->path, fs->dir);
    if (!offsets_write_all(fd, text, len) || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(fs->tmp_path);
        return mcdc_error_set(err, MCDC_ERR_IO, e, "offsets file %s: write: %s", fs->tmp_path,
                              strerror(e));
    }
    if (close(fd) != 0 || rename(fs->tmp_path, fs->path) != 0) {
        int e = errno;
        unlink(fs->tmp_path);
        return mcdc_error_set(err, MCDC_ERR_IO, e, "offsets file %s: rename: %s", fs->path,
                              strerror(e));
    }
    int dfd = open(fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return mcdc_error_set(err, MCDC_ERR_IO, e, "offsets folder %s: fsync: %s", fs->dir,
                              strerror(e));
    }
    close(dfd);
    return true;
}

static bool file_save(struct offset_store *store, const char *key, const char *value_json,
                      struct mcdc_error *err)
{
    struct file_store *fs = store->impl;
    bson_error_t berr;
    if (store->read_only)
        return mcdc_error_set(err, MCDC_ERR_INTERNAL, 0,
                              "offsets file %s was opened read-only (without its lock)", fs->path);
    /* value_json NULL: the member is removed (offset_store_put). */
    bson_t *value = value_json ? bson_new_from_json((const uint8_t *)value_json, -1, &berr) : NULL;
    if (value_json && !value)
        return mcdc_error_set(err, MCDC_ERR_INTERNAL, 0, "offset value is not JSON: %s",
                              berr.message);
    int lock_fd;
    bson_t *doc = NULL;
    bool ok = false;
    if (!lock(fs, &lock_fd, err))
        goto cleanup;
    if (!load_doc(fs, &doc, err))
        goto unlock;
    /* Rewrite: every other member as it was, ours replaced (or appended). */
    struct jbuf b;
    jbuf_init(&b);
    jbuf_puts(&b, "{\n");
    bool first = true, written = false;
    bson_iter_t it;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        bool ours = !strcmp(bson_iter_key(&it), key);
        if (ours && !value_json) {
            written = true;
            continue;
        }
        if (!first)
            jbuf_puts(&b, ",\n");
        first = false;
        jbuf_str(&b, bson_iter_key(&it), bson_iter_key_len(&it));
        jbuf_putc(&b, ':');
        if (ours) {
            jbuf_puts(&b, value_json);
            written = true;
        } else {
            jbuf_bson_value(&b, &it);
        }
    }
    if (!written && value_json) {
        if (!first)
            jbuf_puts(&b, ",\n");
        jbuf_str(&b, key, strlen(key));
        jbuf_putc(&b, ':');
        jbuf_puts(&b, value_json);
    }
    jbuf_puts(&b, "\n}\n");
    ok = replace_file(fs, b.data, b.len, err);
    jbuf_free(&b);
unlock:
    unlock(lock_fd);
cleanup:
    if (doc)
        bson_destroy(doc);
    if (value)
        bson_destroy(value);
    return ok;
}

static void file_close(struct offset_store *store)
{
    struct file_store *fs = store->impl;
    release_lock(fs);
    free(fs->path);
    free(fs->tmp_path);
    free(fs->lock_path);
    free(fs->dir);
    free(fs);
}

static const struct offset_store_ops file_ops = {file_scan, file_save, file_close};

bool store_file_open(struct offset_store *store, struct mcdc_error *err)
{
    const char *path = store->cfg->offsets_file;
    if (!path || !path[0])
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "offsets.file.path is not set");
    struct file_store *fs = xcalloc(1, sizeof *fs);
    fs->path = xstrdup(path);
    fs->tmp_path = xasprintf("%s.tmp", path);
    fs->lock_path = xasprintf("%s.lock", path);
    char *copy = xstrdup(path);
    fs->dir = xstrdup(dirname(copy));
    free(copy);
    store->impl = fs;
    store->ops = &file_ops;
    struct stat st;
    if (stat(fs->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        mcdc_error_set(err, MCDC_ERR_IO, ENOENT, "offsets folder %s does not exist", fs->dir);
        file_close(store);
        return false;
    }
    if (stat(fs->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* Before creating "<path>.lock" next to a device or a FIFO. */
        mcdc_error_set(err, MCDC_ERR_CONFIG, EINVAL,
                       "offsets file %s is not a regular file; set offsets.file.path to a file "
                       "in a writable folder",
                       fs->path);
        file_close(store);
        return false;
    }
    if (!store->read_only && !hold_lock(fs, err)) {
        file_close(store);
        return false;
    }
    /* Fail at start, not at the first flush, when the file is unreadable or corrupt. */
    int lock_fd;
    bson_t *doc = NULL;
    bool ok = lock(fs, &lock_fd, err);
    if (ok) {
        ok = load_doc(fs, &doc, err);
        unlock(lock_fd);
    }
    if (doc)
        bson_destroy(doc);
    if (!ok)
        file_close(store);
    return ok;
}
