import Foundation
import Host
import HostPlugins
import HostSupport
import HostTestSupport
import Testing

/// SPEC T-1: the change trail, through real C plugins in the wrapper and handler slots.
@Suite struct ChangeTrailTests {
    /// A handler that makes one change of every kind through the host table, some of which the
    /// host refuses, and one through its `on_before` handle after that handle closed.
    static let probe = fixtureHandler(
        name: "trail-probe", before: "on_before", after: "on_after",
        extra: """
            static rh_report *before_handle;
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                before_handle = r;
                host->set_summary(r, "mail [email] now");
                host->set_attribute(r, "added.key", "v1");
                host->set_attribute(r, "added.key", "v22");
                host->set_attribute(r, "kept.key", "new value");
                host->remove_attribute(r, "secret");
                host->add_label(r, "fresh");
                host->remove_label(r, "pii:bob@example.org");
                host->set_severity(r, 9);
                host->set_severity(r, 2);
                host->add_attachment(r, "empty", "empty.txt", "", 0);
                host->add_attachment(r, "log", "log.txt", "abc", 3);
                done();
            }
            static void on_after(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)r; (void)t;
                host->set_description(before_handle, "through a closed handle");
                done();
            }
            """)

    /// A wrapper that sets the summary first: the user's handler changes it after.
    static let wrapper = fixtureHandler(
        name: "trail-wrapper", before: "on_before",
        extra: """
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                host->set_summary(r, "mail alice@example.com now, from the wrapper");
                done();
            }
            """)

    static func request() -> ReportRequest {
        var request = ReportRequest(trigger: .logError)
        request.summary = "mail alice@example.com now"
        request.attributes = ["secret": "hunter2-password", "kept.key": "old"]
        request.labels = ["first", "pii:bob@example.org"]
        return request
    }

    func raise() throws -> ReportDocument {
        let host = try TestHost.make()
        // Fresh copies: the probe keeps a handle in a global, which a shared image would share.
        try host.loadPlugin(at: try Fixtures.freshCopy(of: Fixtures.plugin("trail-wrapper", source: Self.wrapper)).path, into: .wrapper)
        try host.loadPlugin(at: try Fixtures.freshCopy(of: Fixtures.plugin("trail-probe", source: Self.probe)).path, into: .handler)
        return try host.raiseDocument(Self.request())
    }

    func entry(_ document: ReportDocument, _ plugin: String, _ field: String) -> TrailEntry? {
        document.changes.first { $0.plugin == plugin && $0.field == field }
    }

    @Test("T-1: each change through the host table is one entry with its plugin, slot, step, field and operation")
    func everyChange() throws {
        let document = try raise()
        let probe = "trail-probe"
        // The wrapper wrote 26..<44; the handler's change removed all of it, so in the final
        // value nothing is the wrapper's.
        #expect(entry(document, "trail-wrapper", "summary")
            == TrailEntry(plugin: "trail-wrapper", slot: "wrapper", step: "wrapper.before", field: "summary", operation: .set,
                ranges: [], wasLength: 26))
        #expect(entry(document, "trail-wrapper", "summary")?.text
            == "trail-wrapper (wrapper.before) changed the summary; later changes left none of it (was 26 bytes)")
        // The handler's change is measured against the wrapper's summary, in the final text.
        #expect(document.content.summary == "mail [email] now")
        #expect(entry(document, probe, "summary")
            == TrailEntry(plugin: probe, slot: "handler", step: "handler.before", field: "summary", operation: .set,
                ranges: [5..<12, 16..<16], wasLength: 44))
        // Set twice in one step: one entry, still "added", its range in the final value.
        #expect(entry(document, probe, "attribute:added.key")?.operation == .added)
        #expect(entry(document, probe, "attribute:added.key")?.ranges == [0..<3])
        #expect(entry(document, probe, "attribute:kept.key")
            == TrailEntry(plugin: probe, slot: "handler", step: "handler.before", field: "attribute:kept.key", operation: .set,
                ranges: [0..<9], wasLength: 3))
        #expect(entry(document, probe, "attribute:secret")
            == TrailEntry(plugin: probe, slot: "handler", step: "handler.before", field: "attribute:secret", operation: .removed,
                ranges: [], wasLength: 16))
        #expect(entry(document, probe, "label:fresh")?.operation == .added)
        // A removed label is named by its place, never by its text.
        #expect(entry(document, probe, "label:#1")?.operation == .removed)
        #expect(entry(document, probe, "label:#1")?.wasLength == "pii:bob@example.org".utf8.count)
        #expect(entry(document, probe, "severity")?.operation == .set)
        #expect(entry(document, probe, "attachment:log")?.operation == .added)
    }

    @Test("T-1: the host's own drops (out-of-range severity, an empty attachment, a closed handle) are entries of slot host")
    func hostDrops() throws {
        let document = try raise()
        let drops = document.changes.filter { $0.slot == "host" }
        #expect(drops.allSatisfy { $0.plugin == "host" && $0.operation == .dropped })
        #expect(Set(drops.map { "\($0.step) \($0.field)" })
            == ["handler.before severity", "handler.before attachment:empty", "handler.before description"])
        #expect(document.content.description == nil)
    }

    @Test("T-1: the trail keeps no removed text: not the wrapper's summary, the removed attribute or the removed label")
    func noOriginalText() throws {
        let document = try raise()
        let text = JSONValue.array(document.changes.map(\.json)).serialized()
        for removed in ["alice@example.com", "hunter2-password", "bob@example.org", "from the wrapper", "old"] {
            #expect(!text.contains(removed), "\(removed) is in the trail: \(text)")
        }
    }

    @Test("T-1: the document stores the trail as `changes` and reads it back the same")
    func storedForm() throws {
        let document = try raise()
        let json = document.json
        let stored = try #require(json["changes"]?.arrayValue)
        #expect(stored.count == document.changes.count)
        #expect(stored[1]["ranges"]?.arrayValue?.first?.arrayValue?.compactMap(\.intValue) == [5, 12])
        let back = try #require(ReportDocument(json: try JSONValue.parse(json.serialized())))
        #expect(back.changes == document.changes)
    }

    @Test("T-1: at most 1,000 entries; one last entry counts the rest")
    func bounded() throws {
        let flood = fixtureHandler(
            name: "trail-flood", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    char key[32];
                    for (int i = 0; i < 1100; i++) { snprintf(key, sizeof key, "k%d", i); host->set_attribute(r, key, "v"); }
                    done();
                }
                """)
        let host = try TestHost.make()
        try host.loadPlugin(at: try Fixtures.plugin("trail-flood", source: flood).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .logError))
        #expect(document.changes.count == ChangeTrail.capacity + 1)
        // Each key is an entry (added, or dropped past the attribute limit): 1,100 of them.
        #expect(document.changes.last?.droppedCount == 100)
        #expect(document.changes.first?.operation == .added)
        #expect(document.changes.last?.text == "host: 100 further changes not recorded (at most 1000 entries are kept)")
    }

    @Test("T-1: a person reads an entry in words, with byte ranges only for text: `scrub-pii (handler.before) replaced 19..26 of the summary (was 34 bytes)`")
    func readable() {
        func line(_ field: String, _ operation: TrailEntry.Operation, ranges: [Range<Int>]? = nil, was: Int? = nil) -> String {
            TrailEntry(plugin: "p", slot: "handler", step: "handler.before", field: field, operation: operation, ranges: ranges, wasLength: was).text
        }
        #expect(line("summary", .set, ranges: [19..<26], was: 34) == "p (handler.before) replaced 19..26 of the summary (was 34 bytes)")
        #expect(line("description", .set, ranges: [0..<12], was: 0) == "p (handler.before) wrote the description")
        #expect(line("email", .removed, ranges: [], was: 17) == "p (handler.before) removed the email (was 17 bytes)")
        #expect(line("attribute:wrapper.name", .added, ranges: [0..<11], was: 0) == "p (handler.before) added attribute wrapper.name")
        #expect(line("attribute:plan", .set, ranges: [0..<4], was: 3) == "p (handler.before) changed attribute plan")
        #expect(line("attribute:token", .removed, ranges: [], was: 40) == "p (handler.before) removed attribute token (was 40 bytes)")
        #expect(line("label:wrapper", .added) == "p (handler.before) added label wrapper")
        #expect(line("label:#1", .removed, ranges: [], was: 19) == "p (handler.before) removed a label (19 bytes)")
        #expect(line("labels", .cleared) == "p (handler.before) cleared the labels")
        #expect(line("severity", .set) == "p (handler.before) changed the severity")
        #expect(line("attachment:checkout.log", .set, was: 3_000) == "p (handler.before) replaced attachment checkout.log (was 3000 bytes)")
        #expect(line("attachment:trace", .added) == "p (handler.before) added attachment trace")
        #expect(line("breadcrumb:0", .set, ranges: [4..<11], was: 20) == "p (handler.before) replaced 4..11 of breadcrumb 1 (was 20 bytes)")
    }

    @Test("T-1: an attachment a plugin removes and adds again under its name (a scrubber puts it back) reads as replaced, with its old size")
    func attachmentPutBack() throws {
        let report = LiveReport(trigger: .upload, createdAt: Date())
        let handle = report.openHandle(
            for: Contributor(handler: "app", slot: "handler", step: "handler.before", source: .handlerBefore, budgetKey: "before"))
        try handle.addAttachment(name: "log", filename: "checkout.log", data: Data(repeating: 65, count: 300))
        let putBack = report.openHandle(
            for: Contributor(handler: "scrub", slot: "handler", step: "handler.after", source: .handlerAfter, budgetKey: "after"))
        try putBack.removeAttachment("log")
        try putBack.addAttachment(name: "log", filename: "checkout.log", data: Data(repeating: 66, count: 280))
        let entry = try #require(report.snapshot.changes.first { $0.step == "handler.after" })
        #expect(entry.operation == .set && entry.wasLength == 300)
        #expect(entry.text == "scrub (handler.after) replaced attachment log (was 300 bytes)")
    }
}

/// The byte ranges the trail records.
@Suite struct TextDiffTests {
    func ranges(_ old: String, _ new: String) -> [Range<Int>] {
        TextDiff.hunks(from: Array(old.utf8), to: Array(new.utf8)).map(\.new)
    }

    @Test("T-1 ranges: a scrubber's replacements are one range each, in the new text's bytes")
    func replacements() {
        #expect(ranges("write to alice@example.com please", "write to [email] please") == [9..<16])
        #expect(ranges("Card 4111 1111 1111 1111 was declined; my token=sk_live_51H8 is attached",
            "Card [card] was declined; my token=[secret] is attached") == [5..<11, 35..<43])
        #expect(ranges("same", "same") == [])
        #expect(ranges("", "new") == [0..<3])
        #expect(ranges("cut this out", "cut out") == [4..<4])
        #expect(ranges("é alice@example.com", "é [email]") == [3..<10])
    }

    @Test("T-1 ranges: coalesced changes keep the earlier ranges where the later change moved them")
    func carried() {
        let first = TextDiff.hunks(from: Array("a bob@x.io b".utf8), to: Array("a [email] b".utf8))
        #expect(first.map(\.new) == [2..<9])
        let second = TextDiff.hunks(from: Array("a [email] b".utf8), to: Array("long prefix a [email] b 4111111111111111".utf8))
        let carried = TextDiff.carry(first.map(\.new), through: second)
        #expect(carried == [0..<12, 14..<21, 23..<40])
    }

    @Test("T-1 ranges: a later change moves an earlier entry's ranges, so every range is in the final value")
    func laterChangeMoves() throws {
        let first = fixtureHandler(
            name: "trail-first", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; host->set_summary(r, "hello [name], welcome"); done();
                }
                """)
        let second = fixtureHandler(
            name: "trail-second", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; host->set_summary(r, "[greeting] hello [name], welcome"); done();
                }
                """)
        let host = try TestHost.make()
        try host.loadPlugin(at: try Fixtures.plugin("trail-first", source: first).path, into: .wrapper)
        try host.loadPlugin(at: try Fixtures.plugin("trail-second", source: second).path, into: .handler)
        var request = ReportRequest(trigger: .logError)
        request.summary = "hello bob, welcome"
        let document = try host.raiseDocument(request)
        let final = try #require(document.content.summary)
        let firstRanges = try #require(document.changes.first { $0.plugin == "trail-first" }?.ranges)
        #expect(firstRanges == [17..<23])
        #expect(firstRanges.map { String(decoding: Array(final.utf8)[$0], as: UTF8.self) } == ["[name]"])
        #expect(document.changes.first { $0.plugin == "trail-second" }?.ranges == [0..<11])
    }

    /// A text of words, spaces, punctuation and multi-byte characters, and a copy with
    /// scrubber-like edits: values replaced, inserted or cut, at the ends too.
    static func editedPair(_ random: inout SplitMix64) -> (old: String, new: String) {
        let pieces = ["alice", "bob@x.io", " ", "  ", "\n", "4111", "-", ".", "=", "é", "😀", "token", "[email]", "a", "_", "\t"]
        let words = (0..<random.int(0..<120)).map { _ in pieces[random.int(0..<pieces.count)] }
        var edited = words
        for _ in 0..<random.int(0..<8) where !edited.isEmpty {
            let place = random.int(0..<edited.count)
            switch random.int(0..<3) {
            case 0: edited[place] = ["[secret]", "[card]", "", "x"][random.int(0..<4)]
            case 1: edited.insert(pieces[random.int(0..<pieces.count)], at: place)
            default: edited.remove(at: place)
            }
        }
        return (words.joined(), edited.joined())
    }

    @Test("T-1 ranges: the comparison that reads tokens only after a difference finds the hunks the whole-list comparison found, for 5,000 edited texts")
    func sameAsWholeLists() {
        var random = SplitMix64(seed: 20_261_204)
        for round in 0..<5_000 {
            let (old, new) = Self.editedPair(&random)
            let lazy = TextDiff.hunks(from: Array(old.utf8), to: Array(new.utf8))
            let whole = ReferenceTextDiff.hunks(from: Array(old.utf8), to: Array(new.utf8))
            #expect(lazy == whole, "round \(round): \(old.debugDescription) → \(new.debugDescription)")
            if lazy != whole { return }
        }
    }

    /// Long tokens that agree in their length and their first and last 8 bytes (which is all
    /// the comparison's digest reads) and differ inside, and edits longer than the window.
    @Test("T-1 ranges: tokens the digest cannot tell apart, and edits past the window, give the hunks the whole-list comparison gives, for 2,000 texts")
    func sameAsWholeListsForLookalikes() {
        let lookalikes = ["abcdefgh1ijklmnop", "abcdefgh2ijklmnop", "abcdefgh_ijklmnop", "x", " ", ".", "\n"]
        var random = SplitMix64(seed: 20_261_205)
        var hardest = 0
        for round in 0..<2_000 {
            let words = (0..<random.int(1..<200)).map { _ in lookalikes[random.int(0..<lookalikes.count)] }
            var edited = words
            let start = random.int(0..<words.count)
            let length = random.int(0..<(words.count - start + 1))
            let inserted = (0..<random.int(0..<150)).map { _ in lookalikes[random.int(0..<lookalikes.count)] }
            edited.replaceSubrange(start..<(start + length), with: inserted)
            let (old, new) = (words.joined(), edited.joined())
            let lazy = TextDiff.hunks(from: old, to: new)
            let whole = ReferenceTextDiff.hunks(from: Array(old.utf8), to: Array(new.utf8))
            #expect(lazy == whole, "round \(round): \(old.debugDescription) → \(new.debugDescription)")
            if lazy != whole { return }
            hardest = max(hardest, lazy.count)
        }
        #expect(hardest > 1, "some edit gave several hunks")
    }

    @Test("T-1 ranges: texts with nothing in common are one range, found in linear time")
    func unrelated() {
        let old = String(repeating: "abc def ", count: 8_000)
        let new = String(repeating: "xyz uvw ", count: 8_000)
        #expect(ranges(old, new) == [0..<(new.utf8.count - 1)])
    }
}
