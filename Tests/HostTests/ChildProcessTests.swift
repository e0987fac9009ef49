import Foundation
import Glibc
import HostSupport
import HostTestSupport
import Testing

/// The suite's own harness: what a test's child inherits.
@Suite struct ChildProcessTests {
    @Test("harness: a child run from a thread that blocks SIGTERM starts with no signal blocked, as from a shell (a blocked mask survives exec: a Bugsink server once never received its stop)")
    func childStartsUnblocked() throws {
        let result = Locked<Result<ChildProcess.Result, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            var terminate = sigset_t()
            sigemptyset(&terminate)
            sigaddset(&terminate, SIGTERM)
            pthread_sigmask(SIG_BLOCK, &terminate, nil)
            result.withLock { $0 = Result { try ChildProcess.run("/bin/grep", ["^SigBlk:", "/proc/self/status"]) } }
            finished.signal()
        }
        thread.start()
        finished.wait()
        let run = try #require(try result.withLock { $0 }?.get())
        #expect(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "SigBlk:\t0000000000000000", "\(run.stdout)")
    }
}
