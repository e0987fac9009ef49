import FoundationEssentials
import HostSupport

/// A report while it is being built: the one object every handler changes (SPEC R-1, "the
/// report is live"). What a handler sets is what gets bundled; there is no apply step.
///
/// Handlers reach it only through `ReportHandle`s it opens; each checks that its handle is
/// still open under the same lock that applies the change, so a change is either applied
/// whole or not at all (SPEC R-8).
///
/// # Thread safety
/// All state is behind one `Locked`; safe from any thread.
package final class LiveReport: Sendable {
    package let id: String
    package let trigger: Trigger
    package let createdAt: Date
    let hostID: UInt32
    let hostLog: HostLogger
    /// Told of every rule event noted on this report (the host's observer).
    let events: RuleEventSink
    private let state: Locked<State>

    struct HandleState {
        var contributor: Contributor
        var isOpen = true
        /// Operations already noted as used after close (each is noted once per handle).
        var notedAfterClose: Set<String> = []
        /// Set once a recovered callback's method has returned without completing: its later
        /// changes wait here and apply only if completion arrives before bundling (SPEC H-9).
        var pending: [HeldChange]?
        /// The report as the held changes would leave it, what the next held change is
        /// checked against (nil until the first).
        var heldView: State?
        /// The bytes the held changes keep (their texts and attachments).
        var heldBytes = 0
        /// Whether a held change past the limits was noted (once per handle).
        var heldFullNoted = false
    }

    /// What a held handle keeps at most; later changes are dropped (`.dropped`) and noted once.
    static let heldChangesMax = 1_000
    static let heldBytesMax = 16 << 20

    typealias Change = @Sendable (inout State, Contributor) -> Void

    /// A change held back until its callback completes, with the field it changes (for the
    /// trail, should it be dropped).
    struct HeldChange {
        var field: String?
        var apply: Change
    }

    struct State {
        var content = ReportContent()
        var handles: [ReportHandle: HandleState] = [:]
        var attachmentsAdded: [String: Int] = [:]
        var internalLog = BoundedLog()
        /// Every change made through a handle, and the host's drops (SPEC T-1).
        var trail = ChangeTrail()
        var isBundled = false
        /// Rule events noted under the lock, sent to `events` once it is released.
        var unsent: [(handler: String, event: RuleEvent)] = []

        /// Notes `event` in the internal log under `handler`'s name, to be sent on.
        mutating func record(_ event: RuleEvent, by handler: String) {
            internalLog.append(InternalLogEntry(level: .warn, handler: handler, message: event.message))
            unsent.append((handler, event))
        }

        /// Notes in the trail that held changes of `contributor` were dropped.
        mutating func recordDropped(_ changes: [HeldChange], of contributor: Contributor) {
            for field in changes.compactMap(\.field) { trail.recordDrop(of: contributor, field: field) }
        }
    }

    package var type: ReportType { trigger.type }

    package init(
        trigger: Trigger, id: String = randomUUID(), createdAt: Date,
        hostID: UInt32 = 0, hostLog: HostLogger = .silent, events: @escaping RuleEventSink = { _, _ in }
    ) {
        self.id = id
        self.events = events
        self.trigger = trigger
        self.createdAt = createdAt
        self.hostID = hostID
        self.hostLog = hostLog
        self.state = Locked(State())
    }

    // MARK: Host side

    /// Opens a handle for one callback invocation or delegate call.
    package func openHandle(for contributor: Contributor) -> ReportHandle {
        let handle = HandleRegistry.shared.open(self, hostID: hostID)
        let opened = state.withLock { state -> Bool in
            guard !state.isBundled else { return false }
            state.handles[handle] = HandleState(contributor: contributor)
            return true
        }
        if !opened { HandleRegistry.shared.forget([handle]) }
        return handle
    }

    /// Closes a handle; later calls through it change nothing (SPEC R-8). Changes it held
    /// back (see `holdChanges`) are dropped and noted.
    package func close(_ handle: ReportHandle) {
        state.withLock { state in
            guard var handleState = state.handles[handle], handleState.isOpen else { return }
            handleState.isOpen = false
            if let pending = handleState.pending, !pending.isEmpty {
                state.record(.droppedChanges(pending.count), by: handleState.contributor.handler)
                state.recordDropped(pending, of: handleState.contributor)
            }
            handleState.pending = nil
            handleState.heldView = nil
            state.handles[handle] = handleState
        }
        sendEvents()
    }

    /// Sends the rule events noted under the lock, outside it.
    private func sendEvents() {
        let unsent = state.withLock { state in
            defer { state.unsent = [] }
            return state.unsent
        }
        for (handler, event) in unsent { events(handler, event) }
    }

    /// The callback behind `handle` completed: applies the changes it held back, in order,
    /// then closes the handle.
    package func complete(_ handle: ReportHandle) {
        state.withLock { state in
            guard var handleState = state.handles[handle], handleState.isOpen else { return }
            for change in handleState.pending ?? [] { change.apply(&state, handleState.contributor) }
            handleState.pending = nil
            handleState.heldView = nil
            handleState.isOpen = false
            state.handles[handle] = handleState
        }
    }

    /// From now on, changes through `handle` are held back until it completes (SPEC H-9: a
    /// recovered callback's change after its method returned counts only if completion
    /// arrives before bundling). Reads still see the report without them.
    package func holdChanges(of handle: ReportHandle) {
        state.withLock { state in
            guard state.handles[handle]?.isOpen == true, state.handles[handle]?.pending == nil else { return }
            state.handles[handle]?.pending = []
        }
    }

    /// Removes the attachments added through `handle` (an asynchronous decision that timed
    /// out takes back what its call added, SPEC A-2).
    package func removeAttachments(addedThrough handle: ReportHandle) {
        state.withLock { state in
            let removed = state.content.attachments.filter { $0.addedThrough == handle }
            state.content.attachments.removeAll { $0.addedThrough == handle }
            guard let contributor = state.handles[handle]?.contributor else { return }
            for attachment in removed { state.trail.recordDrop(of: contributor, field: "attachment:\(attachment.name)") }
        }
    }

    /// Takes up the trail of an earlier run of this report's chain (a rerun, SPEC H-13), so
    /// the trail still tells where the content it starts from came from.
    package func continueTrail(_ entries: [TrailEntry]) {
        state.withLock { $0.trail = ChangeTrail(entries: entries) }
    }

    /// Changes the content on the host's behalf (no handle, no budget).
    @discardableResult
    package func edit<T: Sendable>(_ body: (inout ReportContent) -> T) -> T {
        state.withLock { body(&$0.content) }
    }

    package var content: ReportContent { state.withLock { $0.content } }
    package var internalLog: [InternalLogEntry] { state.withLock { $0.internalLog.entries } }
    package var isBundled: Bool { state.withLock { $0.isBundled } }

    /// Notes a broken rule in the internal log under `handler`'s name (SPEC H-14); after
    /// bundling, in the host's log. Either way the event goes to `events`.
    package func record(_ event: RuleEvent, by handler: String) {
        let bundled = state.withLock { state -> Bool in
            if !state.isBundled { state.record(event, by: handler) }
            return state.isBundled
        }
        if bundled {
            hostLog.log(.warn, "report \(id): \(event.message)", handler: handler)
            events(handler, event)
        } else {
            sendEvents()
        }
    }

    /// Notes a fact in the internal log (SPEC H-14); after bundling, in the host's log.
    package func note(_ level: LogLevel, handler: String, _ message: String) {
        let bundled = state.withLock { state -> Bool in
            if !state.isBundled {
                state.internalLog.append(InternalLogEntry(level: level, handler: handler, message: message))
            }
            return state.isBundled
        }
        if bundled { hostLog.log(level, "report \(id): \(message)", handler: handler) }
    }

    /// Adds an attachment charged to `contributor`'s budget (SPEC R-7).
    package func addAttachment(
        name: String, filename: String, data: Data, declaredSize: UInt? = nil, by contributor: Contributor
    ) -> Result<Void, ReportError> {
        defer { sendEvents() }
        return state.withLock {
            Self.addAttachment(&$0, name: name, filename: filename, data: data, declaredSize: declaredSize, by: contributor, through: nil)
        }
    }

    /// Adds an attachment, or drops and notes it. `declaredSize`: the size a plugin claimed,
    /// when its bytes were not copied because that size (or the spent budget) refuses it.
    fileprivate static func addAttachment(
        _ state: inout State, name: String, filename: String, data: Data, declaredSize: UInt? = nil, by contributor: Contributor,
        through handle: ReportHandle?
    ) -> Result<Void, ReportError> {
        let used = state.attachmentsAdded[contributor.budgetKey, default: 0]
        let size = declaredSize ?? UInt(data.count)
        let reason: String? =
            if size == 0 { "has no data" }
            else if size > UInt(ReportContent.attachmentMaxBytes) {
                "is \(size) bytes, over the \(ReportContent.attachmentMaxBytes)-byte limit"
            } else if used >= ReportContent.attachmentsPerSource {
                "is past the \(ReportContent.attachmentsPerSource) attachments allowed to \(contributor.source.rawValue)"
            } else { nil }
        if let reason {
            state.record(.droppedAttachment(name, because: reason), by: contributor.handler)
            state.trail.recordDrop(of: contributor, field: "attachment:\(name)")
            return .failure(.dropped)
        }
        state.attachmentsAdded[contributor.budgetKey] = used + 1
        var attachment = Attachment(name: name, filename: filename, data: data, source: contributor.source)
        attachment.addedThrough = handle
        state.content.attachments.append(attachment)
        // The host's own (extended) attachments are not a plugin's change.
        if handle != nil { state.trail.record(contributor, field: "attachment:\(name)", .added) }
        return .success(())
    }

    /// The report as it stands, without bundling it (the journal, SPEC H-13).
    package var snapshot: ReportDocument {
        state.withLock { state in
            ReportDocument(
                id: id, trigger: trigger, content: state.content, internalLog: state.internalLog.entries, createdAt: createdAt,
                changes: state.trail.entries)
        }
    }

    /// Closes every handle and freezes the content: the report's final form (bundling).
    /// Later uses of its handles go to the host's log.
    package func bundle() -> ReportDocument {
        let (document, handles) = state.withLock { state in
            for (handle, handleState) in state.handles where handleState.isOpen {
                if let pending = handleState.pending, !pending.isEmpty {
                    state.record(.droppedChanges(pending.count), by: handleState.contributor.handler)
                    state.recordDropped(pending, of: handleState.contributor)
                }
                state.handles[handle]?.isOpen = false
                state.handles[handle]?.pending = nil
                state.handles[handle]?.heldView = nil
            }
            state.isBundled = true
            let document = ReportDocument(
                id: id, trigger: trigger, content: state.content, internalLog: state.internalLog.entries,
                createdAt: createdAt, changes: state.trail.entries)
            return (document, Array(state.handles.keys))
        }
        HandleRegistry.shared.forget(handles)
        sendEvents()
        return document
    }

    // MARK: Handle side

    /// Runs `body` if `handle` is open, under the lock that also guards the open flag, so
    /// a change and a close never interleave. A use after close is noted once per
    /// operation and handle, and answered `.closed`. A change through a handle that holds
    /// its changes back is answered from a scratch copy and kept for completion.
    /// - Parameters:
    ///   - field: the trail's name of the field a change changes: a change through a closed
    ///     handle is then in the trail as the host's drop.
    ///   - cost: the bytes a change keeps alive if it is held (its texts, its data).
    func access<T: Sendable>(
        _ handle: ReportHandle, _ operation: String, field: String? = nil, noteIfClosed: Bool = true, mutates: Bool = true,
        cost: Int = 0, _ body: @escaping @Sendable (inout State, Contributor) -> Result<T, ReportError>
    ) -> Result<T, ReportError> {
        defer { sendEvents() }
        let outcome: AccessOutcome<T> = state.withLock { state in
            guard var handleState = state.handles[handle] else { return .closed(note: nil, bundled: true) }
            guard handleState.isOpen else {
                let first = noteIfClosed && handleState.notedAfterClose.insert(operation).inserted
                state.handles[handle] = handleState
                if mutates, let field, !state.isBundled { state.trail.recordDrop(of: handleState.contributor, field: field) }
                let note = first ? (handler: handleState.contributor.handler, event: RuleEvent.useAfterClose(operation)) : nil
                if let note {
                    if state.isBundled { state.unsent.append(note) } else { state.record(note.event, by: note.handler) }
                }
                return .closed(note: note?.event.message, bundled: state.isBundled)
            }
            if mutates, let pending = handleState.pending {
                return .done(Self.hold(body, field: field, cost: cost, pending: pending.count, handle: handle, &handleState, in: &state))
            }
            return .done(body(&state, handleState.contributor))
        }
        switch outcome {
        case .done(let result): return result
        case .closed(let note, let bundled):
            if let note, bundled { hostLog.warn("report \(id): \(note)") }
            return .failure(.closed)
        }
    }

    /// A change through a held handle: checked against the report as the held changes would
    /// leave it (so a held handle's attachment budget is spent too), kept only if it took, and
    /// only within `heldChangesMax` changes and `heldBytesMax` bytes. A change refused by its
    /// own rule is noted now, in the report itself (the view it was checked on is discarded).
    private static func hold<T: Sendable>(
        _ body: @escaping @Sendable (inout State, Contributor) -> Result<T, ReportError>, field: String?, cost: Int,
        pending: Int, handle: ReportHandle, _ handleState: inout HandleState, in state: inout State
    ) -> Result<T, ReportError> {
        defer { state.handles[handle] = handleState }
        guard pending < heldChangesMax, handleState.heldBytes + max(0, cost) <= heldBytesMax else {
            if !handleState.heldFullNoted {
                handleState.heldFullNoted = true
                state.record(.heldChangesFull(heldChangesMax, bytes: heldBytesMax), by: handleState.contributor.handler)
            }
            if let field { state.trail.recordDrop(of: handleState.contributor, field: field) }
            return .failure(.dropped)
        }
        var scratch = handleState.heldView ?? state
        let before = scratch.unsent.count
        let result = body(&scratch, handleState.contributor)
        guard case .success = result else {
            for (handler, event) in scratch.unsent[before...] { state.record(event, by: handler) }
            return result
        }
        handleState.pending?.append(HeldChange(field: field) { state, contributor in _ = body(&state, contributor) })
        handleState.heldBytes += max(0, cost)
        // Content and budgets only: no handles (each would keep the view before), no log.
        scratch.handles = [:]
        scratch.internalLog = BoundedLog()
        scratch.unsent = []
        handleState.heldView = scratch
        return result
    }

    package func add(
        attachment name: String, filename: String, data: Data, through handle: ReportHandle
    ) -> Result<Void, ReportError> {
        access(handle, "add_attachment", field: "attachment:\(name)", cost: data.count) { state, contributor in
            Self.addAttachment(&state, name: name, filename: filename, data: data, by: contributor, through: handle)
        }
    }

    /// Adds an attachment whose bytes live in a plugin's memory: its claimed `size` and the
    /// handle's budget are checked before `copy` reads a byte, so a plugin cannot make the host
    /// copy gigabytes (or read past its buffer) only to drop them.
    package func add(
        attachment name: String, filename: String, size: UInt, through handle: ReportHandle, copy: () -> Data
    ) -> Result<Void, ReportError> {
        // Through a held handle, the budget its held attachments already spent counts.
        let budgetLeft = state.withLock { state -> Bool in
            guard let handleState = state.handles[handle], handleState.isOpen else { return true }
            let view = handleState.heldView ?? state
            return view.attachmentsAdded[handleState.contributor.budgetKey, default: 0] < ReportContent.attachmentsPerSource
        }
        let admissible = size > 0 && size <= UInt(ReportContent.attachmentMaxBytes) && budgetLeft
        let data = admissible ? copy() : Data()
        return access(handle, "add_attachment", field: "attachment:\(name)", cost: data.count) { state, contributor in
            Self.addAttachment(
                &state, name: name, filename: filename, data: data, declaredSize: admissible ? nil : size, by: contributor,
                through: handle)
        }
    }
}

private enum AccessOutcome<T: Sendable>: Sendable {
    case done(Result<T, ReportError>)
    case closed(note: String?, bundled: Bool)
}
