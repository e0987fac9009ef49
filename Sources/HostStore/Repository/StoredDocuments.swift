import HostModel
import HostSupport

/// A report's document as the repository stores it. Since schema 16 its breadcrumbs are kept
/// apart from its row, in `report_breadcrumbs`: a full ring is most of a running-app report's
/// document (13 KB of 15), and in the row SQLite wrote its overflow pages again at each write
/// of the row, the final document's after the journal's above all, though a chain seldom
/// changes a breadcrumb. Documents stored before keep theirs in the row, read as before.
extension Repository {
    /// A document's text for its row, its breadcrumbs for their table, and its size.
    struct StoredDocument {
        let text: String
        /// The `breadcrumbs` array's text; nil when it is empty.
        let breadcrumbs: String?
        /// What the record counts (`bytes`): the whole document's text and its attachments.
        let bytes: Int64
        /// The record holds these breadcrumbs already: `breadcrumbs` is not made, nor written.
        let keepsStoredBreadcrumbs: Bool

        init(_ document: ReportDocument, keepingStoredBreadcrumbs keeps: Bool = false) {
            let attachments = document.content.attachments.reduce(0) { $0 + $1.size }
            keepsStoredBreadcrumbs = keeps
            if keeps {
                let apart = document.serializedWithoutBreadcrumbs()
                (text, breadcrumbs, bytes) = (apart.text, nil, Int64(apart.bytes + attachments))
            } else {
                let apart = document.serializedApart()
                (text, breadcrumbs, bytes) = (apart.text, apart.breadcrumbs, Int64(apart.bytes + attachments))
            }
        }
    }

    /// Writes the breadcrumbs of `stored`, the document of record `rowID`, inside the caller's
    /// transaction: only when they differ from those the record holds (a chain that left them
    /// as its journal had them writes no page of them); deleted when there are none. Nothing at
    /// all when `stored` keeps what the record holds (its caller knows them unchanged).
    func writeBreadcrumbs(_ stored: StoredDocument, of rowID: Int64, isNew: Bool) throws(StorageError) {
        if stored.keepsStoredBreadcrumbs { return }
        guard let breadcrumbs = stored.breadcrumbs else {
            if !isNew { try database.query("DELETE FROM report_breadcrumbs WHERE record = ?", [.integer(rowID)]) }
            return
        }
        try database.query(
            """
            INSERT INTO report_breadcrumbs(record, breadcrumbs) VALUES(?, ?) ON CONFLICT(record)
            DO UPDATE SET breadcrumbs = excluded.breadcrumbs WHERE breadcrumbs IS NOT excluded.breadcrumbs
            """,
            [.integer(rowID), .text(breadcrumbs)])
    }

    /// The breadcrumbs of a `reports` row, as a column of a query on it: NULL in a repository
    /// an older host made (`status` reads one without migrating it), whose documents hold theirs.
    var breadcrumbsColumn: String {
        knownTable("report_breadcrumbs", breadcrumbsTable)
            ? "(SELECT breadcrumbs FROM report_breadcrumbs WHERE record = reports.rowid)" : "NULL"
    }

    /// A stored document from its row's text and its breadcrumbs kept apart; nil when the text
    /// is not a document. Breadcrumbs that cannot be read are left out, and its log says so.
    static func document(text: String?, breadcrumbs: String?) -> ReportDocument? {
        guard let text, let json = try? JSONValue.parse(text), var document = ReportDocument(json: json) else { return nil }
        guard let breadcrumbs else { return document }
        if let read = ReportDocument.breadcrumbs(stored: breadcrumbs) {
            document.content.breadcrumbs = read
        } else {
            document.internalLog.append(
                InternalLogEntry(level: .warn, handler: "host", message: "the stored breadcrumbs could not be read: left out"))
        }
        return document
    }

    /// The id and document of record `rowID`, read whole; nil when it is gone, or its document
    /// cannot be read.
    func storedDocument(_ rowID: Int64) throws(StorageError) -> (id: String, document: ReportDocument)? {
        let row = try database.query(
            "SELECT report_id, document, \(breadcrumbsColumn) FROM reports WHERE rowid = ?", [.integer(rowID)]
        ).first
        guard let row, let id = row[0].string, let document = Self.document(text: row[1].string, breadcrumbs: row[2].string)
        else { return nil }
        return (id, document)
    }
}
