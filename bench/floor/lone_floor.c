/* The floor of the store's one-at-a-time protocol (store.md, fourth version) on this disk: the
   system calls of N lone posts, then N lone claims and results, and nothing else (no JSON, no
   Python, no locks, no reads). A post writes a new inode, renames it into pending/, appends its
   event line and flushes once (data=ordered writes the new blocks and the appended line before
   the commit that names them). A claim renames pending/ -> processing/ and renames a new leased
   record over it, with its line, and is not flushed. A result renames a new record into done/,
   unlinks the processing/ one, appends its line and flushes once. Two flushes a task.
   usage: lone_floor N ROOT [syncfs|fdatasync|none]
   prints one JSON line: {"post": posts/s, "drain": claims+results/s, "flushes": count} */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char root[512], record[300];
static int rootfd, logfd, mode; /* 0 none, 1 syncfs, 2 fdatasync of the log and the file */
static long made, flushes;

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void fail(const char *what) { perror(what); exit(1); }

/* a new inode with the record, renamed to `path`; its descriptor stays open for fdatasync */
static int publish(const char *path) {
    char temp[700];
    snprintf(temp, sizeof temp, "%s/.tmp-%ld", root, ++made);
    int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) fail("create");
    if (write(fd, record, sizeof record) != (ssize_t)sizeof record) fail("write");
    if (rename(temp, path)) fail("rename");
    return fd;
}

static void line(void) {
    char text[200];
    int n = snprintf(text, sizeof text, "{\"event\":\"x\",\"n\":%ld}\n", made);
    if (write(logfd, text, n) != n) fail("log");
}

static void flush(int fd) {
    if (mode == 1 && syncfs(rootfd)) fail("syncfs");
    if (mode == 2 && (fdatasync(fd) || fdatasync(logfd) || fsync(rootfd))) fail("fdatasync");
    if (mode) flushes++;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: lone_floor N ROOT [syncfs|fdatasync|none]\n"); return 2; }
    int n = atoi(argv[1]);
    snprintf(root, sizeof root, "%s", argv[2]);
    mode = argc < 4 || strcmp(argv[3], "syncfs") == 0 ? 1 : strcmp(argv[3], "fdatasync") == 0 ? 2 : 0;
    memset(record, 'x', sizeof record);
    const char *dirs[] = {"", "/pending", "/processing", "/done"};
    char a[700], b[700];
    for (int i = 0; i < 4; i++) { snprintf(a, sizeof a, "%s%s", root, dirs[i]); mkdir(a, 0755); }
    rootfd = open(root, O_RDONLY | O_DIRECTORY);
    snprintf(a, sizeof a, "%s/events.jsonl", root);
    logfd = open(a, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (rootfd < 0 || logfd < 0) fail("open");
    double start = seconds();
    for (int i = 0; i < n; i++) {
        snprintf(a, sizeof a, "%s/pending/%016x.json", root, i);
        int fd = publish(a);
        line();
        flush(fd);
        close(fd);
    }
    double posted = seconds();
    for (int i = 0; i < n; i++) {
        snprintf(a, sizeof a, "%s/pending/%016x.json", root, i);
        snprintf(b, sizeof b, "%s/processing/%016x.json", root, i);
        if (rename(a, b)) fail("claim");
        close(publish(b));
        line();
        snprintf(a, sizeof a, "%s/done/%016x.json", root, i);
        int fd = publish(a);
        if (unlink(b)) fail("unlink");
        line();
        flush(fd);
        close(fd);
    }
    double drained = seconds();
    printf("{\"post\": %.1f, \"drain\": %.1f, \"flushes\": %ld}\n", n / (posted - start),
           n / (drained - posted), flushes);
    return 0;
}
