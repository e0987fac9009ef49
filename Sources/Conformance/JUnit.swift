import FoundationEssentials
import Glibc

/// `check --junit FILE` (SPEC I-8): the results as JUnit XML, the format CI systems read
/// (Jenkins, GitLab, GitHub test reporters, `junitparser`): one `testsuite` named after the
/// plugin, one `testcase` per check, `failure` for failed, `error` for crashed or timed out,
/// `skipped` for skipped; a warning passes, with its details in `system-out`.
package enum JUnit {
    package static func document(plugin: String, results: [CheckResult]) -> String {
        let failures = results.filter { $0.status == .failed }.count
        let errors = results.filter { $0.status == .crashed || $0.status == .timedOut }.count
        let skipped = results.filter { $0.status == .skipped }.count
        let seconds = { (ms: Int) in "\(ms / 1000).\(String(ms % 1000, zeroPaddedTo: 3))" }
        let total = results.reduce(0) { $0 + $1.durationMs }
        let suiteName = URL(fileURLWithPath: plugin).lastPathComponent
        var lines = [
            #"<?xml version="1.0" encoding="UTF-8"?>"#,
            #"<testsuites name="reporthost check" tests="\#(results.count)" failures="\#(failures)" errors="\#(errors)" skipped="\#(skipped)" time="\#(seconds(total))">"#,
            #"  <testsuite name="\#(escape(suiteName))" tests="\#(results.count)" failures="\#(failures)" errors="\#(errors)" skipped="\#(skipped)" time="\#(seconds(total))">"#,
            #"    <properties><property name="plugin" value="\#(escape(plugin))"/></properties>"#,
        ]
        for result in results {
            let open = #"    <testcase name="\#(escape(result.check))" classname="reporthost.check.\#(escape(suiteName))" time="\#(seconds(result.durationMs))""#
            let details = escape(result.details)
            switch result.status {
            case .passed: lines.append(open + "/>")
            case .warning: lines.append(open + "><system-out>warning: \(details)</system-out></testcase>")
            case .skipped: lines.append(open + #"><skipped message="\#(details)"/></testcase>"#)
            case .failed: lines.append(open + #"><failure message="\#(details)" type="failed">\#(details)</failure></testcase>"#)
            case .crashed, .timedOut:
                lines.append(open + #"><error message="\#(details)" type="\#(result.status.rawValue)">\#(details)</error></testcase>"#)
            }
        }
        lines += ["  </testsuite>", "</testsuites>"]
        return lines.joined(separator: "\n") + "\n"
    }

    /// Text as XML character data or an attribute value: the five special characters
    /// escaped, and characters XML 1.0 cannot hold (most control characters, lone
    /// surrogates cannot occur in a Swift string) replaced with U+FFFD.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default:
                let v = scalar.value
                let allowed = v >= 0x20 && v != 0xFFFE && v != 0xFFFF
                out.unicodeScalars.append(allowed ? scalar : "\u{FFFD}")
            }
        }
        return out
    }
}
