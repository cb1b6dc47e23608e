/*
 * offsets/fileown: files that an offsets command run as root creates or
 * rewrites in a store's folder keep the owner a daemon running as another
 * user needs (a packaged install runs the daemon as user mongocdc, and an
 * operator runs `mongocdc offsets set` with sudo): the owner, group and mode
 * of the file being replaced, else the owner and group of the folder.
 *
 * Thread: any.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "offsets/offsets_internal.h"

void offsets_file_match_owner(int fd, const char *fd_path, const char *replaces, const char *dir)
{
    struct stat want, have;
    bool same_file;
    if (geteuid() != 0)
        return; /* only root makes a file of another owner; others keep their own */
    same_file = replaces != NULL && stat(replaces, &want) == 0;
    if (!same_file && stat(dir, &want) != 0)
        return;
    if (fstat(fd, &have) != 0)
        return;
    if ((have.st_uid != want.st_uid || have.st_gid != want.st_gid) &&
        fchown(fd, want.st_uid, want.st_gid) != 0)
        LOG_WARN("offsets: %s: cannot give it the owner %u:%u of %s (%s): a daemon running as "
                 "that user may fail to open it",
                 fd_path, (unsigned)want.st_uid, (unsigned)want.st_gid, same_file ? replaces : dir,
                 strerror(errno));
    if (same_file && (have.st_mode & 07777) != (want.st_mode & 07777))
        (void)fchmod(fd, want.st_mode & 07777);
}
