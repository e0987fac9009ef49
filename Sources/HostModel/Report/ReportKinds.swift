import FoundationEssentials
import HostSupport

/// What kind of report this is. Raw values are the ABI's `RH_REPORT_*`.
public enum ReportType: Int32, Sendable, CaseIterable {
    case bug = 1, crash = 2, error = 3

    public var name: String {
        switch self {
        case .bug: "bug"
        case .crash: "crash"
        case .error: "error"
        }
    }
}

/// What raised the report; it decides the type (SPEC R-2). Raw values are `RH_TRIGGER_*`.
public enum Trigger: Int32, Sendable, CaseIterable {
    case dialog = 1, upload, logError, logException, crash, abnormalExit
    /// A watched thread missed its heartbeat (SPEC B-4; ABI 1.1 `RH_TRIGGER_APP_HANG`).
    case appHang

    public var name: String {
        switch self {
        case .dialog: "dialog"
        case .upload: "upload"
        case .logError: "log_error"
        case .logException: "log_exception"
        case .crash: "crash"
        case .abnormalExit: "abnormal_exit"
        case .appHang: "app_hang"
        }
    }

    /// The trigger a stored `name` stands for; nil for any other text.
    package init?(name: String) {
        guard let trigger = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = trigger
    }

    public var type: ReportType {
        switch self {
        case .dialog, .upload: .bug
        case .logError, .logException, .appHang: .error
        case .crash, .abnormalExit: .crash
        }
    }

    /// Recovered (native) reports are built on a later launch from what a crash left behind.
    public var isRecovered: Bool { type == .crash }
}

/// Where an attachment came from (`attachments[].source` in the report document).
public enum AttachmentSource: String, Sendable, CaseIterable {
    case wrapperBefore = "wrapper.before"
    case wrapperAfter = "wrapper.after"
    case handlerBefore = "handler.before"
    case handlerAfter = "handler.after"
    case delegate
    case extended
    case recovered
}

/// An attachment with its bytes.
///
/// Its size and sha256 are taken once, when its bytes are copied in; a stored attachment
/// (read back from the repository without its bytes) carries the ones stored with its copy.
public struct Attachment: Sendable, Equatable {
    public var name: String
    public var filename: String
    /// The bytes; empty for a stored attachment, whose bytes stay in its copy.
    public private(set) var data: Data
    public private(set) var size: Int
    /// Lower-case hex.
    public private(set) var sha256: String
    public var source: AttachmentSource
    /// The handle it was added through, if any.
    var addedThrough: ReportHandle?

    public init(name: String, filename: String, data: Data, source: AttachmentSource) {
        self.name = name
        self.filename = filename
        self.data = data
        self.source = source
        size = data.count
        sha256 = SHA256.hex(data)
    }

    /// An attachment whose bytes are in a copy elsewhere (the repository's).
    public init(name: String, filename: String, size: Int, sha256: String, source: AttachmentSource) {
        self.name = name
        self.filename = filename
        self.data = Data()
        self.size = size
        self.sha256 = sha256
        self.source = source
    }

    public var info: AttachmentInfo { AttachmentInfo(name: name, filename: filename, size: size) }
}

/// What a snapshot of the attachments shows: no bytes.
public struct AttachmentInfo: Sendable, Equatable {
    public var name: String
    public var filename: String
    public var size: Int
}

/// One note in a report's internal log (SPEC H-14).
public struct InternalLogEntry: Sendable, Equatable {
    public var level: LogLevel
    /// The plugin's `name`, or `host` for the host's own notes.
    public var handler: String
    public var message: String

    public init(level: LogLevel, handler: String, message: String) {
        self.level = level
        self.handler = handler
        self.message = message
    }

    /// The longest message a plugin's log call keeps (at most 1,000 entries per report).
    public static let messageMaxBytes = 4 * 1024

    /// `message` cut to `messageMaxBytes` at a character boundary, saying so.
    public static func bounded(_ message: String) -> String {
        let cut = ReportContent.bounded(message, limit: messageMaxBytes)
        return cut.wasCut ? "\(cut.text) … (cut: over \(messageMaxBytes) bytes)" : message
    }
}

/// The fields a handler can change (SPEC R-2).
public struct ReportContent: Sendable, Equatable {
    public var summary: String?
    public var description: String?
    public var email: String?
    /// 0 while there is none; otherwise 1...5 (SPEC R-3).
    public var severity: Int32 = 0
    public var attributes: [String: String] = [:]
    public var labels: [String] = []
    public var attachments: [Attachment] = []
    /// What the program did before the report, oldest first (SPEC B-1).
    public var breadcrumbs: [Breadcrumb] = []

    public init() {}

    public static let severityRange: ClosedRange<Int32> = 1...5
    public static let attachmentMaxBytes = 3 * 1024 * 1024
    public static let attachmentsPerSource = 3

    // What a handler sets is bounded, so a plugin cannot grow a report (and its repository
    // row, parsed again by every delivery pass) without end.

    /// The longest text kept (summary, description, email, each label, attribute key and
    /// value): longer text is cut at a character boundary, and the cut is noted.
    public static let textMaxBytes = 64 * 1024
    /// The most labels a report holds: a change past it is refused whole.
    public static let labelsMax = 1_000
    /// The most attributes a report holds: a new key past it is refused.
    public static let attributesMax = 1_000

    /// `text` cut to `limit` bytes between two code points, and whether it was cut.
    public static func bounded(_ text: String, limit: Int = textMaxBytes) -> (text: String, wasCut: Bool) {
        guard text.utf8.count > limit else { return (text, false) }
        return (String(decoding: completeCharacters(Array(text.utf8.prefix(limit))), as: UTF8.self), true)
    }

    /// `bytes` without a UTF-8 sequence cut off at its end (the first bytes of a longer text).
    public static func completeCharacters(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        guard let lead = bytes.lastIndex(where: { $0 & 0xC0 != 0x80 }) else { return bytes[...] }
        let width = bytes[lead] < 0x80 ? 1 : bytes[lead] >= 0xF0 ? 4 : bytes[lead] >= 0xE0 ? 3 : 2
        return lead + width > bytes.count ? bytes[..<lead] : bytes[...]
    }
}
