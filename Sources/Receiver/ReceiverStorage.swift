import FoundationEssentials
import Glibc
import Host
import HostDelivery
import HostStore
import HostSupport

// Storing what clients submit: a report's JSON and its attachments, inside the receiver's folder.
extension LocalReceiver {
    /// Why a submission was not stored.
    enum StoreFailure: Error {
        /// Not a Backtrace submission (no multipart body, no JSON report with a uuid).
        case badSubmission
        /// The files could not be written (a full disk, a read-only folder).
        case storage(String)
    }

    /// A submission as read off the wire: the JSON report and its attachments.
    struct Submission {
        var uuid: String
        var report: JSONValue
        var attachments: [String: Data]
    }

    /// Reads what Backtrace clients send: a multipart body (`upload_file` and
    /// `attachment_<name>` parts), or the JSON report itself as the body
    /// (`Content-Type: application/json`).
    static func parseSubmission(_ body: Data, contentType: String) -> Result<Submission, StoreFailure> {
        var report: JSONValue?
        var attachments: [String: Data] = [:]
        if contentType.lowercased().hasPrefix("application/json") {
            report = try? JSONValue.parse(body)
        } else if let boundary = contentType.split(separator: "boundary=", omittingEmptySubsequences: false).last,
            contentType.contains("multipart/form-data")
        {
            for part in Multipart.parts(of: body, boundary: String(boundary)) {
                if part.name == "upload_file" {
                    report = try? JSONValue.parse(part.data)
                } else if part.name.hasPrefix("attachment_") {
                    let name = String(part.name.dropFirst("attachment_".count))
                    // A name that is not a plain file name is refused before anything is stored.
                    guard isPlainFileName(name) else { return .failure(.badSubmission) }
                    attachments[name] = part.data
                }
            }
        }
        guard let report, let uuid = report["uuid"]?.stringValue, UUID(uuidString: uuid) != nil else { return .failure(.badSubmission) }
        return .success(Submission(uuid: uuid, report: report, attachments: attachments))
    }

    /// Stores a submission: `<folder>/<uuid>.json` and `<folder>/<uuid>/<attachment>`.
    func store(_ submission: Submission, target: String, answer: Response) -> Result<Received, StoreFailure> {
        let (uuid, report, attachments) = (submission.uuid, submission.report, submission.attachments)
        let query = target.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        let received = Received(uuid: uuid, report: report, attachments: attachments, query: query, answer: answer)
        do throws(StorageError) {
            if !attachments.isEmpty {
                let attachmentFolder = try Self.ownFolder(folder.appendingPathComponent(uuid), system: system)
                for (name, data) in attachments { try Self.writeInside(attachmentFolder, name: name, data: data, system: system) }
            }
            // The report last: its file says the submission is whole.
            try Self.writeInside(folder, name: "\(uuid).json", data: Data(report.serialized(pretty: true).utf8), system: system)
        } catch {
            return .failure(.storage(error.message))
        }
        if keepInMemory { state.withLock { $0.received.append(received) } }
        inbox?.add(received, at: system.now())
        onReceive(received)
        return .success(received)
    }
}

// Metric events, one JSON line each.
extension LocalReceiver {
    /// The file metric events are appended to, in the receiver's folder.
    static let metricEventsFile = "metric-events.jsonl"

    /// Appends `{"kind": …, "event": …}` as one line of `metric-events.jsonl` (0600, never
    /// through a link planted under that name), whole or not at all as far as readers of
    /// whole lines go: one `write` of the line under the lock.
    func appendMetricEvent(_ kind: String, _ event: JSONValue) -> Result<Void, StorageError> {
        let path = folder.appendingPathComponent(Self.metricEventsFile).path
        let line = JSONValue.object([("kind", .string(kind)), ("event", event)]).serialized() + "\n"
        return metricEventsLock.withLock { _ in
            system.open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
                .mapError { StorageError(path: path, message: "cannot open (\($0))") }
                .flatMap { fd in
                    defer { close(fd) }
                    return system.writeAll(fd, line).mapError { StorageError(path: path, message: "cannot write (\($0))") }
                }
        }
    }
}

// Writing only inside the receiver's folder, whatever is planted in it.
extension LocalReceiver {
    /// Not empty, not `.` or `..`, no `/`, `\` or NUL.
    static func isPlainFileName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains { "/\\\u{0}".contains($0) }
    }

    /// `url` as a folder of the receiver's own: created 0700, or an existing real folder (a
    /// symbolic link planted under that name is refused, never followed).
    static func ownFolder(_ url: URL, system: SystemCalls) throws(StorageError) -> URL {
        if system.mkdir(url.path, 0o700) != 0 && errno != EEXIST {
            throw StorageError(path: url.path, message: "cannot create the folder (\(String(cString: strerror(errno))))")
        }
        guard let status = system.lstat(url.path), status.st_mode & S_IFMT == S_IFDIR else {
            throw StorageError(path: url.path, message: "not a folder of the receiver's own (a link or a file is in the way)")
        }
        return url
    }

    /// Writes `data` as `folder/name` (0600, fsync'd): into a new file opened with
    /// `O_EXCL | O_NOFOLLOW` under a temporary name, then renamed over `name`. A symbolic link
    /// planted as `name` is replaced, never written through.
    static func writeInside(_ folder: URL, name: String, data: Data, system: SystemCalls) throws(StorageError) {
        let final = folder.appendingPathComponent(name).path
        let temporary = folder.appendingPathComponent(".\(randomUUID()).partial").path
        try DurableFile.createNew(data, at: URL(fileURLWithPath: temporary), system: system)
        if case .failure(let error) = system.rename(temporary, final) {
            _ = system.unlink(temporary)
            throw StorageError(path: final, message: "cannot store (\(error))")
        }
        DurableFile.syncDirectory(folder, system: system)
    }
}
