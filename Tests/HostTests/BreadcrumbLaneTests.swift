import Breadcrumbs
import Foundation
@testable import HostSupport
import HostTestSupport
import Testing

/// The ring's lanes (SPEC B-1): threads writing at once, each in a lane of its own, read back
/// in one order. The writers are real threads in a child process (a C driver built from the
/// ring's own sources), writing into a ring file the host made; the host reads the file.
@Suite struct BreadcrumbLaneTests {
    let folder = makeTemporaryDirectory("breadcrumb-lanes")

    /// The driver: `driver RING SCENARIO` writes the scenario's breadcrumbs into the ring file.
    static let driver: Result<URL, Error> = Result {
        let ring = Products.packageRoot.appendingPathComponent("Sources/Breadcrumbs")
        let source = try Fixtures.file("lanes.c", driverSource)
        let output = source.deletingPathExtension()
        try Fixtures.compile([
            "-std=c11", "-O1", "-Wall", "-Werror", "-pthread", "-D_GNU_SOURCE", "-I", ring.appendingPathComponent("include").path,
            "-I", ring.path, source.path, ring.appendingPathComponent("ring.c").path, ring.appendingPathComponent("ring_read.c").path,
            "-o", output.path,
        ])
        return output
    }

    /// A ring for the last 100 breadcrumbs, as a session makes it, after `scenario` wrote into it.
    func written(_ scenario: String, threads: Bool = true) async throws -> (entries: [BreadcrumbRing.Entry], output: String) {
        let path = folder.appendingPathComponent("\(scenario)-\(threads).ring").path
        _ = try BreadcrumbRing.create(at: path, slots: 100, threads: threads).get()
        let driver = try Self.driver.get()
        // Off the cooperative pool: the driver's threads spin and wait on each other.
        let result = try await offPool { try ChildProcess.run("/usr/bin/timeout", ["-s", "KILL", "60", driver.path, path, scenario]) }
        #expect(result.status == 0, "\(scenario): \(result.stderr)")
        let read = try #require(BreadcrumbRing.read(fileAt: path, last: 100))
        #expect(read.torn == 0, "\(scenario): a torn breadcrumb")
        return (read.entries, result.stdout)
    }

    static func lane(_ entry: BreadcrumbRing.Entry) -> UInt64 { entry.locator >> UInt64(RH_CRUMB_LANE_SHIFT) }

    /// Each writer's numbers in the order read, by writer ("t3 n17": writer t3, number 17).
    static func byWriter(_ entries: [BreadcrumbRing.Entry]) -> [String: [Int]] {
        var numbers: [String: [Int]] = [:]
        for entry in entries {
            let fields = entry.message.split(separator: " ")
            numbers[String(fields[0]), default: []].append(Int(fields[1].dropFirst()) ?? -1)
        }
        return numbers
    }

    /// Whether rings for threads get lanes here (the kernel's clock runs on the processor's
    /// counter); the tests that need lanes say so when they do not.
    static let lanes = BreadcrumbRing.clockOrder(system: .live) == RH_CRUMB_ORDER_CLOCK

    @Test("B-1: eight threads writing at once, in lanes of their own: the last 100 come back with ids counting every breadcrumb written, each thread's in its order; one lane for the host's own", arguments: [true, false])
    func eightThreads(threads: Bool) async throws {
        let (entries, _) = try await written("threads", threads: threads)
        #expect(entries.count == 100)
        #expect(entries.map(\.sequence) == Array(UInt64(8 * 2_000 - 99)...UInt64(8 * 2_000)), "ids 1…16,000, the last 100")
        let byWriter = Self.byWriter(entries)
        #expect(byWriter.count == 8 && byWriter.values.allSatisfy { $0.suffix(10) == Array(1990..<2000) }, "every thread's last 10")
        for (writer, numbers) in byWriter { #expect(numbers == numbers.sorted(), "\(writer) out of its order") }
        let lanes = Set(entries.map(Self.lane))
        if threads && Self.lanes {
            #expect(lanes.count == 8 && !lanes.contains(0), "every thread in a lane of its own: \(lanes.sorted())")
        } else {
            #expect(lanes == [0], "one shared lane")
        }
    }

    @Test("B-1: two threads taking turns (each waits for the other's pipe write): their breadcrumbs alternate, never one before the one it waited for")
    func turnsKeepTheirOrder() async throws {
        let (entries, _) = try await written("turns")
        #expect(entries.count == 100)
        let expected = (250..<300).flatMap { ["a n\($0)", "b n\($0)"] }
        #expect(entries.map(\.message) == expected)
        #expect(Set(entries.map(Self.lane)).count == 2, "two lanes")
    }

    @Test("B-1: a lane goes back when its thread ends: forty threads one after another all write the same lane")
    func laneReleasedAtThreadEnd() async throws {
        let (entries, _) = try await written("churn")
        #expect(entries.count == 100 && entries.last?.sequence == 120)
        #expect(Set(entries.map(Self.lane)).count == 1 && !entries.contains { Self.lane($0) == 0 })
        #expect(entries.map(\.message) == (6..<40).flatMap { thread in (0..<3).map { "t\(thread) n\($0)" } }.suffix(100))
    }

    @Test("B-1: more threads at once than lanes: the ones without a lane share lane 0, and nothing is lost or torn")
    func crowdSharesLaneZero() async throws {
        let (entries, _) = try await written("crowd")
        #expect(entries.count == 72 && entries.last?.sequence == 72, "24 threads, 3 each")
        let lanes = Dictionary(grouping: entries, by: Self.lane)
        #expect(lanes.count == 16, "15 lanes of their own and the shared one")
        #expect(lanes[0]?.count == 27, "9 threads in lane 0")
        for (writer, numbers) in Self.byWriter(entries) { #expect(numbers == [0, 1, 2], "\(writer)") }
    }

    @Test("B-1: a signal handler that leaves a breadcrumb while its thread is writing one: the handler's goes to the shared lane, both are whole, none is lost")
    func signalHandlerWritesToo() async throws {
        let (entries, output) = try await written("signals")
        // The driver prints how many breadcrumbs the thread wrote, how many of the 500 handlers
        // found it in the middle of one, and how many breadcrumbs the shared lane holds.
        let counts = output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(counts.count == 3, "driver output: \(output)")
        #expect(entries.count == 100 && entries.last?.sequence == UInt64(counts[0] + 500), "every breadcrumb counted once")
        try #require(counts[1] > 0, "no handler came in the middle of a breadcrumb: nothing was shown")
        #expect(counts[2] > 0, "handlers in the middle of a breadcrumb wrote to the shared lane")
        let byWriter = Self.byWriter(entries)
        #expect(byWriter["m"] == byWriter["m"]?.sorted() && byWriter["s"] == byWriter["s"]?.sorted())
        #expect(entries.filter { $0.message.hasPrefix("m ") }.allSatisfy { Self.lane($0) != 0 }, "the thread's own in its lane")
    }

    @Test("B-1: a breadcrumb's time is the clock's when it was written: the clock read again after a while, not kept from the breadcrumb before")
    func timeKeepsUp() async throws {
        let (entries, output) = try await written("times")
        // The driver prints the clock (Unix ms) before the first breadcrumb and after the last.
        let bounds = output.split(separator: " ").compactMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(bounds.count == 2 && entries.count == 3, "driver output: \(output)")
        #expect(entries.allSatisfy { bounds[0] <= $0.timestampMs && $0.timestampMs <= bounds[1] })
        #expect(entries[1].timestampMs - entries[0].timestampMs >= 30, "the second, 30 ms of the clock later")
        #expect(entries[2].timestampMs == entries[1].timestampMs || entries[2].timestampMs - entries[1].timestampMs < 30)
    }

    @Test("B-1: a ring answers for one breadcrumb fewer than each lane holds: a reader asking for more (breadcrumbs.max raised since) gets that many")
    func readerGetsWhatTheRingAnswersFor() throws {
        for threads in [true, false] {
            let ring = try BreadcrumbRing.create(at: folder.appendingPathComponent("window-\(threads).ring").path, slots: 100, threads: threads).get()
            for index in 1...300 { ring.write(level: 1, category: "app", "step \(index)") }
            let read = try #require(BreadcrumbRing.read(fileAt: ring.path, last: 1_000))
            let held = threads && Self.lanes ? 127 : 128  // 128 slots a lane
            #expect(read.entries.map(\.message) == (301 - held...300).map { "step \($0)" }, "threads: \(threads)")
            #expect(read.entries.map(\.sequence) == (301 - held...300).map(UInt64.init))
        }
    }

    @Test("B-1: a damaged ring file whose lanes claim impossible counts is read without a hang or a stray write, as holding none of them")
    func damagedCountsReadAsNone() throws {
        let ring = try BreadcrumbRing.create(at: folder.appendingPathComponent("damaged.ring").path, slots: 100, threads: true).get()
        for index in 1...5 { ring.write(level: 1, category: "app", "step \(index)") }
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: ring.path)))
        let lanes = Int(bytes[24]) | Int(bytes[25]) << 8
        func put(_ value: UInt64, at offset: Int) { for index in 0..<8 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) } }
        // Every lane's count past what a locator holds (one of them also in its first slot), or
        // the largest there is.
        for lane in 0..<lanes {
            let count: UInt64 = lane % 2 == 0 ? 0xFF00_0000_0000_0001 : .max
            put(count, at: Int(RH_CRUMB_HEADER_BYTES) + lane * Int(RH_CRUMB_LANE_BYTES) + 8)
        }
        put(0xFF00_0000_0000_0001, at: Int(RH_CRUMB_HEADER_BYTES) + lanes * Int(RH_CRUMB_LANE_BYTES))
        try Data(bytes).write(to: URL(fileURLWithPath: ring.path))
        let read = try #require(BreadcrumbRing.read(fileAt: ring.path, last: 100))
        #expect(read.entries.isEmpty && read.torn == 0)
    }

    @Test("B-1: the processor's counter orders breadcrumbs only where the kernel keeps its own clock on it; otherwise one shared sequence")
    func clockOrderOnlyOnTheKernelsClock() throws {
        #if arch(x86_64)
            #expect(rh_crumb_clock_order_available("tsc\n") && rh_crumb_clock_order_available("tsc"))
        #elseif arch(arm64)
            #expect(rh_crumb_clock_order_available("arch_sys_counter\n"))
        #endif
        for other in ["hpet\n", "acpi_pm\n", "kvm-clock\n", "tsc-early\n", "", "ts"] { #expect(!rh_crumb_clock_order_available(other), "\(other)") }
        #expect(!rh_crumb_clock_order_available(nil))
        let refused = SystemCalls(faults: FaultPlan([FaultPlan.Fault(.open, errno: EACCES)]))
        #expect(BreadcrumbRing.clockOrder(system: refused) == RH_CRUMB_ORDER_SEQUENCE, "an unreadable clocksource: the sequence")
        let current = (try? String(contentsOfFile: BreadcrumbRing.clocksourcePath, encoding: .utf8)) ?? ""
        #expect((BreadcrumbRing.clockOrder(system: .live) == RH_CRUMB_ORDER_CLOCK) == rh_crumb_clock_order_available(current))
    }
}

/// The driver's scenarios, each writing through `rh_crumb_write` into the ring mapped from
/// the file the test made.
private let driverSource = #"""
    #include <pthread.h>
    #include <signal.h>
    #include <stdatomic.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <fcntl.h>
    #include <sched.h>
    #include <sys/mman.h>
    #include <sys/stat.h>
    #include <time.h>
    #include <unistd.h>
    #include "breadcrumb_ring.h"

    static void *ring;
    static size_t ring_bytes;
    static pthread_barrier_t together;

    static void crumb(const char *writer, int number) {
        char message[64];
        int len = snprintf(message, sizeof message, "%s n%d", writer, number);
        if (!rh_crumb_write(ring, 1700000000000, 1, "lanes", 5, message, (size_t)len)) abort();
    }

    static void *thread_writes(void *arg) {
        int thread = (int)(intptr_t)arg;
        char writer[16];
        snprintf(writer, sizeof writer, "t%d", thread);
        pthread_barrier_wait(&together);
        for (int n = 0; n < 1990; n++) crumb(writer, n);
        pthread_barrier_wait(&together); /* the last 10 of every thread after all the others' first */
        for (int n = 1990; n < 2000; n++) crumb(writer, n);
        return NULL;
    }

    /* `count` threads running `body` (each given its number) at once, a barrier between them. */
    static void together_run(int count, void *(*body)(void *)) {
        pthread_t ids[64];
        pthread_barrier_init(&together, NULL, (unsigned)count);
        for (int t = 0; t < count; t++) pthread_create(&ids[t], NULL, body, (void *)(intptr_t)t);
        for (int t = 0; t < count; t++) pthread_join(ids[t], NULL);
    }

    static void threads(void) { together_run(8, thread_writes); }

    static int to_b[2], to_a[2];

    static void *turn_b(void *unused) {
        (void)unused;
        char token;
        for (int n = 0; n < 300; n++) {
            if (read(to_b[0], &token, 1) != 1) abort();
            crumb("b", n);
            if (write(to_a[1], &token, 1) != 1) abort();
        }
        return NULL;
    }

    static void turns(void) {
        if (pipe(to_b) != 0 || pipe(to_a) != 0) abort();
        pthread_t b;
        pthread_create(&b, NULL, turn_b, NULL);
        char token = 'x';
        for (int n = 0; n < 300; n++) {
            crumb("a", n);
            if (write(to_b[1], &token, 1) != 1 || read(to_a[0], &token, 1) != 1) abort();
        }
        pthread_join(b, NULL);
    }

    static void *three(void *arg) {
        int thread = (int)(intptr_t)arg;
        char writer[16];
        snprintf(writer, sizeof writer, "t%d", thread);
        for (int n = 0; n < 3; n++) crumb(writer, n);
        return NULL;
    }

    static void churn(void) {
        for (int t = 0; t < 40; t++) {
            pthread_t id;
            pthread_create(&id, NULL, three, (void *)(intptr_t)t);
            pthread_join(id, NULL);
        }
    }

    static void *three_together(void *arg) {
        pthread_barrier_wait(&together);
        three(arg);
        pthread_barrier_wait(&together); /* every thread holds its lane until all have written */
        return NULL;
    }

    static void crowd(void) { together_run(24, three_together); }

    static _Atomic int handled, inside_a_write;
    static _Atomic int writing = 1;
    static volatile sig_atomic_t in_crumb;
    static pthread_t writer_thread;

    static void on_signal(int signal_number) {
        (void)signal_number;
        if (in_crumb) atomic_fetch_add(&inside_a_write, 1);
        int number = atomic_load(&handled);
        crumb("s", number);
        atomic_store(&handled, number + 1);
    }

    static void *interrupt(void *unused) {
        (void)unused;
        for (int n = 0; n < 500; n++) {
            pthread_kill(writer_thread, SIGUSR1);
            while (atomic_load(&handled) == n) sched_yield();
        }
        atomic_store(&writing, 0);
        return NULL;
    }

    static void signals(void) {
        struct sigaction action = {0};
        action.sa_handler = on_signal;
        sigaction(SIGUSR1, &action, NULL);
        writer_thread = pthread_self();
        pthread_t interrupter;
        pthread_create(&interrupter, NULL, interrupt, NULL);
        int n = 0;
        while (atomic_load(&writing)) {
            in_crumb = 1;
            crumb("m", n++);
            in_crumb = 0;
        }
        pthread_join(interrupter, NULL);
        /* How many breadcrumbs the shared lane holds: only handlers that came in the middle of
         * one of the thread's own write there. */
        size_t capacity = rh_crumb_ring_capacity(ring, ring_bytes), shared = 0;
        rh_crumb_ref *refs = calloc(capacity, sizeof *refs);
        size_t count = rh_crumb_ring_list(ring, ring_bytes, refs, capacity);
        for (size_t i = 0; i < count; i++) shared += refs[i].locator >> RH_CRUMB_LANE_SHIFT == 0;
        free(refs);
        printf("%d %d %zu\n", n, atomic_load(&inside_a_write), shared);
    }

    static int64_t coarse_ms(void) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME_COARSE, &now);
        return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    }

    /* Through the embedding path (the live ring, the time the call reads): a breadcrumb, 30 ms
     * of the clock without one (waited for by reading the clock, not by sleeping), then two. */
    static void times(void) {
        rh_crumb_activate(1, ring);
        int64_t before = coarse_ms();
        if (rh_crumb_record(1, 1, "lanes", "first") != RH_CRUMB_RECORDED) abort();
        int64_t until = coarse_ms() + 30;
        while (coarse_ms() < until) {}
        if (rh_crumb_record(1, 1, "lanes", "second") != RH_CRUMB_RECORDED) abort();
        if (rh_crumb_record(1, 1, "lanes", "third") != RH_CRUMB_RECORDED) abort();
        printf("%lld %lld\n", (long long)before, (long long)coarse_ms());
    }

    int main(int argc, char **argv) {
        if (argc != 3) return 2;
        int fd = open(argv[1], O_RDWR);
        struct stat info;
        if (fd < 0 || fstat(fd, &info) != 0) return 3;
        ring = mmap(NULL, (size_t)info.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ring_bytes = (size_t)info.st_size;
        if (ring == MAP_FAILED || !rh_crumb_ring_valid(ring, ring_bytes)) return 4;
        const char *scenario = argv[2];
        if (strcmp(scenario, "threads") == 0) threads();
        else if (strcmp(scenario, "turns") == 0) turns();
        else if (strcmp(scenario, "churn") == 0) churn();
        else if (strcmp(scenario, "crowd") == 0) crowd();
        else if (strcmp(scenario, "signals") == 0) signals();
        else if (strcmp(scenario, "times") == 0) times();
        else return 5;
        return 0;
    }
    """#
