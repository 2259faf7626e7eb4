// flowmem inspector: a buffer's repair log (GET /v1/buffers/{scope}/{key}/repairs, decision 0116)
// drawn on the conversation (each entry next to the rows it touched) and as a timeline, newest
// first (docs/ui.md, decision 0118). Loaded before app.js, whose helpers (el, api, errorText,
// when, jump, isHealed, resultId) it calls at run time. Every text from the API is set as text
// (el's `text`, text nodes) or as one attribute value: nothing is parsed as HTML.
"use strict";

const REPAIR_PAGE = 20;   // timeline entries a page ("Older" reads the next with `before`)
const REPAIR_ALL = 1000;  // a log keeps a buffer's newest 1,000 entries: one read has every mark
// an entry's kind: the API's `kind` when it gives one, otherwise its rule's
const RULE_KINDS = { "MEM-3": "heal", "MEM-10": "replace", "MEM-1": "duplicate", "MEM-2": "duplicate",
  window: "evict", compaction: "compact", "MEM-5": "normalize" };
const KIND_WORDS = {
  heal: "healed", replace: "replaced a placeholder", duplicate: "duplicate refused",
  evict: "evicted by the window", compact: "compacted", normalize: "dropped by normalization", refuse: "refused",
};

function repairKind(entry) {
  if (typeof entry.kind === "string" && entry.kind) return entry.kind;
  return RULE_KINDS[entry.rule] || null;
}
// what the entry did, in words; an unknown kind by its name, an entry with neither by its rule
function repairWhat(entry) {
  const kind = repairKind(entry);
  return kind ? (KIND_WORDS[kind] || kind) : String(entry.rule || "repair");
}
// the kinds whose positions are rows in the buffer as read (the rows a heal or a replacement
// wrote): only those are marked on rows. An eviction's or a compaction's positions are where
// the removed rows were (other rows are there now); an unknown kind's are not drawn on a row.
const ROW_KINDS = new Set(["heal", "replace", "duplicate"]);
const repairClass = (kind) => "kind-" + (Object.hasOwn(KIND_WORDS, kind || "") ? kind : "other");
const listOf = (value) => (Array.isArray(value) ? value : []);
const positionsOf = (entry) => listOf(entry.positions).filter(Number.isInteger);
const rulePart = (entry) => (entry.rule ? " · " + entry.rule : "");

// The path of a page of a buffer's log: `/v1/buffers/{scope}/{key}/repairs?{params, query}`.
function repairsPath(scope, key, params) {
  return (query) => `/v1/buffers/${encodeURIComponent(scope)}/${encodeURIComponent(key)}/repairs?`
    + new URLSearchParams({ ...params, ...query });
}

// One buffer's log as the page knows it: `marks` (row index -> entries touching it, from one
// read of every kept entry), the timeline's `entries` (newest first) and `next` (the `before`
// of the older page, null: none). `alive` turns false when the view leaves the buffer.
class RepairLog {
  constructor(path) {
    this.path = path;
    this.alive = true;
    this.newest = null;
    this.total = 0;
    this.marks = new Map();
    this.entries = [];
    this.next = null;
    this.error = null;
    this.shown = { first: 0, count: 0 };  // the rows the view draws (buffer indexes)
  }

  // Read the log again when the rows changed or a newer entry exists (a probe of one
  // entry otherwise); true when what the page shows of it changed.
  async sync(rowsChanged) {
    if (!rowsChanged && this.newest !== null) {
      const probe = await api(this.path({ limit: "1" }));
      if (!this.alive) return false;
      if (probe.ok && ((listOf(probe.body.repairs)[0] || {}).seq ?? 0) === this.newest) return false;
    }
    const answer = await api(this.path({ limit: String(REPAIR_ALL) }));
    if (!this.alive) return false;
    if (!answer.ok) {
      const error = errorText(answer);
      const changed = error !== this.error;
      Object.assign(this, { error, newest: null, total: 0, marks: new Map(), entries: [], next: null });
      return changed || rowsChanged;
    }
    const all = listOf(answer.body.repairs);
    const marks = new Map();
    for (const entry of all) {
      if (!ROW_KINDS.has(repairKind(entry))) continue;
      for (const at of positionsOf(entry)) marks.set(at, [...(marks.get(at) || []), entry]);
    }
    const depth = Math.max(REPAIR_PAGE, this.entries.length);  // keep the pages already opened
    const entries = all.slice(0, depth);
    const next = entries.length < all.length ? entries[entries.length - 1].seq : (answer.body.next_before ?? null);
    Object.assign(this, { error: null, newest: all.length ? all[0].seq : 0, total: all.length, marks, entries, next });
    return true;
  }

  // The next older page of the timeline (`before` the oldest shown).
  async older(render) {
    if (this.next === null) return;
    const answer = await api(this.path({ before: String(this.next), limit: String(REPAIR_PAGE) }));
    if (!this.alive) return;
    if (!answer.ok) this.error = errorText(answer);
    else {
      const oldest = this.entries.length ? this.entries[this.entries.length - 1].seq : Infinity;
      this.entries.push(...listOf(answer.body.repairs).filter((e) => e.seq < oldest));
      this.next = answer.body.next_before ?? null;
    }
    render();
  }
}

// The marks of row `index` (its buffer index): one badge per entry whose positions hold it.
function repairMarks(row, index, log) {
  return log ? (log.marks.get(index) || []).map((entry) => repairBadge(row, entry)) : [];
}

function repairBadge(row, entry) {
  const kind = repairKind(entry);
  const ids = listOf(entry.call_ids).map(String);
  const rid = resultId(row);
  const call = rid !== null && ids.includes(rid) ? rid : ids.join(", ");
  const at = when(entry.at);
  let text;
  if (kind === "heal") {
    text = isHealed(row) ? `healed · placeholder for call ${call} at ${at}${rulePart(entry)}`
      : `healed at ${at}: a placeholder for call ${call} stood here until its result came${rulePart(entry)}`;
  } else if (kind === "replace") text = `replaced a placeholder for call ${call} at ${at}${rulePart(entry)}`;
  else text = `${repairWhat(entry)}${call ? " · call " + call : ""}${entry.count > 1 ? " × " + entry.count : ""} at ${at}${rulePart(entry)}`;
  return el("span", { class: "badge repair " + repairClass(kind), "data-kind": kind || "", "data-seq": entry.seq,
    title: `repair log entry ${entry.seq} (GET …/repairs)`, text });
}

// The timeline: every entry with its time, what it did, rule, count, call ids and rows.
function renderRepairLog(root, log) {
  const render = () => renderRepairLog(root, log);
  const parts = [el("h3", { text: "Repair log · newest first" })];
  if (log.error) parts.push(el("p", { class: "error", text: "Repair log: " + log.error }));
  else if (!log.entries.length) parts.push(el("p", { id: "repair-log-empty", class: "muted", text: "No repair logged for this buffer." }));
  parts.push(el("ol", { id: "repair-log-list", class: "timeline" }, log.entries.map((entry) => repairItem(entry, log.shown))));
  if (log.entries.length || log.next !== null) {
    parts.push(el("div", { class: "pager" },
      el("button", { id: "repair-older", class: "secondary", disabled: log.next === null, onclick: () => log.older(render), text: "Older →" }),
      el("span", { id: "repair-log-said", class: "muted", text: `${log.entries.length} shown${log.next === null ? ", the oldest kept included" : ""}` })));
  }
  parts.push(el("p", { class: "muted", text: "What this buffer's appends repaired, kept with it (the newest 1,000; GET …/repairs, flowmem repairs). Totals across buffers: /metrics." }));
  root.replaceChildren(...parts);
}

function repairItem(entry, shown) {
  const kind = repairKind(entry);
  const ids = listOf(entry.call_ids).map(String);
  const positions = positionsOf(entry);
  const inView = (p) => p >= shown.first && p < shown.first + shown.count;
  const current = ROW_KINDS.has(kind);
  const rows = positions.flatMap((p, i) => [i ? ", " : "",
    !current ? el("span", { class: "mono", text: "#" + p })
      : inView(p) ? el("a", { href: "#", "data-row": p, onclick: jump, text: "#" + p })
        : el("span", { class: "muted", text: `#${p} (not among the rows shown)` })]);
  const none = current && kind !== "duplicate" ? "none in the buffer now" : "none";
  const archived = listOf(entry.archived).filter(Number.isInteger);
  return el("li", { class: repairClass(kind), "data-seq": entry.seq, "data-kind": kind || "" },
    el("div", {}, el("span", { class: "mono", text: when(entry.at) }), " ",
      el("strong", { class: "what", text: repairWhat(entry) }), " ",
      el("span", { class: "badge rule", text: String(entry.rule || "no rule") }),
      el("span", { class: "count", text: ` × ${entry.count}` })),
    ids.length ? el("div", { class: "mono muted calls", text: "calls: " + ids.join(", ") }) : "",
    el("div", { class: "rows" }, current || !positions.length ? "rows: " : "rows (where they were, before this change): ",
      rows.length ? rows : el("span", { class: "muted", text: none })),
    archived.length === 2 ? el("div", { class: "muted", text: `archived as ${archived[0]}–${archived[1]} (read with archived=true)` }) : "");
}
