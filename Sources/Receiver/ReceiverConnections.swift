import FoundationEssentials
import Glibc
import Host
import HostSupport

// Connection handling: accepting clients, the connection limit, shedding and refusing.
extension LocalReceiver {
    func acceptLoop() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            let failure = errno
            if state.withLock({ $0.stopped }) {
                if client >= 0 { close(client) }
                return
            }
            if client < 0 {
                // Out of descriptors or memory is transient: wait and go on accepting.
                if failure == EMFILE || failure == ENFILE || failure == ENOBUFS || failure == ENOMEM { usleep(100_000) }
                if failure == EBADF || failure == EINVAL { return }  // the listener is gone
                continue
            }
            guard admit(client) else {
                refuse(client, "too many connections")
                continue
            }
            let started = startThread { [self] in
                serve(client)
                // Forgotten before it is closed: `admit` never shuts down a reused descriptor.
                state.withLock { $0.connections[client] = nil }
                close(client)
            }
            if !started {
                state.withLock { $0.connections[client] = nil }
                refuse(client, "no thread to serve the connection")
            }
        }
    }

    /// Answers `client` 503 with Retry-After, then reads and discards what it sends for up to
    /// `refusalDrainMs` before closing (on a thread of its own): closed with its request
    /// unread, the kernel would reset the connection, and the client might never read the
    /// answer. Nothing of it is stored.
    func refuse(_ client: Int32, _ why: String) {
        let limits = limits
        let answer: @Sendable () -> Void = { SocketReader(fd: client, limits: limits).answer(503, why, extra: "Retry-After: 1\r\nConnection: close\r\n") }
        let started = startThread {
            answer()
            shutdown(client, Int32(SHUT_WR))
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            let deadline = SystemClock().now().advanced(byMilliseconds: limits.refusalDrainMs)
            while true {
                let left = deadline.milliseconds(since: SystemClock().now())
                var ready = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                guard left > 0, poll(&ready, 1, Int32(clamping: left)) > 0 else { break }
                guard buffer.withUnsafeMutableBytes({ recv(client, $0.baseAddress, $0.count, 0) }) > 0 else { break }
            }
            close(client)
        }
        if !started {
            answer()
            close(client)
        }
    }

    /// Counts `client` in, making room when the limit is reached by shedding the connection
    /// that has waited longest for a request head; false when every connection is busy.
    func admit(_ client: Int32) -> Bool {
        let now = SystemClock().now()
        return state.withLock { state in
            let live = state.connections.filter { !$0.value.shed }
            if live.count >= limits.maxConnections {
                let waiting = live.compactMap { entry in
                    entry.value.waitingForHead.flatMap { now.milliseconds(since: $0) >= limits.shedIdleAfterMs ? (fd: entry.key, since: $0) : nil }
                }
                guard let oldest = waiting.min(by: { $0.since < $1.since }) else { return false }
                state.connections[oldest.fd]?.shed = true
                // Wakes its thread's read, which ends the connection.
                shutdown(oldest.fd, Int32(SHUT_RDWR))
            }
            state.connections[client] = Connection(waitingForHead: now)
            state.accepted += 1
            state.mostAtOnce = max(state.mostAtOnce, state.connections.values.filter { !$0.shed }.count)
            return true
        }
    }

    /// Notes whether `client` waits for a request head (it may then be shed). A new connection
    /// waits from the moment it was accepted, not from when its thread first runs: threads
    /// start in any order, and the one idle longest must be the one shed. Returns false when
    /// it was shed meanwhile: a head read just as it was shed is not served (nothing stored
    /// that could not be answered; the client sends it again).
    @discardableResult
    func setWaitingForHead(_ client: Int32, _ waiting: Bool) -> Bool {
        let now = SystemClock().now()
        return state.withLock { state in
            guard let connection = state.connections[client], !connection.shed else { return false }
            state.connections[client]?.waitingForHead = waiting ? (connection.waitingForHead ?? now) : nil
            return true
        }
    }

    /// Counts `client` as an event stream, idle since now (at the connection limit it may be
    /// closed for a new client). At the stream quota, the oldest stream is closed for it. False
    /// when it was shed already.
    func admitStream(_ client: Int32) -> Bool {
        let now = SystemClock().now()
        return state.withLock { state in
            guard let connection = state.connections[client], !connection.shed else { return false }
            let streams = state.connections.compactMap { fd, stream in stream.shed ? nil : stream.streamSince.map { (fd: fd, since: $0) } }
            if streams.count >= limits.maxStreams, let oldest = streams.min(by: { $0.since < $1.since }) {
                state.connections[oldest.fd]?.shed = true
                // Wakes its thread's poll, which ends the stream.
                shutdown(oldest.fd, Int32(SHUT_RDWR))
            }
            state.connections[client]?.streamSince = now
            state.connections[client]?.waitingForHead = now
            return true
        }
    }
}
