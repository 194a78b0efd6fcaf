// The CPU a durable append costs through the page cache and with O_DIRECT (docs/performance.md,
// "Direct journal writes"): N MiB appended in writes of B bytes, an fdatasync after each.
// Through the page cache the synced pages are dropped after each sync, as the journal does
// (POSIX_FADV_DONTNEED); direct writes leave none. CPU time is the process's (user + system),
// which includes the writeback fdatasync does on the calling thread.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static double wall_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int run(const char *path, int direct, size_t batch, size_t total) {
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0644);
    if (fd < 0) {
        perror(direct ? "open with O_DIRECT" : "open");
        return 1;
    }
    void *buf;
    if (posix_memalign(&buf, 4096, batch) != 0) return 1;
    memset(buf, 'x', batch);
    double c0 = cpu_seconds(), w0 = wall_seconds();
    off_t off = 0;
    for (size_t done = 0; done < total; done += batch) {
        if (pwrite(fd, buf, batch, off) != (ssize_t)batch) {
            perror("pwrite");
            return 1;
        }
        off += batch;
        fdatasync(fd);
        if (!direct) posix_fadvise(fd, 0, off, POSIX_FADV_DONTNEED);
    }
    double c = cpu_seconds() - c0, w = wall_seconds() - w0;
    printf("  %-11s %7zu-byte writes: CPU %.3f s (%.2f ns per byte), wall %.3f s\n",
           direct ? "O_DIRECT" : "page cache", batch, c, c * 1e9 / total, w);
    close(fd);
    unlink(path);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: journal_writes DIR MIB [BATCH_BYTES…]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/segment", argv[1]);
    size_t total = (size_t)atol(argv[2]) << 20;
    for (int i = 3; i < argc; i++) {
        size_t batch = (size_t)atol(argv[i]);
        if (batch == 0 || batch % 4096 != 0) {
            fprintf(stderr, "a batch must be a multiple of 4096 bytes\n");
            return 2;
        }
        // Alternated, twice: the host's noise shows as the difference between the two rounds.
        for (int round = 0; round < 2; round++) {
            if (run(path, 0, batch, total) || run(path, 1, batch, total)) return 1;
        }
    }
    return 0;
}
