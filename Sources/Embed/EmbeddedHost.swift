import EmbedCalls
import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// The host inside a program that links `libreporthost.so` (embed.h): a `Runtime` with a main
/// thread of its own and the delivery worker, which recovers what earlier runs left and then
/// delivers.
///
/// # Thread safety
/// Calls come from any thread of the program; the mutable state is behind `Locked`s.
final class EmbeddedHost: Sendable {
    let runtime: Runtime
    let mainThread: ThreadExecutor
    /// The process that started the host: a forked child has none of its threads (the main
    /// thread, the worker), so every call from another process is refused at once.
    let owner = getpid()
    /// Stopping, and the reports being raised now (stop waits for them).
    private let calls = WaitableState((stopping: false, inFlight: 0))
    /// Files each thread added for its next report (the `extended` source).
    private let pendingAttachments = Locked<[UInt: [String]]>([:])

    /// Watched threads and their heartbeats (SPEC B-4).
    let hangs: AppHangs

    /// `reporthost-stack`, beside this library (a build folder) or in ../bin (an installation,
    /// `scripts/install`): it reads a hung thread's stack from outside.
    static var stackHelper: String {
        guard let file = rh_embed_library_path() else { return "reporthost-stack" }
        let folder = URL(fileURLWithPath: String(cString: file)).resolvingSymlinksInPath().deletingLastPathComponent()
        let beside = folder.appendingPathComponent("reporthost-stack").path
        let installed = folder.deletingLastPathComponent().appendingPathComponent("bin/reporthost-stack").path
        return FileManager.default.isExecutableFile(atPath: beside) || !FileManager.default.isExecutableFile(atPath: installed) ? beside : installed
    }

    /// The `extended` source's budget (SPEC R-7).
    static let attachmentsPerReport = 3

    init(configuration: Configuration) throws(HostError) {
        let mainThread = ThreadExecutor(name: "reporthost-main")
        do {
            // A second copy of the program runs as a secondary: it never waits for the lock.
            var options = RuntimeOptions(configuration: configuration, mainExecutor: mainThread)
            options.delivery = .worker
            options.breadcrumbWriters = .threads
            runtime = try Runtime.start(options)
        } catch {
            mainThread.finish()
            throw error
        }
        self.mainThread = mainThread
        hangs = AppHangs(runtime: runtime, helper: Self.stackHelper)
        _ = try? runtime.deliver()  // the worker: never throws
    }

    /// Whether the caller is the process that started the host (not a forked child).
    var isOwnerProcess: Bool { getpid() == owner }

    // MARK: Calls from the program

    /// Runs `body` unless the host is stopping; stop waits for it to end.
    func call<T>(_ body: () -> T) -> T? {
        let admitted = calls.update { state -> Bool in
            guard !state.stopping else { return false }
            state.inFlight += 1
            return true
        }
        guard admitted else { return nil }
        defer { calls.update { $0.inFlight -= 1 } }
        return body()
    }

    /// Whether the calling thread is the host's main thread (where plugin callbacks run).
    var isHostThread: Bool { mainThread.isCurrentThread }

    func addAttachment(_ path: String) -> Bool {
        pendingAttachments.withLock { pending in
            let key = Self.threadKey
            guard pending[key, default: []].count < Self.attachmentsPerReport else { return false }
            pending[key, default: []].append(Paths.absolute(path))
            return true
        }
    }

    /// Raises a report with the calling thread's pending attachments, stores it and wakes the
    /// worker to deliver it.
    func report(_ trigger: Trigger, summary: String?, description: String?) throws(HostError) -> ReportDocument? {
        let paths = pendingAttachments.withLock { $0.removeValue(forKey: Self.threadKey) ?? [] }
        var request = ReportRequest(trigger: trigger)
        request.summary = summary
        request.description = description
        for path in paths {
            let name = URL(fileURLWithPath: path).lastPathComponent
            var attachment = ReportRequest.ExtendedAttachment(name: name, filename: name, data: Data())
            switch BoundedFile.read(path, limit: ReportContent.attachmentMaxBytes, followLinks: true, system: embedSystem) {
            case .success(let data): attachment.data = data
            case .failure(.tooLarge(let size, _)): attachment.declaredSize = UInt(clamping: size)
            case .failure(let failure):
                // Dropped and noted: an empty attachment is refused with a note.
                runtime.logger.warn("attachment \(path) could not be read (\(failure)); dropped")
            }
            request.attachments.append(attachment)
        }
        return try runtime.raise(request)
    }

    // MARK: Stopping

    /// embed.h's stop: new calls are refused, calls in flight finish, the worker ends (a
    /// delivery in flight gets at most `deliveryGraceMs`), plugins are destroyed on the
    /// host's main thread, the session ends.
    func stop(deliveryGraceMs: Int = 2_000) {
        calls.update { $0.stopping = true }
        calls.wait(until: nil, clock: SystemClock(), for: { $0.inFlight == 0 }, then: { _, _ in })
        hangs.stop()
        runtime.stop(graceMs: deliveryGraceMs)
        mainThread.finish()
        pendingAttachments.withLock { $0 = [:] }
    }

    /// The calling thread (`pthread_t` is an integer on Linux).
    private static var threadKey: UInt { UInt(pthread_self()) }
}

