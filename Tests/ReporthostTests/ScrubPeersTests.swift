import Conformance
import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC T-5: the generated corpus written out for other tools, and scrub-pii beside its peers
/// (Sentry Relay and detect-secrets from PyPI, in the project's venv) on it.
@Suite struct ScrubPeersTests {
    let folder = makeTemporaryDirectory("scrub-peers")

    @Test("T-5: check --write-corpus writes the corpus --scrub generates from the seed; scored as --corpus it gives the same figures")
    func writeCorpus() async throws {
        let file = folder.appendingPathComponent("seed-3.jsonl")
        let written = try await offPool { try ChildProcess.reporthost(["check", "--write-corpus", file.path, "--seed", "3"]) }
        #expect(written.status == 0, "\(written.stderr)")
        let loaded = try ScrubCorpus.load(file.path, system: .live)
        let generated = ScrubCorpus.generated(seed: 3)
        #expect(loaded.documents.map(\.text) == generated.documents.map(\.text))
        #expect(loaded.documents.map(\.spans) == generated.documents.map(\.spans))
        let kinds = Set(loaded.documents.flatMap(\.spans).map(\.kind))
        #expect(kinds.isSuperset(of: OutsideKind.kinds) && kinds.contains("email") && kinds.contains(ScrubCorpus.decoyKind))
        let bad = try await offPool { try ChildProcess.reporthost(["check", "--write-corpus", file.path, "--documents", "0"]) }
        #expect(bad.status == 2 && bad.stderr.contains("--documents '0'"), "\(bad.stderr)")
    }

    @Test("T-5: scripts/scrub-peers scores scrub-pii, Relay and detect-secrets on one corpus: recall per kind, decoys changed, MB/s")
    func peers() async throws {
        let script = Products.packageRoot.appendingPathComponent("scripts/scrub-peers").path
        let ran = try await offPool { try ChildProcess.run(script, ["--documents", "3", "--seed", "2"]) }
        #expect(ran.status == 0, "\(ran.stderr.suffix(2_000))")
        let rows = ran.stdout.split(separator: "\n").map(String.init)
        #expect(rows.first?.hasPrefix("scrub-peers: 3 documents") == true, "\(ran.stdout)")
        #expect(rows.contains("| kind | scrub-pii | Relay (11 rules) | detect-secrets (found) |"))
        // scrub-pii removes every planted kind; Relay has no rule for a GitHub token.
        let github = try #require(rows.first { $0.hasPrefix("| `github_token` |") })
        #expect(github.hasPrefix("| `github_token` | 1.00 | 0.00 |"), "\(github)")
        #expect(rows.contains { $0.hasPrefix("| MB/s |") } && rows.last?.hasPrefix("scrub-pii's speed against Relay's: ") == true)
    }
}
