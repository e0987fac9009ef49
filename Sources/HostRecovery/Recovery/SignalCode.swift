import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// What `siginfo_t.si_code` says of a signal (sigaction(2)): how a fault happened, or that
/// the signal was sent and by what.
package enum SignalCode {
    /// The name of `code` for `signal`: `SEGV_MAPERR`, `SI_USER`, …; nil for one not listed.
    package static func name(_ code: Int64, signal: Int32) -> String? {
        if code <= 0 || code == 0x80 { return sent[code] }
        return faults[signal]?[code]
    }

    /// A code that says the signal was sent (kill, tgkill, sigqueue, abort, a timer), not
    /// raised by a fault: `si_addr` holds the sender then, never an address.
    package static func isSent(_ code: Int64) -> Bool { code <= 0 }

    private static let sent: [Int64: String] = [
        0: "SI_USER", 0x80: "SI_KERNEL", -1: "SI_QUEUE", -2: "SI_TIMER", -3: "SI_MESGQ", -4: "SI_ASYNCIO", -5: "SI_SIGIO",
        -6: "SI_TKILL",
    ]

    private static let faults: [Int32: [Int64: String]] = [
        SIGSEGV: [1: "SEGV_MAPERR", 2: "SEGV_ACCERR", 3: "SEGV_BNDERR", 4: "SEGV_PKUERR"],
        SIGBUS: [1: "BUS_ADRALN", 2: "BUS_ADRERR", 3: "BUS_OBJERR", 4: "BUS_MCEERR_AR", 5: "BUS_MCEERR_AO"],
        SIGILL: [1: "ILL_ILLOPC", 2: "ILL_ILLOPN", 3: "ILL_ILLADR", 4: "ILL_ILLTRP", 5: "ILL_PRVOPC", 6: "ILL_PRVREG",
                 7: "ILL_COPROC", 8: "ILL_BADSTK"],
        SIGFPE: [1: "FPE_INTDIV", 2: "FPE_INTOVF", 3: "FPE_FLTDIV", 4: "FPE_FLTOVF", 5: "FPE_FLTUND", 6: "FPE_FLTRES",
                 7: "FPE_FLTINV", 8: "FPE_FLTSUB"],
        SIGTRAP: [1: "TRAP_BRKPT", 2: "TRAP_TRACE", 3: "TRAP_BRANCH", 4: "TRAP_HWBKPT"],
    ]
}
