import Dispatch
import Host
import HostSupport

/// A command line split into its command, its positional words and its options, checked
/// against what the command accepts (SPEC I-1: options follow the subcommand).
struct Arguments {
    var command: String
    var positionals: [String] = []
    /// Options in the order given; repeatable ones appear several times.
    var options: [(name: String, value: String?)] = []
    /// The words after `--`, taken as they are (`run -- PROGRAM ARGS…`).
    var trailing: [String] = []

    /// Options every host-launching command takes.
    static let common: [String: Bool] = [
        "config": true, "repository": true, "wrapper": true, "handler": true, "delegate": true, "log-level": true,
    ]

    /// Parses `words` (without the program name). `accepted` maps option names to whether
    /// they take a value.
    static func parse(_ words: [String], accepted: (String) -> [String: Bool]?) throws -> Arguments {
        guard let command = words.first, !command.hasPrefix("-") else {
            throw UsageError("missing command (try: reporthost --help)")
        }
        guard let allowed = accepted(command) else { throw UsageError("unknown command '\(command)' (try: reporthost --help)") }
        var arguments = Arguments(command: command)
        var index = 1
        while index < words.count {
            let word = words[index]
            index += 1
            if word == "--" {
                arguments.trailing = Array(words[index...])
                break
            }
            guard word.hasPrefix("--"), word.count > 2 else {
                arguments.positionals.append(word)
                continue
            }
            var name = String(word.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let takesValue = allowed[name] else {
                throw UsageError("unknown option '--\(name)' for '\(command)'")
            }
            if takesValue, value == nil {
                guard index < words.count else { throw UsageError("option '--\(name)' needs a value") }
                value = words[index]
                index += 1
            } else if !takesValue, value != nil {
                throw UsageError("option '--\(name)' takes no value")
            }
            arguments.options.append((name, value))
        }
        return arguments
    }

    /// The last value given for `name`.
    func value(_ name: String) -> String? { options.last { $0.name == name }?.value }
    func values(_ name: String) -> [String] { options.filter { $0.name == name }.compactMap(\.value) }
    func flag(_ name: String) -> Bool { options.contains { $0.name == name } }

    /// The configuration file (if any) with the command line's overrides applied.
    func configuration() throws -> Configuration {
        var config = try value("config").map { path throws in try Configuration.load(path: path, system: Switches.system) } ?? Configuration()
        if let repository = value("repository") { config.repository = Paths.absolute(repository) }
        if let wrapper = value("wrapper") { config.plugins[.wrapper] = Paths.absolute(wrapper) }
        if let handler = value("handler") { config.plugins[.handler] = Paths.absolute(handler) }
        if let delegate = value("delegate") { config.plugins[.delegate] = Paths.absolute(delegate) }
        return config
    }

    /// What a host-launching command hands the runtime: the configuration with the command
    /// line's overrides, `--log-level`, the CLI's main queue (SPEC H-8) and the faults a test
    /// arms (`Switches`).
    func runtimeOptions() throws -> RuntimeOptions {
        var options = RuntimeOptions(configuration: try configuration(), mainExecutor: DispatchQueue.main)
        options.logLevel = try logLevel()
        options.faults = Switches.faults
        return options
    }

    /// `--log-level`, validated.
    func logLevel() throws -> LogLevel? {
        guard let name = value("log-level") else { return nil }
        guard let level = LogLevel(name: name) else {
            throw UsageError("--log-level '\(name)' is not one of debug, info, warn, error")
        }
        return level
    }
}
