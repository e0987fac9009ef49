import Foundation
import Glibc
import HostSupport

/// A child a test starts, holds the streams of, signals and waits for itself. Spawned with
/// `posix_spawn` and reaped with `waitpid` on its own pid, never through Foundation's
/// `Process`, whose wait hung for ever once (see `ChildProcess.run`).
package struct StartedChild {
    private let process: Subprocess
    package var pid: pid_t { process.pid }

    /// Starts `executable` with `arguments`, in `directory` (nil: this process's), with
    /// `ChildProcess.environment` and `environment` added; its standard streams are the
    /// descriptors given, each nil for /dev/null. The caller closes its copies of them.
    package static func start(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil,
        input: Int32? = nil, output: Int32? = nil, errors: Int32? = nil
    ) throws -> StartedChild {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (given, target, mode) in [(input, STDIN_FILENO, O_RDONLY), (output, STDOUT_FILENO, O_WRONLY), (errors, STDERR_FILENO, O_WRONLY)] {
            if let given {
                posix_spawn_file_actions_adddup2(&actions, given, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", mode, 0)
            }
        }
        // No other descriptor of this process reaches it (tests run in parallel: one another
        // test holds would stay open as long as this child lives).
        for fd in Subprocess.openDescriptors() where fd > STDERR_FILENO { posix_spawn_file_actions_addclose(&actions, fd) }
        // posix_spawn has no working directory of its own (the Glibc module lacks
        // addchdir_np): GNU env changes to it, then execs the program under the same pid.
        let words = (directory.map { ["/usr/bin/env", "-C", $0.path, "--"] } ?? []) + [executable] + arguments
        var env = ChildProcess.environment
        for (key, value) in environment { env[key] = value }
        // Every signal at its default and none blocked, as from a shell, whatever thread spawns
        // it (a mask survives exec: a Bugsink server a host thread started never received its
        // SIGTERM).
        return StartedChild(process: Subprocess(pid: try Subprocess.spawnp(words, environment: env, actions: &actions).get()))
    }

    /// Sends it SIGTERM.
    package func terminate() { kill(pid, SIGTERM) }

    /// Waits for it to end and reaps it: how it ended.
    package func wait() -> Subprocess.Ending { process.wait() }
}
