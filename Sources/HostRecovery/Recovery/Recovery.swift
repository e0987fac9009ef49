import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// What a launch finds and finishes before its own work (SPEC D-1, D-2, D-16, H-13), in
/// this order: interrupted purges, new crash files (the chains of a backlog's crash reports
/// run batch by batch, as their files are purged), abnormal exits, then every chain that has
/// not finished.
package struct Recovery {
    package let host: ReportHost
    package let repository: Repository

    package init(host: ReportHost, repository: Repository) {
        self.host = host
        self.repository = repository
    }

    var log: HostLogger { host.logger }

    /// What a start must know before it loads plugins: the crash files written inside a plugin
    /// call (the writer names them `*.plugin.crash`), so a plugin that crashed the last launch
    /// is quarantined before it is opened. Everything else waits for `collect`, which an
    /// embedding program runs in the background: a start never waits for a backlog.
    package func collectPluginCrashes() throws(HostError) {
        _ = try saveCrashFiles(crashFiles(named: CrashFile.namesPluginCall), watched: nil, batch: Self.crashFilesPerBatch)
    }

    /// In this order: interrupted purges, every crash file (oldest first, in batches), how a
    /// `watched` program ended (`reporthost run`), abnormal exits. The chains of a backlog's
    /// crash reports run as their batches are purged, but for the last batch's (`finish`
    /// runs those); returns the documents of the chains run.
    package func collect(currentSession: String, watched: ProgramExit?, batch: Int = crashFilesPerBatch) throws(HostError)
        -> [ReportDocument]
    {
        try storing { () throws(StorageError) in
            try resumePurges()
            if let watched, watched.endedNormally { try discardCrashFiles(of: watched) }
        }
        var documents: [ReportDocument] = []
        let saved = try saveCrashFiles(crashFiles(), watched: watched, batch: batch) { purged throws(HostError) in
            documents += try finishChains(of: purged, currentSession: currentSession)
        }
        try storing { () throws(StorageError) in
            if let watched {
                try recordKilled(watched, savedNow: saved)
                try recordSession(of: watched, savedNow: saved)
            }
            try recordAbnormalExits(currentSession: currentSession)
        }
        return documents
    }

    /// How many crash files one transaction saves: a backlog of thousands costs a flush and a
    /// folder sync per this many files, not four flushes per file.
    package static let crashFilesPerBatch = 128

    /// Runs or settles every chain that has not finished, with the handlers loaded now. The
    /// chains of reports held for a required slot are `rerunHeldChains`' (never ahead of a
    /// command's own report).
    package func finish(currentSession: String) throws(HostError) -> [ReportDocument] {
        try finishChains(currentSession: currentSession)
    }

    /// When `path` was last written (now, when it cannot be read): one `stat`, where
    /// FileManager's attributes would build a dictionary of them all for every crash file.
    static func modificationDate(_ path: String, system: SystemCalls) -> Date {
        guard let info = system.stat(path) else { return system.now() }
        return Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec) + TimeInterval(info.st_mtim.tv_nsec) / 1e9)
    }
}
