/* The compiled rule set, kept in the plugin's data folder: compiling takes about a second,
 * loading the saved database about a millisecond. The file is named by a digest of what was
 * compiled (every pattern and its flags, and the Hyperscan version), so a changed rule, option
 * or library never loads a stale database. It ends with the SHA-256 of its bytes, which older
 * versions of the plugin check; Hyperscan checks the CRC32C it keeps of the database: a torn or
 * altered file is recompiled, never loaded. Written to a fresh temporary file (O_EXCL,
 * O_NOFOLLOW) and renamed, so two hosts starting at once both end with a whole file.
 * The memo of clean texts is at the end, and the scrub that goes through it. */
#define _GNU_SOURCE
#include "cache.h"
#include "engine.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rh_sha256.h>

#define CACHE_MAX_BYTES (64 << 20)

void scrub_cache_digest(const char *const *patterns, const unsigned *flags, size_t count, uint8_t digest[32]) {
    rh_sha256 context;
    rh_sha256_init(&context);
    const char *version = hs_version();
    rh_sha256_update(&context, version, strlen(version) + 1);
    for (size_t k = 0; k < count; k++) {
        rh_sha256_update(&context, patterns[k], strlen(patterns[k]) + 1);
        rh_sha256_update(&context, &flags[k], sizeof flags[k]);
    }
    rh_sha256_final(&context, digest);
}

static void cache_path(char *path, size_t size, const char *folder, const uint8_t digest[32]) {
    char hex[17];
    for (int k = 0; k < 8; k++) snprintf(hex + 2 * k, 3, "%02x", digest[k]);
    snprintf(path, size, "%s/rules-%s.hsdb", folder, hex);
}

bool scrub_cache_has(const char *folder, const uint8_t digest[32]) {
    char path[4200];
    cache_path(path, sizeof path, folder, digest);
    struct stat status;
    return lstat(path, &status) == 0 && S_ISREG(status.st_mode);
}

static bool read_all(int fd, char *buffer, size_t size) {
    for (size_t done = 0; done < size;) {
        ssize_t got = read(fd, buffer + done, size - done);
        if (got <= 0) return false;
        done += (size_t)got;
    }
    return true;
}

hs_database_t *scrub_cache_load(const char *folder, const uint8_t digest[32]) {
    char path[4200];
    cache_path(path, sizeof path, folder, digest);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return NULL;
    struct stat status;
    hs_database_t *database = NULL;
    if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && status.st_size > 32 && status.st_size < CACHE_MAX_BYTES) {
        /* Read into pages the kernel provides at once (the rule set's megabyte, a fault per
           page otherwise), never mapped from the file: a file cut short meanwhile fails the
           read, where a mapping would end the host with SIGBUS. */
        size_t size = (size_t)status.st_size;
        char *bytes = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        /* The SHA-256 at the end is not read again (it cost a start a millisecond): Hyperscan
           checks the database's header and the CRC32C of its bytecode, and refuses a torn or
           altered one (the fuzz driver damages saved files to hold it to that). */
        if (bytes != MAP_FAILED && read_all(fd, bytes, size) && hs_deserialize_database(bytes, size - 32, &database) != HS_SUCCESS)
            database = NULL;
        if (bytes != MAP_FAILED) munmap(bytes, size);
    }
    close(fd);
    return database;
}

void scrub_cache_store(const char *folder, const uint8_t digest[32], const hs_database_t *database) {
    char *bytes = NULL;
    size_t length = 0;
    if (hs_serialize_database(database, &bytes, &length) != HS_SUCCESS) return;
    uint8_t sum[32];
    rh_sha256 context;
    rh_sha256_init(&context);
    rh_sha256_update(&context, bytes, length);
    rh_sha256_final(&context, sum);
    char path[4200], temporary[4300];
    cache_path(path, sizeof path, folder, digest);
    snprintf(temporary, sizeof temporary, "%s.%d.partial", path, (int)getpid());
    unlink(temporary);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        bool ok = write(fd, bytes, length) == (ssize_t)length && write(fd, sum, 32) == 32 && fsync(fd) == 0;
        close(fd);
        if (!ok || rename(temporary, path) != 0) unlink(temporary);
    }
    free(bytes);
}

/* 4,096 slots of 16 bytes: 64 KB, enough for a breadcrumb ring many times over. A slot holds
   a digest with its last bit set, so an empty (zero) slot never matches; two texts whose
   digests share their first 127 bits are beyond any chance. A digest that lands on a taken
   slot replaces it: a forgotten text is only scanned again. */
#define MEMO_SLOTS 4096

void scrub_memo_init(struct scrub_memo *memo) {
    pthread_mutex_init(&memo->lock, NULL);
    /* Without a key there is no memo: a known key would let a text be made to match one. */
    memset(memo->key, 0, sizeof memo->key);
    bool keyed = getrandom(memo->key, sizeof memo->key, 0) == (ssize_t)sizeof memo->key;
    memo->slots = keyed ? calloc(MEMO_SLOTS, sizeof *memo->slots) : NULL;
}

void scrub_memo_free(struct scrub_memo *memo) {
    free(memo->slots);
    pthread_mutex_destroy(&memo->lock);
}

static size_t memo_slot(const uint8_t digest[16]) {
    return ((size_t)digest[0] | (size_t)digest[1] << 8) % MEMO_SLOTS;
}

#define ROTATE(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                                               \
    do {                                                                                                                       \
        v0 += v1, v1 = ROTATE(v1, 13), v1 ^= v0, v0 = ROTATE(v0, 32);                                                          \
        v2 += v3, v3 = ROTATE(v3, 16), v3 ^= v2;                                                                               \
        v0 += v3, v3 = ROTATE(v3, 21), v3 ^= v0;                                                                               \
        v2 += v1, v1 = ROTATE(v1, 17), v1 ^= v2, v2 = ROTATE(v2, 32);                                                          \
    } while (0)

void scrub_siphash128(const uint64_t key[2], const char *text, size_t length, uint8_t out[16]) {
    uint64_t v0 = 0x736f6d6570736575ull ^ key[0], v1 = 0x646f72616e646f6dull ^ key[1] ^ 0xee;
    uint64_t v2 = 0x6c7967656e657261ull ^ key[0], v3 = 0x7465646279746573ull ^ key[1];
    size_t whole = length - length % 8;
    for (size_t at = 0; at < whole; at += 8) {
        uint64_t m;
        memcpy(&m, text + at, 8);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)length << 56;
    for (size_t k = 0; k < length % 8; k++) last |= (uint64_t)(uint8_t)text[whole + k] << (8 * k);
    v3 ^= last;
    SIPROUND;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xee;
    for (int k = 0; k < 4; k++) SIPROUND;
    uint64_t first = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    for (int k = 0; k < 4; k++) SIPROUND;
    uint64_t second = v0 ^ v1 ^ v2 ^ v3;
    memcpy(out, &first, 8);
    memcpy(out + 8, &second, 8);
}

bool scrub_memo_knows(struct scrub_memo *memo, const char *text, size_t length, uint8_t digest[16]) {
    scrub_siphash128(memo->key, text, length, digest);
    digest[15] |= 1;
    if (!memo->slots) return false;
    pthread_mutex_lock(&memo->lock);
    bool known = memcmp(memo->slots[memo_slot(digest)], digest, 16) == 0;
    pthread_mutex_unlock(&memo->lock);
    return known;
}

void scrub_memo_remember(struct scrub_memo *memo, const uint8_t digest[16]) {
    if (!memo->slots) return;
    pthread_mutex_lock(&memo->lock);
    memcpy(memo->slots[memo_slot(digest)], digest, 16);
    pthread_mutex_unlock(&memo->lock);
}

/* A text the memo knows had nothing to scrub is not scanned again (the style changes only what
   replaces a value); one scanned now that has nothing is remembered. Either way nothing is
   copied: a host's report asks this of a hundred breadcrumbs it scrubbed in the report before. */
char *rh_scrubber_apply_if_changed(struct rh_scrubber *scrubber, const char *text, const struct rh_scrub_style *style, bool *unchanged) {
    size_t length = strlen(text);
    uint8_t digest[16];
    bool memo = length <= SCRUB_MEMO_MAX_TEXT;
    *unchanged = memo && scrub_memo_knows(&scrubber->memo, text, length, digest);
    char *scrubbed = *unchanged ? NULL : rh_scrubber_apply(scrubber, text, style);
    if (scrubbed && strcmp(scrubbed, text) == 0) {
        if (memo) scrub_memo_remember(&scrubber->memo, digest);
        free(scrubbed);
        scrubbed = NULL;
        *unchanged = true;
    }
    return scrubbed;
}

char *rh_scrubber_apply_remembering(struct rh_scrubber *scrubber, const char *text, const struct rh_scrub_style *style) {
    bool unchanged = false;
    char *scrubbed = rh_scrubber_apply_if_changed(scrubber, text, style, &unchanged);
    return unchanged ? strdup(text) : scrubbed;
}
