/// The inbox's page: one HTML shell, a style sheet and a script, served from the binary (no
/// outside assets: it works with no network). The script builds every element with
/// `textContent` and `setAttribute`, never from HTML text, so nothing a report holds can become
/// markup; the page's Content-Security-Policy allows only these files' own script and style.
enum InboxPages {
    static let assets: [String: (type: String, text: String)] = [
        "inbox.js": ("text/javascript; charset=utf-8", script),
        "inbox.css": ("text/css; charset=utf-8", style),
    ]

    static let shell = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>ReportHost inbox</title>
        <link rel="icon" href="data:,">
        <link rel="stylesheet" href="/static/inbox.css">
        <script src="/static/inbox.js" defer></script>
        </head>
        <body>
        <header>
          <a class="brand" href="/">ReportHost inbox</a>
          <nav><a href="/">Reports</a><a href="/requests">Requests</a></nav>
          <span id="live" class="live">connecting…</span>
        </header>
        <main id="main"></main>
        </body>
        </html>

        """

    static let style = """
        :root { --ink: #1d2330; --muted: #5d6675; --line: #d9dde4; --soft: #f4f6f9; --accent: #2456c4; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--ink); background: #fff; }
        header { display: flex; gap: 24px; align-items: center; padding: 10px 20px; border-bottom: 1px solid var(--line); background: var(--soft); }
        header nav a { margin-right: 14px; }
        .brand { font-weight: 700; color: var(--ink); text-decoration: none; }
        .live { margin-left: auto; color: var(--muted); font-size: 12px; }
        .live.on::before { content: "● "; color: #1a8f3c; }
        main { padding: 16px 20px 40px; max-width: 1200px; }
        a { color: var(--accent); }
        h1 { font-size: 20px; margin: 4px 0 12px; word-break: break-word; }
        h2 { font-size: 15px; margin: 22px 0 6px; border-bottom: 1px solid var(--line); padding-bottom: 3px; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { font-weight: 600; color: var(--muted); font-size: 12px; }
        td.id, code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
        pre { background: var(--soft); padding: 8px 10px; overflow-x: auto; white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
        form.filters { display: flex; flex-wrap: wrap; gap: 8px; margin-bottom: 10px; }
        form.filters input, form.filters select { padding: 4px 6px; border: 1px solid var(--line); border-radius: 3px; }
        .pager { display: flex; gap: 10px; align-items: center; margin-top: 10px; }
        .muted { color: var(--muted); }
        dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
        dl.meta dt { color: var(--muted); }
        dl.meta dd { margin: 0; word-break: break-word; }
        mark { background: #ffe59a; border-bottom: 2px solid #d39b00; padding: 0 1px; }
        mark.p1 { background: #c9e7ff; border-color: #2a7fd0; }
        mark.p2 { background: #d8f5cf; border-color: #3c9a2c; }
        mark.p3 { background: #f7d2e8; border-color: #b53d86; }
        .legend mark { margin-right: 8px; }
        .cut { color: #b3261e; font-weight: 700; padding: 0 2px; }
        ul.trail { padding-left: 18px; margin: 4px 0; }
        ul.trail li { font-family: ui-monospace, monospace; font-size: 12.5px; }
        .changed { margin-left: 8px; }
        .tag { display: inline-block; background: var(--soft); border: 1px solid var(--line); border-radius: 10px; padding: 0 8px; margin: 0 4px 4px 0; }
        .chaos { color: #b3261e; font-weight: 600; }
        details > summary { cursor: pointer; color: var(--accent); margin: 6px 0; }
        tr.fresh td { animation: fresh 2s ease-out; }
        @keyframes fresh { from { background: #fff6cc; } to { background: transparent; } }

        """

    static let script = #"""
        "use strict";

        // Elements are made with textContent and setAttribute only: report text never becomes markup.
        function el(tag, attributes, ...children) {
          const element = document.createElement(tag);
          for (const [name, value] of Object.entries(attributes || {})) {
            if (name === "text") element.textContent = value;
            else if (name === "class") element.className = value;
            else element.setAttribute(name, value);
          }
          for (const child of children) if (child !== null && child !== undefined) element.append(child);
          return element;
        }

        async function getJSON(url) {
          const response = await fetch(url, { cache: "no-store" });
          if (!response.ok) throw new Error(url + ": HTTP " + response.status);
          return response.json();
        }

        const main = document.getElementById("main");
        const live = document.getElementById("live");
        const PAGE = 50;

        // Server-sent events: "report", "request" and "cleared".
        function listen(handlers) {
          const events = new EventSource("/api/events");
          events.onopen = () => { live.textContent = "live"; live.className = "live on"; };
          events.onerror = () => { live.textContent = "reconnecting…"; live.className = "live"; };
          for (const [name, handler] of Object.entries(handlers)) {
            events.addEventListener(name, (event) => handler(JSON.parse(event.data)));
          }
        }

        function reportLink(id) {
          return el("a", { href: "/reports/" + encodeURIComponent(id), class: "mono", "data-report-id": id, text: id.slice(0, 8) });
        }

        // ---- The list: newest first, filtered, a page at a time, live.
        function listPage() {
          const query = new URLSearchParams(location.search);
          const fields = {};
          const form = el("form", { class: "filters", id: "filters" });
          for (const [name, hint] of [["type", "type (Crash, Error…)"], ["attribute", "attribute key or key=value"], ["label", "label"], ["q", "text"]]) {
            fields[name] = el("input", { name, placeholder: hint, value: query.get(name) || "", "aria-label": hint });
            form.append(fields[name]);
          }
          const count = el("p", { id: "count", class: "muted" });
          const body = el("tbody", { id: "reports" });
          const table = el("table", {}, el("thead", {}, el("tr", {}, ...["Received", "Type", "Summary", "Id", "Attachments"].map((t) => el("th", { text: t })))), body);
          const newer = el("button", { type: "button", id: "newer", text: "← newer" });
          const older = el("button", { type: "button", id: "older", text: "older →" });
          const where = el("span", { class: "muted", id: "page" });
          main.append(el("h1", { text: "Received reports" }), form, count, table, el("div", { class: "pager" }, newer, where, older));
          let offset = Number(query.get("offset") || 0);
          let known = new Set();

          async function load() {
            const params = new URLSearchParams();
            for (const [name, input] of Object.entries(fields)) if (input.value) params.set(name, input.value);
            if (offset) params.set("offset", offset);
            history.replaceState(null, "", params.toString() ? "?" + params : location.pathname);
            params.set("limit", PAGE);
            const data = await getJSON("/api/reports?" + params);
            const fresh = new Set(data.reports.map((r) => r.id));
            body.replaceChildren(...data.reports.map((r) => row(r, known.size > 0 && !known.has(r.id))));
            known = fresh;
            count.textContent = data.total + " report" + (data.total === 1 ? "" : "s") + (params.size > 1 ? " match" : "");
            where.textContent = data.total ? (offset + 1) + "–" + Math.min(offset + PAGE, data.total) + " of " + data.total : "";
            newer.disabled = offset === 0;
            older.disabled = offset + PAGE >= data.total;
          }

          function row(report, isFresh) {
            return el("tr", { class: isFresh ? "fresh" : "", "data-id": report.id },
              el("td", { class: "mono", text: report.received_at }),
              el("td", { text: report.type }),
              el("td", { class: "summary" }, report.summary, report.changed ? el("span", { class: "tag changed", title: "a plugin changed this report", text: "changed" }) : null),
              el("td", { class: "id" }, reportLink(report.id)),
              el("td", { text: String(report.attachments) }));
          }

          let timer = null;
          const reload = () => { clearTimeout(timer); timer = setTimeout(() => load().catch(showError), 150); };
          form.addEventListener("input", () => { offset = 0; reload(); });
          form.addEventListener("submit", (event) => { event.preventDefault(); offset = 0; reload(); });
          newer.addEventListener("click", () => { offset = Math.max(0, offset - PAGE); reload(); });
          older.addEventListener("click", () => { offset += PAGE; reload(); });
          listen({ report: () => { if (offset === 0) reload(); else load().catch(showError); }, cleared: () => { offset = 0; reload(); } });
          load().catch(showError);
        }

        // ---- One report: what the server received, the trail drawn over the final text.
        async function reportPage(id) {
          const [report, view] = await Promise.all([getJSON("/api/reports/" + id), getJSON("/api/reports/" + id + "/view")]);
          const attributes = report.attributes || {};
          const annotations = report.annotations || {};
          const changes = Array.isArray(annotations["reporthost.changes"]) ? annotations["reporthost.changes"] : [];
          const plugins = [...new Set(changes.map((c) => c.plugin))];
          document.title = (attributes["error.message"] || id) + " · ReportHost inbox";

          main.append(el("h1", { id: "summary" }, marked(String(attributes["error.message"] ?? "(no summary)"), "summary", changes, plugins)));
          const meta = el("dl", { class: "meta" });
          const add = (name, value) => { if (value !== undefined && value !== null && value !== "") meta.append(el("dt", { text: name }), el("dd", {}, value)); };
          add("id", el("span", { class: "mono", id: "report-id", text: report.uuid || id }));
          add("type", String(attributes["error.type"] ?? view.entry.type));
          add("trigger", attributes["reporthost.trigger"]);
          add("severity", attributes["severity"]);
          if (attributes["user.email"] !== undefined) add("email", marked(String(attributes["user.email"]), "email", changes, plugins));
          add("received", view.entry.received_at + (view.entry.arrivals > 1 ? " (" + view.entry.arrivals + " times)" : ""));
          add("client", [report.agent, report.agentVersion].filter(Boolean).join(" "));
          const answers = el("span", { id: "answers", text: answersText(view.answers) });
          add("answers", answers);
          main.append(meta);
          listen({ request: (r) => { if (r.report === report.uuid) { view.answers.push(r); answers.textContent = answersText(view.answers); } } });

          if (view.thread_lines) main.append(el("h2", { text: "Threads" }), el("pre", { id: "threads" }, view.thread_lines.join("\n")));
          if (view.crash_lines) {
            main.append(el("h2", { text: "Crash" }), el("pre", { id: "stack" }, view.crash_lines.join("\n")));
            const modules = (annotations.Crash && annotations.Crash.modules) || [];
            if (modules.length) {
              main.append(el("details", { id: "modules" }, el("summary", { text: modules.length + " modules, with their build ids" }), el("table", {},
                el("thead", {}, el("tr", {}, ...["Path", "Start", "End", "Build id"].map((t) => el("th", { text: t })))),
                el("tbody", {}, ...modules.map((m) => el("tr", {}, ...[m.path, m.start, m.end, m.build_id].map((v) => el("td", { class: "mono", text: v === undefined ? "" : String(v) }))))))));
            }
          }

          if (typeof annotations.Description === "string") {
            main.append(el("h2", { text: "Description" }), el("pre", { id: "description" }, marked(annotations.Description, "description", changes, plugins)));
          }
          if (view.breadcrumb_lines) {
            main.append(el("h2", { text: "Breadcrumbs (" + view.breadcrumb_lines.length + ", oldest first)" }),
              el("ul", { class: "trail", id: "breadcrumbs" }, ...view.breadcrumb_lines.map((line) => el("li", { text: line }))));
          }
          main.append(el("h2", { text: "Change trail" }));
          if (changes.length) {
            main.append(el("ul", { class: "trail", id: "trail" }, ...(view.changes_text || []).map((line) => el("li", { text: line }))));
            main.append(el("p", { class: "muted legend" }, "Marked text: ", ...plugins.map((p, i) => el("mark", { class: "p" + (i % 4), text: p })), " (hover a mark for its plugin and step)"));
          } else {
            main.append(el("p", { class: "muted", id: "trail", text: "No change trail: no plugin changed this report, or the client did not send one." }));
          }

          const keys = Object.keys(attributes).sort();
          main.append(el("h2", { text: "Attributes" }), el("table", { id: "attributes" }, el("tbody", {},
            ...keys.map((key) => el("tr", {}, el("td", { class: "mono", text: key }), el("td", {}, marked(String(attributes[key]), "attribute:" + key, changes, plugins)))))));
          const classifiers = Array.isArray(report.classifiers) ? report.classifiers : [];
          main.append(el("h2", { text: "Classifiers (labels)" }), el("p", { id: "labels" }, ...(classifiers.length ? classifiers.map((c) => el("span", { class: "tag", text: String(c) })) : [el("span", { class: "muted", text: "none" })])));

          const log = Array.isArray(annotations["ReportHost internal log"]) ? annotations["ReportHost internal log"] : [];
          main.append(el("h2", { text: "Internal log" }));
          main.append(log.length
            ? el("table", { id: "internal-log" }, el("tbody", {}, ...log.map((e) => el("tr", {}, el("td", { text: e.level }), el("td", { class: "mono", text: e.handler }), el("td", { text: e.message })))))
            : el("p", { class: "muted", text: "empty" }));

          main.append(el("h2", { text: "Attachments" }));
          const described = new Map((annotations.Attachments || []).map((a) => [a.name, a]));
          const list = el("div", { id: "attachments" });
          for (const name of view.entry.attachment_names) {
            const info = described.get(name) || {};
            const url = "/api/reports/" + encodeURIComponent(id) + "/attachments/" + encodeURIComponent(name);
            const details = [info.size !== undefined ? info.size + " bytes" : "", info.sha256 ? "sha256 " + info.sha256 : ""].filter(Boolean).join(", ");
            const block = el("div", { class: "attachment" },
              el("p", {}, el("a", { href: url, download: name, class: "download", "data-name": name, text: name }),
                el("span", { class: "muted", text: details ? "  " + details : "" })));
            list.append(block);
            preview(url, block);
          }
          if (!view.entry.attachment_names.length) list.append(el("p", { class: "muted", text: "none" }));
          main.append(list);
          main.append(el("h2", { text: "As received" }), el("details", {}, el("summary", { text: "the JSON report" }), el("pre", { id: "raw" }, JSON.stringify(report, null, 2))));
        }

        // A text attachment's first 64 KB, shown as text.
        async function preview(url, block) {
          const response = await fetch(url);
          const bytes = new Uint8Array(await response.arrayBuffer());
          if (bytes.length > 1 << 20 || bytes.includes(0)) return;
          let text;
          try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, 65536)); } catch { return; }
          block.append(el("pre", { class: "preview" }, text + (bytes.length > 65536 ? "\n…" : "")));
        }

        function answersText(answers) {
          return (answers || []).map((a) => (a.status || a.answer) + (a.chaos ? " (chaos)" : "")).join(", ");
        }

        // `text` with the trail's ranges for `field` marked: byte offsets of the UTF-8 text,
        // each mark titled with the plugins and steps that wrote it; a cut is a red mark.
        function marked(text, field, changes, plugins) {
          const bytes = new TextEncoder().encode(text);
          const decoder = new TextDecoder();
          const spans = [];
          for (const change of changes) {
            if (change.field !== field || !Array.isArray(change.ranges)) continue;
            for (const [start, end] of change.ranges) {
              spans.push({ start: Math.min(start, bytes.length), end: Math.min(end, bytes.length), who: change.plugin + " (" + change.step + ")", plugin: change.plugin });
            }
          }
          const out = el("span", { class: "marked", "data-field": field });
          const bounds = [...new Set([0, bytes.length, ...spans.flatMap((s) => [s.start, s.end])])].sort((a, b) => a - b);
          for (const cut of spans.filter((s) => s.start === s.end)) cut.cut = true;
          for (let i = 0; i < bounds.length; i++) {
            const start = bounds[i];
            for (const cut of spans.filter((s) => s.cut && s.start === start)) {
              out.append(el("span", { class: "cut", title: cut.who + ": text removed here", "data-plugin": cut.plugin, text: "⌫" }));
            }
            if (i + 1 === bounds.length) break;
            const end = bounds[i + 1];
            const piece = decoder.decode(bytes.subarray(start, end));
            const covering = spans.filter((s) => !s.cut && s.start <= start && s.end >= end);
            if (!covering.length) { out.append(piece); continue; }
            const first = plugins.indexOf(covering[covering.length - 1].plugin);
            out.append(el("mark", { class: "p" + (first % 4), title: covering.map((s) => s.who).join(", "), "data-plugin": covering.map((s) => s.plugin).join(" ") }, piece));
          }
          return out;
        }

        // ---- The requests the receiver answered.
        async function requestsPage() {
          const body = el("tbody", { id: "requests" });
          main.append(el("h1", { text: "Requests answered" }), el("table", {},
            el("thead", {}, el("tr", {}, ...["At", "Method", "Path", "Answer", "Chaos", "Report"].map((t) => el("th", { text: t })))), body));
          const row = (r) => el("tr", {}, el("td", { class: "mono", text: r.at }), el("td", { text: r.method }), el("td", { class: "mono", text: r.path }),
            el("td", { text: String(r.status || r.answer) }), el("td", { class: r.chaos ? "chaos" : "muted", text: r.chaos ? "chaos" : "no" }),
            el("td", {}, r.report ? reportLink(r.report) : ""));
          const data = await getJSON("/api/requests");
          body.replaceChildren(...data.requests.reverse().map(row));
          listen({ request: (r) => body.prepend(row(r)) });
        }

        function showError(error) {
          main.append(el("p", { class: "chaos", text: String(error) }));
        }

        const path = location.pathname;
        const match = path.match(/^\/reports\/([0-9a-fA-F-]{36})$/);
        if (match) reportPage(match[1]).catch(showError);
        else if (path === "/requests") requestsPage().catch(showError);
        else listPage();

        """#
}
