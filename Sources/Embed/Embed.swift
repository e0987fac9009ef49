import Breadcrumbs
import FoundationEssentials
import Host
import HostSupport

// The C entry points of libreporthost.so (`reporthost/embed.h`). Each checks its arguments,
// finds the live host by its token, and turns the host's errors into embed.h's codes and
// one-line messages. Nothing here dereferences a handle: it is a token, compared only.

private let ok: Int32 = 0
private let errInvalid: Int32 = -1
private let errStopped: Int32 = -2
private let errStorage: Int32 = -3
private let errCancelled: Int32 = -4

/// The live host and the tokens handed out (embed.h: one live handle per process, tokens
/// never reused). Process-wide because the C caller holds only the token.
/// The seam of the embedding entry: the real system calls (a program's host runs no faults).
let embedSystem = SystemCalls.live

private let registry = Locked<(next: UInt, live: (token: UInt, host: EmbeddedHost)?, starting: Bool)>((1, nil, false))

/// The live host behind `handle`, or nil when it is not the live one, or when the caller is a
/// forked child of the process that started it (embed.h: -2 at once; the child has none of
/// the host's threads, and its copy of the lock must not be used).
private func live(_ handle: OpaquePointer?) -> EmbeddedHost? {
    guard let handle else { return nil }
    let token = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
    let host = registry.withLock { state in state.live.flatMap { $0.token == token ? $0.host : nil } }
    guard let host, host.isOwnerProcess else { return nil }
    return host
}

/// Copies `message` into the caller's buffer, NUL-terminated, cut at a UTF-8 character boundary.
private func copy(_ message: String, into buffer: UnsafeMutablePointer<CChar>?, capacity: Int) {
    guard let buffer, capacity > 0 else { return }
    var bytes = Array(message.utf8.prefix(capacity - 1))
    // Never end inside a multi-byte character: drop continuation bytes and their lead.
    if bytes.count < message.utf8.count {
        while let last = bytes.last, last & 0xC0 == 0x80 { bytes.removeLast() }
        if let last = bytes.last, last >= 0xC0 { bytes.removeLast() }
    }
    for (index, byte) in bytes.enumerated() { buffer[index] = CChar(bitPattern: byte) }
    buffer[bytes.count] = 0
}

/// A string argument: nil for NULL or text that is not UTF-8.
private func text(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.flatMap { String(validatingCString: $0) } }

@_cdecl("rh_embed_start")
public func embedStart(
    _ configPath: UnsafePointer<CChar>?, _ repository: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<CChar>?,
    _ errorCapacity: Int
) -> OpaquePointer? {
    copy("", into: error, capacity: errorCapacity)
    func fail(_ message: String) -> OpaquePointer? {
        copy(String(message.map { $0.isNewline ? " " : $0 }), into: error, capacity: errorCapacity)
        return nil
    }
    if configPath != nil && text(configPath) == nil { return fail("rh_embed_start: config_path is not valid UTF-8") }
    if repository != nil && text(repository) == nil { return fail("rh_embed_start: repository is not valid UTF-8") }
    let claimed = registry.withLock { state -> Bool in
        guard state.live == nil, !state.starting else { return false }
        state.starting = true
        return true
    }
    guard claimed else { return fail("rh_embed_start: a host is already running in this process (call rh_embed_stop first)") }
    do throws(HostError) {
        var configuration = try text(configPath).map { path throws(HostError) in try Configuration.load(path: path, system: embedSystem) } ?? Configuration()
        if let repository = text(repository) { configuration.repository = Paths.absolute(repository) }
        let host = try EmbeddedHost(configuration: configuration)
        let token = registry.withLock { state -> UInt in
            let token = state.next
            state.next += 1
            state.live = (token, host)
            state.starting = false
            return token
        }
        // rh_embed_breadcrumb (C, lock-free) finds the ring by the token from here on.
        // Without a ring (breadcrumbs off) the token is live all the same: a call records nothing.
        rh_crumb_activate(token, host.runtime.breadcrumbs?.address)
        return OpaquePointer(bitPattern: token)
    } catch {
        registry.withLock { $0.starting = false }
        return fail("rh_embed_start: \(error)")
    }
}

@_cdecl("rh_embed_set_attribute")
public func embedSetAttribute(_ handle: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> Int32 {
    guard let embedded = live(handle) else { return errStopped }
    guard let key = text(key), !key.isEmpty, !key.contains("="), !key.contains("\n") else { return errInvalid }
    if value != nil && text(value) == nil { return errInvalid }
    return embedded.call {
        return embedded.runtime.setAttribute(key, text(value)) ? ok : errInvalid
    } ?? errStopped
}

@_cdecl("rh_embed_report")
public func embedReport(
    _ handle: OpaquePointer?, _ type: UnsafePointer<CChar>?, _ summary: UnsafePointer<CChar>?,
    _ description: UnsafePointer<CChar>?, _ reportID: UnsafeMutablePointer<CChar>?
) -> Int32 {
    copy("", into: reportID, capacity: 37)
    guard let embedded = live(handle) else { return errStopped }
    let trigger: Trigger
    switch text(type) {
    case "bug": trigger = .upload
    case "error": trigger = .logError
    case "exception": trigger = .logException
    default: return errInvalid
    }
    if (summary != nil && text(summary) == nil) || (description != nil && text(description) == nil) { return errInvalid }
    // From a callback on the host's main thread, the chain would wait for itself.
    if embedded.isHostThread { return errInvalid }
    return embedded.call { () -> Int32 in
        do throws(HostError) {
            guard let document = try embedded.report(trigger, summary: text(summary), description: text(description)) else {
                return errCancelled
            }
            copy(document.id, into: reportID, capacity: 37)
            return ok
        } catch {
            embedded.runtime.logger.error("rh_embed_report: \(error)")
            return errStorage
        }
    } ?? errStopped
}

@_cdecl("rh_embed_add_attachment")
public func embedAddAttachment(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    guard let embedded = live(handle) else { return errStopped }
    guard let path = text(path), !path.isEmpty else { return errInvalid }
    return embedded.call { embedded.addAttachment(path) ? ok : errInvalid } ?? errStopped
}

@_cdecl("rh_embed_consecutive_crashes")
public func embedConsecutiveCrashes(_ handle: OpaquePointer?) -> Int32 {
    guard let embedded = live(handle) else { return errStopped }
    return Int32(clamping: embedded.runtime.consecutiveCrashes)
}

@_cdecl("rh_embed_watch_thread")
public func embedWatchThread(_ handle: OpaquePointer?, _ timeoutMs: Int32) -> Int32 {
    guard let embedded = live(handle) else { return errStopped }
    guard timeoutMs >= 0 else { return errInvalid }
    return embedded.call { embedded.hangs.watchCallingThread(timeoutMs: Int(timeoutMs)) ? ok : errStorage } ?? errStopped
}

@_cdecl("rh_embed_heartbeat")
public func embedHeartbeat(_ handle: OpaquePointer?) {
    guard let embedded = live(handle) else { return }
    embedded.hangs.heartbeat()
}

@_cdecl("rh_embed_stop")
public func embedStop(_ handle: OpaquePointer?) {
    guard let embedded = live(handle), !embedded.isHostThread else { return }
    // Breadcrumbs stop first: the ring file goes with the session.
    rh_crumb_deactivate(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle))))
    embedded.stop()
    registry.withLock { state in
        if state.live?.host === embedded { state.live = nil }
    }
}
