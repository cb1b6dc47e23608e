/*
 * offsets/dbzfile_io: reading and atomically writing a FileOffsetBackingStore
 * file (dbzfile.h); the format itself is in dbzfile.c.
 *
 * Thread: any.
 */
#include "offsets/dbzfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "offsets/offsets_internal.h"

/* The largest file read (bytes). */
#define DBZFILE_MAX (64u * 1024 * 1024)

bool dbzfile_read(const char *path, struct dbz_offsets *map, bool *exists, struct mcdc_error *err)
{
    *exists = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return true;
        return mcdc_error_set(err, MCDC_ERR_IO, errno, "Debezium offsets file %s: %s", path,
                              strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)DBZFILE_MAX) {
        int e = errno;
        close(fd);
        return mcdc_error_set(err, MCDC_ERR_IO, e ? e : EINVAL,
                              "Debezium offsets file %s: not a regular file of at most %u MiB",
                              path, DBZFILE_MAX >> 20);
    }
    *exists = true;
    char *buf;
    size_t len;
    int e = offsets_read_all(fd, (size_t)st.st_size, DBZFILE_MAX, &buf, &len);
    close(fd);
    if (e == EFBIG)
        return mcdc_error_set(err, MCDC_ERR_IO, EFBIG, "Debezium offsets file %s grew over %u MiB",
                              path, DBZFILE_MAX >> 20);
    if (e != 0)
        return mcdc_error_set(err, MCDC_ERR_IO, e, "Debezium offsets file %s: read: %s", path,
                              strerror(e));
    bool ok = dbzfile_parse((const uint8_t *)buf, len, map, err);
    free(buf);
    if (!ok)
        mcdc_error_prefix(err, "%s", path);
    return ok;
}


bool dbzfile_write(const char *path, const struct dbz_offsets *map, struct mcdc_error *err)
{
    uint8_t *data;
    size_t len;
    dbzfile_serialize(map, &data, &len);
    char *tmp = xasprintf("%s.tmp", path);
    char *copy = xstrdup(path);
    char *dir = xstrdup(dirname(copy));
    free(copy);
    bool ok = false;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        mcdc_error_set(err, MCDC_ERR_IO, errno, "Debezium offsets file %s: %s", tmp,
                       strerror(errno));
        goto out;
    }
    /* Debezium Server's user must still read and rewrite it */
    offsets_file_match_owner(fd, tmp, path, dir);
    if (!offsets_write_all(fd, data, len) || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        mcdc_error_set(err, MCDC_ERR_IO, e, "Debezium offsets file %s: write: %s", tmp,
                       strerror(e));
        goto out;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        mcdc_error_set(err, MCDC_ERR_IO, e, "Debezium offsets file %s: rename: %s", path,
                       strerror(e));
        goto out;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        mcdc_error_set(err, MCDC_ERR_IO, e, "folder %s: fsync: %s", dir, strerror(e));
        goto out;
    }
    close(dfd);
    ok = true;
out:
    free(data);
    free(tmp);
    free(dir);
    return ok;
}
