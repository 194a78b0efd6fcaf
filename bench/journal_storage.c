/* Journal storage candidates, measured the same way in one run: N records of SIZE bytes, committed
 * durably in batches of BATCH (one fdatasync / synchronous commit per batch, as group commit does),
 * then read back sequentially from the first record.
 *   segment: an append-only file, one write() per batch, fdatasync per batch (CheckoutBus's choice)
 *   sqlite:  SQLite in WAL mode, synchronous=FULL, one transaction of BATCH inserts per batch,
 *            table (seq INTEGER PRIMARY KEY, body BLOB); read: SELECT ordered by seq
 *   lmdb:    LMDB, one write transaction of BATCH puts per batch (key = big-endian seq), cursor scan
 * Usage: journal_storage DIR N SIZE BATCH */
#include <fcntl.h>
#include <lmdb.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void report(const char *name, long n, double w, double r) {
    printf("%-8s write %9.0f records/s   read %10.0f records/s\n", name, n / w, n / r);
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: %s DIR N SIZE BATCH\n", argv[0]); return 2; }
    const char *dir = argv[1];
    long n = atol(argv[2]), size = atol(argv[3]), batch = atol(argv[4]);
    char *rec = malloc(size * batch), path[4096];
    for (long i = 0; i < size * batch; i++) rec[i] = (char)('a' + i % 26);

    /* segment file */
    snprintf(path, sizeof path, "%s/segment.seg", dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    double t0 = now();
    for (long i = 0; i < n; i += batch) {
        long k = n - i < batch ? n - i : batch;
        if (write(fd, rec, size * k) != size * k) { perror("write"); return 1; }
        fdatasync(fd);
    }
    double w = now() - t0;
    close(fd);
    fd = open(path, O_RDONLY);
    char *buf = malloc(1 << 20);
    long seen = 0, got;
    t0 = now();
    while ((got = read(fd, buf, 1 << 20)) > 0) seen += got;
    double r = now() - t0;
    close(fd);
    if (seen != n * size) { fprintf(stderr, "segment read %ld bytes\n", seen); return 1; }
    report("segment", n, w, r);

    /* SQLite WAL */
    snprintf(path, sizeof path, "%s/journal.sqlite", dir);
    unlink(path);
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                     "CREATE TABLE j(seq INTEGER PRIMARY KEY, body BLOB NOT NULL);", 0, 0, 0);
    sqlite3_stmt *ins, *sel;
    sqlite3_prepare_v2(db, "INSERT INTO j(seq, body) VALUES(?, ?)", -1, &ins, 0);
    t0 = now();
    for (long i = 0; i < n; i += batch) {
        long k = n - i < batch ? n - i : batch;
        sqlite3_exec(db, "BEGIN", 0, 0, 0);
        for (long j = 0; j < k; j++) {
            sqlite3_bind_int64(ins, 1, i + j + 1);
            sqlite3_bind_blob(ins, 2, rec + j * size, (int)size, SQLITE_STATIC);
            if (sqlite3_step(ins) != SQLITE_DONE) { fprintf(stderr, "insert: %s\n", sqlite3_errmsg(db)); return 1; }
            sqlite3_reset(ins);
        }
        sqlite3_exec(db, "COMMIT", 0, 0, 0);
    }
    w = now() - t0;
    sqlite3_prepare_v2(db, "SELECT seq, body FROM j WHERE seq >= 1 ORDER BY seq", -1, &sel, 0);
    seen = 0;
    t0 = now();
    while (sqlite3_step(sel) == SQLITE_ROW) seen += sqlite3_column_bytes(sel, 1);
    r = now() - t0;
    sqlite3_finalize(sel);
    sqlite3_finalize(ins);
    sqlite3_close(db);
    if (seen != n * size) { fprintf(stderr, "sqlite read %ld bytes\n", seen); return 1; }
    report("sqlite", n, w, r);

    /* LMDB */
    snprintf(path, sizeof path, "%s/lmdb", dir);
    mkdir(path, 0755);
    char file[4200];
    snprintf(file, sizeof file, "%s/data.mdb", path); unlink(file);
    snprintf(file, sizeof file, "%s/lock.mdb", path); unlink(file);
    MDB_env *env;
    mdb_env_create(&env);
    mdb_env_set_mapsize(env, (size_t)n * (size + 64) * 2 + (64 << 20));
    if (mdb_env_open(env, path, 0, 0644)) { fprintf(stderr, "lmdb open failed\n"); return 1; }
    MDB_dbi dbi;
    MDB_txn *txn;
    t0 = now();
    for (long i = 0; i < n; i += batch) {
        long k = n - i < batch ? n - i : batch;
        mdb_txn_begin(env, NULL, 0, &txn);
        if (i == 0) mdb_dbi_open(txn, NULL, 0, &dbi);
        for (long j = 0; j < k; j++) {
            uint64_t seq = __builtin_bswap64((uint64_t)(i + j + 1));
            MDB_val key = {sizeof seq, &seq}, val = {(size_t)size, rec + j * size};
            if (mdb_put(txn, dbi, &key, &val, MDB_APPEND)) { fprintf(stderr, "lmdb put failed\n"); return 1; }
        }
        mdb_txn_commit(txn);
    }
    w = now() - t0;
    MDB_cursor *cur;
    MDB_val key, val;
    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    mdb_cursor_open(txn, dbi, &cur);
    seen = 0;
    t0 = now();
    for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))
        seen += val.mv_size;
    r = now() - t0;
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    if (seen != n * size) { fprintf(stderr, "lmdb read %ld bytes\n", seen); return 1; }
    report("lmdb", n, w, r);
    return 0;
}
