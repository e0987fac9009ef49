import Glibc
import HostSupport
import Testing

/// `Overlapped`, what a backlog's pipeline is made of: a function on a thread of its own while
/// its starter goes on, and its result once it has one.
@Suite struct OverlappedTests {
    @Test("D-1: an overlapped function runs on another thread while its starter goes on, and result() waits for its end")
    func runsBesideItsStarter() {
        let starter = pthread_self()
        // The function waits (at most 10 s, so an inline run fails rather than hangs) for what
        // the starter does only after `init` returned.
        let released = WaitableState(false)
        let work = Overlapped(name: "test-overlap") { () -> (sawRelease: Bool, onStarter: Bool) in
            let onStarter = pthread_equal(pthread_self(), starter) != 0
            let deadline = SystemClock().now().advanced(byMilliseconds: 10_000)
            let saw = released.wait(until: deadline, clock: SystemClock(), for: { $0 }, then: { _, satisfied in satisfied })
            return (saw, onStarter)
        }
        released.update { $0 = true }
        let result = work.result()
        #expect(result.sawRelease, "the starter went on while the function ran")
        #expect(!result.onStarter)
        #expect(work.result() == result, "the result stays")
    }
}
