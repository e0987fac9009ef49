import Dispatch
import Foundation
import Host

/// Builds hosts for tests: each with its own serial queue standing in for the main thread
/// (test runners keep the real one), its own clock and an in-memory log.
public enum TestHost {
    public static func make(
        clock: any HostClock = SystemClock(), log: MemoryDestination = MemoryDestination(),
        _ configure: (inout Configuration) -> Void = { _ in }
    ) throws -> ReportHost {
        var configuration = Configuration()
        configure(&configuration)
        return try ReportHost(
            configuration: configuration, logger: HostLogger(destinations: [log]), clock: clock,
            mainExecutor: DispatchQueue(label: "reporthost.test.main"))
    }
}

/// The C prelude every fixture plugin starts with.
public let fixturePrelude = """
    #include <reporthost/plugin.h>
    #include <pthread.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    static const rh_host_api *host;

    """

/// A fixture plugin whose entry returns a handler named `name` with the given callbacks
/// (C function names, or NULL).
public func fixtureHandler(
    name: String = "fixture", before: String = "NULL", after: String = "NULL", destroy: String = "NULL",
    extra: String = ""
) -> String {
    """
    \(fixturePrelude)
    \(extra)
    static rh_handler handler;
    const rh_handler *rh_plugin_entry(const rh_host_api *h) {
        host = h;
        handler.abi_major = RH_ABI_VERSION_MAJOR;
        handler.abi_minor = RH_ABI_VERSION_MINOR;
        handler.struct_size = sizeof handler;
        handler.name = "\(name)";
        handler.version = "1.0";
        handler.on_before_report_created = \(before);
        handler.on_after_report_created = \(after);
        handler.destroy = \(destroy);
        return &handler;
    }
    """
}
