// flowmem inspector: a page over the JSON API of the same origin (docs/ui.md).
// Everything shown is written with textContent or as attribute values set one by one:
// no data is ever parsed as HTML, so stored text is never markup.
"use strict";

const TOKEN_KEY = "flowmem.token";
const POLL_MS = 1500;
const PAGE = 20;
const MAX_ROWS = 2000; // a session view reads at most the buffer's last 2000 rows
const FORMATS = ["openai", "responses", "anthropic", "gemini"];
const STATUSES = ["", "idle", "running", "completed", "failed"];
let generation = 0; // bumped on every navigation: a stale poll stops itself
let features = null;

// ---- small DOM helpers -------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);
const json = (value) => JSON.stringify(value, null, 2);
const when = (seconds) => (typeof seconds === "number" && isFinite(seconds)
  ? new Date(seconds * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC" : "");
const sessionHref = (id) => "#/session/" + encodeURIComponent(id);

// ---- the API -------------------------------------------------------------------------
function token() { return sessionStorage.getItem(TOKEN_KEY); }

async function api(path, options = {}) {
  const headers = { Authorization: "Bearer " + token(), ...(options.headers || {}) };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: "omit",
    cache: "no-store",
    redirect: "error",
  });
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (response.status === 401) {
    logout("The token was refused (401): log in again.");
    throw new Error("unauthorized");
  }
  return { status: response.status, ok: response.ok, body };
}

function errorText(answer) {
  const error = answer.body && answer.body.error;
  return error ? `${answer.status} ${error.code}: ${error.message}` : `HTTP ${answer.status}`;
}

async function loadFeatures() {
  if (features) return features;
  features = { maxTokens: false };
  try {
    const spec = await (await fetch("/openapi.json", { credentials: "omit" })).json();
    const read = ((spec.paths || {})["/v1/buffers/{scope}/{key}"] || {}).get || {};
    features.maxTokens = (read.parameters || []).some((p) => p.name === "max_tokens");
  } catch (_) { /* no feature beyond the basics */ }
  return features;
}

// ---- login -------------------------------------------------------------------------------
function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  generation++;
  $("view").replaceChildren();
  $("nav").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").value = "";
}

async function login(event) {
  event.preventDefault();
  const value = $("token").value.trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  $("token").value = "";
  try {
    const answer = await api("/v1/sessions?limit=1");
    if (!answer.ok) { logout(errorText(answer)); return; }
  } catch (_) { return; }
  route();
}

// ---- routing ----------------------------------------------------------------------------
function route() {
  generation++;
  if (!token()) { logout(); return; }
  $("login").hidden = true;
  $("nav").hidden = false;
  const hash = location.hash || "#/sessions";
  const view = $("view");
  view.replaceChildren();
  const [, name, arg] = hash.match(/^#\/([a-z]+)\/?(.*)$/) || [];
  if (name === "session" && arg) showSession(view, decodeURIComponent(arg), generation);
  else if (name === "memory") showMemory(view);
  else showSessions(view, new URLSearchParams(hash.split("?")[1] || ""));
}

// ---- sessions ---------------------------------------------------------------------------
async function showSessions(view, params) {
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  const status = params.get("status") || "";
  const owner = params.get("owner") || "";
  const go = (changes) => {
    const next = new URLSearchParams({ offset: String(offset), status, owner, ...changes });
    for (const [k, v] of [...next]) if (!v || v === "0") next.delete(k);
    location.hash = "#/sessions" + (String(next) ? "?" + next : "");
  };
  const statusSelect = el("select", { id: "filter-status", onchange: () => go({ status: statusSelect.value, offset: "0" }) },
    STATUSES.map((s) => el("option", { value: s, selected: s === status, text: s || "any" })));
  const ownerInput = el("input", { id: "filter-owner", value: owner, placeholder: "user id" });
  const idInput = el("input", { id: "search-id", placeholder: "session id", size: 38 });
  view.append(el("h2", { text: "Sessions" }), el("div", { class: "filters" },
    el("label", {}, "Status", statusSelect),
    el("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); go({ owner: ownerInput.value.trim(), offset: "0" }); } },
      el("label", {}, "Owner", ownerInput), el("button", { type: "submit", class: "secondary", text: "Filter" })),
    el("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); if (idInput.value.trim()) location.hash = sessionHref(idInput.value.trim()); } },
      el("label", {}, "Open by id", idInput), el("button", { type: "submit", text: "Open" }))));
  const listed = await (status || owner ? filteredPage(offset, status, owner) : plainPage(offset));
  if (listed.error) { view.append(el("p", { class: "error", text: listed.error })); return; }
  const { shown, more, said } = listed;
  const table = el("table", { id: "sessions" }, el("thead", {}, el("tr", {},
    ["Session", "Name", "Owner", "Status", "Messages", "Last activity"].map((h) => el("th", { text: h })))));
  const body = el("tbody");
  for (const s of shown) {
    body.append(el("tr", { "data-id": s.id },
      el("td", { class: "mono" }, el("a", { href: sessionHref(s.id), text: s.id })),
      el("td", { class: "name", text: s.name }), el("td", { text: s.owner === null ? "(unowned)" : s.owner }),
      el("td", {}, el("span", { class: "status status-" + s.status, text: s.status })),
      conversationCell(s.conversation), el("td", { text: when(s.updated_at) })));
  }
  table.append(body);
  view.append(table, el("div", { class: "pager" },
    el("button", { class: "secondary", disabled: offset === 0, onclick: () => go({ offset: String(Math.max(0, offset - PAGE)) }), text: "← Newer" }),
    el("span", { id: "sessions-said", class: "muted", text: said }),
    el("button", { class: "secondary", disabled: !more, onclick: () => go({ offset: String(offset + PAGE) }), text: "Older →" })));
}

// The list answer names each session's conversation (decision 0110): its buffer and count.
function conversationCell(conversation) {
  if (!conversation) return el("td", { class: "count", text: "—" });
  const cell = el("td", { class: "count", title: `buffer ${conversation.buffer} (${conversation.found_by})` }, String(conversation.messages));
  if (conversation.buffer !== "chat_history") cell.append(el("span", { class: "muted mono buffer-name", text: " " + shortKey(conversation.buffer) }));
  return cell;
}
// a line's key carries a checkpoint or entry id: shortened for a table cell
const shortKey = (key) => (key.length > 24 ? key.slice(0, 21) + "…" : key);

async function plainPage(offset) {
  const answer = await api(`/v1/sessions?limit=${PAGE}&offset=${offset}`);
  if (!answer.ok) return { error: errorText(answer) };
  const { data, pagination } = answer.body;
  const said = `${pagination.total ? offset + 1 : 0}–${offset + data.length} of ${pagination.total}`;
  return { shown: data, more: pagination.has_more, said };
}

// The API filters sessions by nothing but access: the page reads them 100 at a time,
// newest first, up to FILTER_SCAN, and keeps those that match (decision 0086).
const FILTER_SCAN = 2000;
async function filteredPage(offset, status, owner) {
  const matches = [];
  let read = 0, total = 0, more = true;
  while (more && read < FILTER_SCAN && matches.length <= offset + PAGE) {
    const answer = await api(`/v1/sessions?limit=100&offset=${read}`);
    if (!answer.ok) return { error: errorText(answer) };
    const { data, pagination } = answer.body;
    for (const s of data) if ((!status || s.status === status) && (!owner || s.owner === owner)) matches.push(s);
    read += 100; total = pagination.total; more = pagination.has_more;
  }
  const shown = matches.slice(offset, offset + PAGE);
  const scanned = more ? `the newest ${Math.min(read, total)} of ${total}` : `all ${total}`;
  return { shown, more: matches.length > offset + PAGE, said: `${shown.length ? offset + 1 : 0}–${offset + shown.length} of the matches among ${scanned} sessions` };
}

// the buffer a session view reads: the session's conversation (the session answer names
// it: chat_history, agent_items, adk, pydantic_ai…, a LangGraph thread's head line), or
// another buffer of the session chosen in the view
let bufferKey = "chat_history";
function bufferPath(sessionId, query, key) {
  const params = new URLSearchParams({ session_id: sessionId, ...(query || {}) });
  return `/v1/buffers/session/${encodeURIComponent(key || bufferKey)}?` + params;
}

// ---- one session ------------------------------------------------------------------------
async function showSession(view, id, mine) {
  const [found, access, feats] = await Promise.all([
    api("/v1/sessions/" + encodeURIComponent(id)),
    api("/v1/sessions/" + encodeURIComponent(id) + "/access"),
    loadFeatures(),
  ]);
  if (mine !== generation) return;
  if (!found.ok) { view.append(el("h2", { text: "Session" }), el("p", { class: "error", text: errorText(found) })); return; }
  const may = access.ok ? access.body : { drive: false };
  const statusBadge = el("span", { id: "session-status" });
  const setStatus = (s) => { statusBadge.className = "status status-" + s; statusBadge.textContent = s; };
  setStatus(found.body.status);
  const s = found.body;
  const facts = el("dl", { class: "meta" }, [
    ["id", el("span", { class: "mono", text: s.id })], ["owner", s.owner === null ? "(unowned)" : s.owner],
    ["status", statusBadge], ["agent", s.agent || "—"], ["created", when(s.created_at)], ["last activity", el("span", { id: "updated", text: when(s.updated_at) })],
  ].map(([k, v]) => el("div", {}, el("dt", { text: k }), el("dd", {}, v))));
  const conversation = el("div", { id: "conversation" });
  const summary = el("div", { id: "repairs", class: "card summary" });
  const check = el("div", { id: "check", class: "card" });
  const formats = el("div", { id: "formats", class: "card" });
  const threads = el("div", { id: "checkpoints", class: "card" });
  const logCard = el("div", { id: "repair-log", class: "card" });
  const note = el("p", { id: "action-result", class: "muted" });
  bufferKey = (s.conversation && s.conversation.buffer) || "chat_history";
  const keyInput = el("input", { id: "buffer-key", value: bufferKey, size: 16, "aria-label": "buffer key" });
  const bufferList = el("div", { id: "buffers" });
  const heading = el("h3", { id: "buffer-heading" });
  // follow: the view reads the conversation, and moves with it (a heal starts a new line)
  const state = { rows: null, text: "", log: null, windowTokens: null, windowStart: null, windowError: null, follow: true, session: s };
  // the log of the buffer shown (repairs.js): a new one for each buffer opened
  const readLog = () => {
    if (state.log) state.log.alive = false;
    state.log = new RepairLog(repairsPath("session", bufferKey, { session_id: id }));
    state.text = "";
  };
  readLog();
  const open = (key, follow) => {
    bufferKey = key; keyInput.value = key; state.follow = follow;
    readLog();
    refresh(); renderFormats(formats, id);
  };
  const refresh = async () => {
    const again = await api("/v1/sessions/" + encodeURIComponent(id));
    if (mine !== generation) return false;
    if (again.ok) {
      setStatus(again.body.status); $("updated").textContent = when(again.body.updated_at);
      state.session = again.body;
      const now = again.body.conversation && again.body.conversation.buffer;
      if (state.follow && now && now !== bufferKey) {
        bufferKey = now; keyInput.value = now; readLog();
        renderFormats(formats, id);
      }
    }
    renderBuffers(bufferList, heading, state.session, open);
    const read = await api(bufferPath(id, { last: String(MAX_ROWS) }));
    if (mine !== generation) return false;
    if (!read.ok) { conversation.replaceChildren(el("p", { class: "error", text: errorText(read) })); return true; }
    const text = JSON.stringify(read.body.messages);
    const log = state.log;
    const logChanged = await log.sync(text !== state.text);
    if (mine !== generation || log !== state.log) return mine === generation;
    if (text === state.text && !logChanged) return true;
    state.text = text;
    state.rows = read.body.messages;
    state.total = read.body.count;
    if (state.windowTokens !== null) await readWindow(id, state);
    const violations = await checkRows(state.rows, firstIndex(state));
    if (mine !== generation) return false;
    renderConversation(conversation, state, violations);
    renderSummary(summary, state, feats, id, conversation, violations);
    renderCheck(check, violations);
    log.shown = { first: firstIndex(state), count: state.rows.length };
    renderRepairLog(logCard, log);
    return true;
  };
  view.append(el("div", { class: "card" }, el("h2", { id: "session-name", text: s.name || "(no name)" }), facts,
    actions(id, may, note), note));
  view.append(el("div", { class: "grid2" },
    el("div", {}, el("form", { class: "filters", onsubmit: (e) => {
      e.preventDefault();
      const key = keyInput.value.trim() || "chat_history";
      open(key, key === ((state.session.conversation || {}).buffer));
    } }, heading, keyInput,
    el("button", { class: "secondary", type: "submit", text: "Read" })), bufferList, conversation),
    el("div", {}, summary, logCard, check, formats, threads)));
  state.redraw = refresh;
  await refresh();
  renderFormats(formats, id);
  renderCheckpoints(threads, id);
  const poll = async () => {
    if (mine !== generation) return;
    try { if (!(await refresh())) return; } catch (_) { return; }
    setTimeout(poll, POLL_MS);
  };
  setTimeout(poll, POLL_MS);
}

// The buffer shown, named (the conversation or not), and every other buffer of the session
// with its count: a click opens it. A stale line (a LangGraph thread's or pydantic-ai
// conversation's line its head left) is history: its first line's key reads the head
// (decision 0110), so that one is shown in the checkpoints.
function renderBuffers(root, heading, session, open) {
  const conversation = session.conversation || { buffer: "chat_history", messages: 0, found_by: "default" };
  const isConversation = bufferKey === conversation.buffer;
  const how = { latest_checkpoint: "the line of the thread's latest checkpoint", head_entry: "the line of the conversation's head entry",
    newest_buffer: "the session's newest buffer", default: "no buffer yet" }[conversation.found_by] || conversation.found_by;
  heading.replaceChildren(isConversation ? `Conversation · buffer ` : "Buffer ", el("span", { class: "mono", id: "buffer-shown", text: bufferKey }),
    el("span", { class: "muted", text: isConversation ? ` (${how})` : " (not the conversation)" }));
  const buffers = session.buffers || [];
  const items = buffers.map((b) => {
    const current = b.name === bufferKey;
    const label = `${b.name} · ${b.messages} message${b.messages === 1 ? "" : "s"}`;
    const tags = [b.name === conversation.buffer ? el("span", { class: "badge replaced", text: "conversation" }) : "",
      b.stale ? el("span", { class: "badge", text: "stale line (history)" }) : ""];
    const shadowed = b.stale && !b.name.includes("#");  // its key reads the head: see the checkpoints
    const link = current ? el("strong", { class: "mono", text: label })
      : el("a", { href: "#", class: "mono", "data-buffer": b.name, onclick: (e) => {
        e.preventDefault();
        if (shadowed) { const c = $("checkpoints"); if (c) c.scrollIntoView({ block: "start" }); return; }
        open(b.name, b.name === conversation.buffer);
      }, text: label });
    return el("li", { "data-buffer": b.name, class: current ? "current" : null }, link, ...tags,
      shadowed ? el("span", { class: "muted", text: " its rows are the checkpoints' before the head moved (see LangGraph checkpoints)" }) : "");
  });
  const more = session.buffers_more ? el("li", { class: "muted", text: "… more buffers (the first 100 by key are listed)" }) : "";
  root.replaceChildren(buffers.length > 1 || !isConversation
    ? el("details", { open: true }, el("summary", { text: `${buffers.length}${session.buffers_more ? "+" : ""} buffers in this session` }), el("ul", { id: "buffer-list" }, items, more))
    : "");
}

function actions(id, may, note) {
  if (!may.drive) {
    return el("p", { id: "view-only", class: "muted", text: "View only: this token may not drive this session (send a turn, stop, reset; MEM-9)." });
  }
  const base = "/v1/sessions/" + encodeURIComponent(id);
  const input = el("textarea", { id: "turn-content", placeholder: "A user turn…" });
  const run = async (path, body) => {
    const answer = await api(base + path, { method: "POST", body });
    note.textContent = answer.ok ? `${path.slice(1)}: ${JSON.stringify(answer.body)}` : errorText(answer);
  };
  return el("div", { class: "actions", id: "actions" }, input,
    el("button", { id: "send-turn", onclick: () => { if (input.value.trim()) run("/turns", { content: input.value }).then(() => { input.value = ""; }); }, text: "Send turn" }),
    el("button", { id: "stop", class: "secondary", onclick: () => run("/stop"), text: "Stop" }),
    el("button", { id: "reset", class: "secondary", onclick: () => { if (confirm("Clear this session's conversation buffer?")) run("/reset"); }, text: "Reset" }));
}

// POST /v1/check numbers the rows it is sent from 0: `first` (the buffer index of the
// first row read) makes each violation's index the row's index in the buffer.
async function checkRows(rows, first) {
  if (!rows || !rows.length) return { sendable: true, violations: [] };
  const answer = await api("/v1/check?format=rows", { method: "POST", body: rows });
  if (!answer.ok) return { sendable: null, violations: [], error: errorText(answer) };
  const violations = (answer.body.violations || []).map((v) => ({ ...v, index: v.index + first }));
  return { ...answer.body, violations };
}

async function readWindow(id, state) {
  const answer = await api(bufferPath(id, { max_tokens: String(state.windowTokens) }));
  const window = answer.ok ? answer.body.window : null;
  state.windowStart = window ? window.start : null;  // the window's first row after its system rows
  state.windowError = answer.ok ? null : errorText(answer);
}

// ---- messages ------------------------------------------------------------------------------
const meta = (row) => (row && typeof row.metadata === "object" && row.metadata) || {};
function resultId(row) {
  if (!row || row.role !== "tool") return null;
  const id = row.tool_call_id ?? meta(row).tool_call_id;
  return typeof id === "string" && id ? id : null;
}
// MEM-3's placeholder: marked healed by flowmem's append; FlowmemHealing's (a LangGraph
// thread's) is a ToolMessage whose id starts "flowmem-healed-" (kept in the row's metadata)
const LANGGRAPH_HEALED = "flowmem-healed-";
function isHealed(row) {
  if (meta(row).healed === true || row.healed === true) return true;
  const fields = ((meta(row).extra || {}).langchain || {}).fields || {};
  return row.role === "tool" && typeof fields.id === "string" && fields.id.startsWith(LANGGRAPH_HEALED);
}
function callsOf(row) {
  const calls = row.tool_calls ?? meta(row).tool_calls;
  return row.role === "assistant" && Array.isArray(calls) ? calls : [];
}
function callId(call) {
  const id = call && (call.tool_call_id ?? call.id);
  return typeof id === "string" && id ? id : null;
}

// The index in the buffer of the first row read: a session view reads the newest
// MAX_ROWS rows, so row i of the read is row first + i of the buffer (as the API,
// window.start and `flowmem check` on the whole buffer number it).
function firstIndex(state) {
  const rows = state.rows || [];
  return Math.max((state.total ?? rows.length) - rows.length, 0);
}

function renderConversation(root, state, check) {
  const rows = state.rows || [];
  const first = firstIndex(state);
  const answers = new Map();
  rows.forEach((row, i) => { const id = resultId(row); if (id !== null && !answers.has(id)) answers.set(id, first + i); });
  const calls = new Map();
  rows.forEach((row, i) => callsOf(row).forEach((c) => { const id = callId(c); if (id !== null) calls.set(id, { index: first + i, call: c }); }));
  const bad = new Map();
  for (const v of check.violations || []) bad.set(v.index, [...(bad.get(v.index) || []), v]);
  // window.start indexes the whole buffer, as the rows here are numbered
  const cutBefore = state.windowStart === null || state.windowStart === undefined ? -1 : state.windowStart;
  const nodes = [];
  if (!rows.length) nodes.push(el("p", { class: "muted", text: "The buffer is empty." }));
  if (state.windowError) nodes.push(el("p", { class: "error", text: `Token window: ${state.windowError}` }));
  if (cutBefore > 0 && cutBefore < first) nodes.push(el("p", { id: "window-before", class: "muted", text: `A window of ${state.windowTokens} tokens starts at #${cutBefore}, before the rows shown: every row here is in it.` }));
  if (state.total > rows.length) nodes.push(el("p", { class: "error", text: `Showing the last ${rows.length} of ${state.total} messages (#${first} to #${state.total - 1}, numbered as in the buffer): a result whose call is older is shown unpaired, and the check judges these rows alone.` }));
  rows.forEach((row, i) => {
    const index = first + i;
    if (index === cutBefore && cutBefore > 0) nodes.push(el("div", { class: "window-cut", text: `↑ outside a window of ${state.windowTokens} tokens · the window starts here ↓` }));
    nodes.push(renderRow(row, index, { answers, calls, rows, first, bad: bad.get(index), cut: index < cutBefore && row.role !== "system", log: state.log }));
  });
  root.replaceChildren(...nodes);
}

function renderRow(row, i, ctx) {
  const healed = isHealed(row);
  const rid = resultId(row);
  const classes = ["msg", "role-" + row.role];
  if (healed) classes.push("healed");
  if (ctx.bad) classes.push("violation");
  if (ctx.cut) classes.push("cut");
  const head = el("div", { class: "msg-head" }, el("span", { class: "mono", text: "#" + i }),
    el("span", { class: "role", text: row.role }), el("span", { text: when(row.timestamp) }));
  if (healed) head.append(el("span", { class: "badge heal", title: "Inserted by flowmem: the call had no result when the next user turn came (MEM-3)", text: "healed placeholder · MEM-3" }));
  for (const v of ctx.bad || []) head.append(el("span", { class: "badge bad", text: `${v.rule || v.code || "check"}: ${v.message || ""}` }));
  const node = el("div", { class: classes.join(" "), id: "row-" + i, "data-index": i }, head);
  const marks = repairMarks(row, i, ctx.log);  // the repair log's entries that touched this row (repairs.js)
  if (marks.length) node.append(el("div", { class: "repair-marks" }, marks));
  if (rid !== null) {
    const call = ctx.calls.get(rid);
    node.append(el("div", { class: "muted" }, "result of ",
      call ? el("a", { href: "#", "data-row": call.index, onclick: jump, text: `${call.call.name || "call"} · #${call.index}` }) : "an unknown call",
      el("span", { class: "mono", text: " (" + rid + ")" })));
  }
  node.append(renderContent(row.content));
  for (const c of callsOf(row)) {
    const id = callId(c);
    const answered = id === null ? undefined : ctx.answers.get(id);
    const target = answered === undefined ? null : ctx.rows[answered - ctx.first];
    const state = answered === undefined ? el("span", { class: "badge bad", text: "no result yet" })
      : el("a", { href: "#", "data-row": answered, onclick: jump, class: isHealed(target) ? "badge heal" : "badge replaced",
        text: (isHealed(target) ? "healed placeholder" : "result") + " · #" + answered });
    node.append(el("div", { class: "call" }, el("strong", { text: c.name || "(unnamed call)" }),
      el("span", { class: "mono", text: " " + (id || "(no id)") + " " }), state,
      el("pre", { text: typeof c.args === "string" ? c.args : json(c.args ?? c.arguments ?? {}) })));
  }
  const rest = { ...meta(row) };
  delete rest.tool_calls; delete rest.tool_call_id; delete rest.healed;
  if (Object.keys(rest).length) node.append(el("details", {}, el("summary", { text: "metadata" }), el("pre", { text: json(rest) })));
  return node;
}

function jump(event) {
  event.preventDefault();
  const target = $("row-" + event.currentTarget.getAttribute("data-row"));
  if (target) target.scrollIntoView({ block: "center" });
}

const SAFE_MEDIA = /^(image)\/[a-z0-9.+-]+$/i;
const BASE64 = /^[A-Za-z0-9+/=\s]*$/;

function dataUrl(part) {
  if (typeof part.url === "string" && /^data:image\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]*$/i.test(part.url)) return part.url;
  if (typeof part.data === "string" && BASE64.test(part.data) && SAFE_MEDIA.test(part.media_type || "")) {
    return `data:${part.media_type};base64,${part.data.replace(/\s/g, "")}`;
  }
  return null;
}

function renderContent(content) {
  if (typeof content === "string") return content ? el("pre", { class: "text", text: content }) : el("span");
  if (!Array.isArray(content)) return el("pre", { text: json(content) });
  const box = el("div", { class: "parts" });
  for (const part of content) {
    const kind = part && part.type;
    if (kind === "text") box.append(el("pre", { class: "text", text: part.text ?? "" }));
    else if (kind === "image") {
      const src = dataUrl(part);
      box.append(src ? el("div", { class: "media" }, el("img", { src, alt: "image in the message" }))
        : el("p", { class: "muted", text: "image (not loaded): " + (part.url || part.file_id || "") }));
    } else if (kind === "file") {
      box.append(el("ul", { class: "files" }, el("li", {}, "file: ", el("strong", { class: "filename", text: part.filename || "(no name)" }),
        el("span", { class: "muted", text: ` ${part.media_type || ""} ${part.file_id || part.url || (part.data ? "inline data" : "")}` }))));
    } else if (kind === "reasoning") {
      const text = [part.text, ...(Array.isArray(part.summary) ? part.summary : [])].filter((t) => typeof t === "string").join("\n");
      const opaque = part.signature || part.encrypted_content || part.redacted_data ? " · opaque signature kept" : "";
      box.append(el("details", { class: "reasoning" }, el("summary", { text: `reasoning (${part.provider || "?"})${opaque}` }), el("pre", { text })));
    } else if (kind === "audio") box.append(el("p", { class: "muted", text: "audio " + (part.media_type || part.format || "") }));
    else box.append(el("details", {}, el("summary", { text: `${kind || "part"} ${part && part.provider ? "(" + part.provider + ")" : ""}` }), el("pre", { text: json(part) })));
  }
  return box;
}

// ---- the side panels -------------------------------------------------------------------
function renderSummary(root, state, features, id, conversation, check) {
  const rows = state.rows || [];
  const healed = rows.filter(isHealed).length;
  const logged = state.log.error ? "the repair log could not be read" : `${state.log.total} repair${state.log.total === 1 ? "" : "s"} logged for this buffer, each marked on the rows it touched`;
  const items = [
    el("li", { id: "count-healed", text: `${healed} healed placeholder${healed === 1 ? "" : "s"} in the rows shown (MEM-3)` }),
    el("li", { id: "count-logged", text: logged }),
  ];
  const counted = state.total > rows.length ? `the last ${rows.length} of ${state.total} messages` : `${rows.length} messages`;
  const parts = [el("h3", { text: `Repairs · ${counted}` }), el("ul", {}, items)];
  if (features.maxTokens) {
    const input = el("input", { id: "window-tokens", type: "number", min: "1", value: state.windowTokens ?? "", placeholder: "max_tokens" });
    parts.push(el("form", { class: "filters", onsubmit: async (e) => {
      e.preventDefault();
      state.windowTokens = input.value ? parseInt(input.value, 10) : null;
      state.windowStart = null; state.windowError = null; state.text = "";
      await state.redraw();
    } }, el("label", {}, "Token window", input), el("button", { class: "secondary", type: "submit", text: "Show cut" })));
  }
  root.replaceChildren(...parts);
}

function renderCheck(root, check) {
  const head = el("h3", { text: "check_sendable (POST /v1/check)" });
  if (check.error) { root.replaceChildren(head, el("p", { class: "error", text: check.error })); return; }
  const verdict = check.sendable ? el("p", { id: "sendable", class: "status status-completed", text: "sendable as is" })
    : el("p", { id: "sendable", class: "status status-failed", text: `${check.violations.length} violation(s): a provider would refuse it` });
  root.replaceChildren(head, verdict, el("ul", {}, (check.violations || []).map((v) =>
    el("li", {}, el("a", { href: "#", "data-row": v.index, onclick: jump, text: "#" + v.index }), ` ${v.rule || v.code || ""}: ${v.message || ""}`))));
}

// A buffer read's `dropped` is the number of entries normalization removed (docs/api.md);
// a count per kind ({kind: n}) is shown kind by kind.
function droppedText(dropped) {
  const what = "dropped by normalization (MEM-5: orphan results, duplicates, calls whose result cannot be text)";
  if (typeof dropped === "number") return dropped > 0 ? [`${dropped} ${dropped === 1 ? "entry" : "entries"} ${what}`] : [];
  if (dropped && typeof dropped === "object") {
    return Object.entries(dropped).filter(([, n]) => n).map(([k, n]) => `${k} × ${n} dropped by normalization (MEM-5)`);
  }
  return [];
}

function renderFormats(root, id) {
  const select = el("select", { id: "format" }, FORMATS.map((f) => el("option", { value: f, text: f })));
  const out = el("div", { id: "format-out" });
  const show = async () => {
    const answer = await api(bufferPath(id, { format: select.value }));
    if (!answer.ok) { out.replaceChildren(el("p", { class: "error", text: errorText(answer) })); return; }
    const b = answer.body;
    const drops = [...droppedText(b.dropped),
      ...Object.entries(b.not_carried || {}).map(([k, n]) => `${k} × ${n} not carried by ${b.format}`)];
    const system = b.system ?? b.system_instruction;
    out.replaceChildren(el("ul", { id: "format-drops" }, drops.length ? drops.map((d) => el("li", { text: d })) : el("li", { class: "muted", text: "nothing dropped" })),
      system === undefined || system === null ? "" : el("details", {}, el("summary", { text: "system" }), el("pre", { text: json(system) })),
      el("details", { open: true }, el("summary", { text: `${b.messages.length} entries as ${b.format} would receive them` }), el("pre", { id: "format-messages", text: json(b.messages) })));
  };
  select.addEventListener("change", show);
  root.replaceChildren(el("h3", { text: "As a provider would receive it" }), el("label", {}, "Format ", select), out);
  show();
}

async function renderCheckpoints(root, id) {
  const answer = await api("/v1/sessions/" + encodeURIComponent(id) + "/checkpoints?limit=20");
  const head = el("h3", { text: "LangGraph checkpoints" });
  if (!answer.ok) { root.replaceChildren(head, el("p", { class: "error", text: errorText(answer) })); return; }
  if (!answer.body.data.length) { root.replaceChildren(head, el("p", { class: "muted", text: "No checkpointer wrote this session (a LangGraph thread is a session)." })); return; }
  root.replaceChildren(head, el("ol", { id: "checkpoint-list" }, answer.body.data.map((c) =>
    el("li", {}, el("details", {}, el("summary", { class: "mono", text: `${c.checkpoint_id}${c.ns ? " · " + c.ns : ""}` }),
      Object.entries(c.messages).map(([channel, rows]) => el("div", {}, el("strong", { text: `${channel}: ${rows.length} messages` }),
        el("span", { class: "muted mono", text: ` buffer ${(c.lines || {})[channel] || "?"}` }),
        el("ol", { start: 0 }, rows.map((r) => el("li", {}, el("span", { class: "role", text: r.role + " " }),
          typeof r.content === "string" ? r.content : json(r.content)))))))))));
}

// ---- memory ---------------------------------------------------------------------------------
const ID_PARAM = { session: "session_id", workflow: "workflow_id", pipeline: "pipeline_id", execution: "execution_id" };

function showMemory(view) {
  const scope = el("select", { id: "mem-scope" }, ["user", "session", "global", "workflow", "pipeline", "execution"].map((k) => el("option", { value: k, text: k })));
  const scopeId = el("input", { id: "mem-scope-id", placeholder: "session / workflow / pipeline / execution id", size: 36 });
  const kind = el("select", { id: "mem-kind" }, ["record", "buffer"].map((k) => el("option", { value: k, text: k })));
  const key = el("input", { id: "mem-key", placeholder: "key" });
  const listed = el("div", { id: "mem-list" });
  const out = el("div", { id: "mem-out" });
  const ids = () => {
    const params = new URLSearchParams();
    if (ID_PARAM[scope.value] && scopeId.value.trim()) params.set(ID_PARAM[scope.value], scopeId.value.trim());
    return params;
  };
  const said = (b) => el("p", { class: "muted", text: `scope id: ${b.resolved_scope_id || "(none)"}${b.refused ? " · refused: " + b.refused : ""}` });
  const read = async (what, name) => {
    const path = `/v1/${what === "buffer" ? "buffers" : "memory"}/${scope.value}/${encodeURIComponent(name)}?${ids()}`;
    const answer = await api(path);
    if (!answer.ok) { out.replaceChildren(el("p", { class: "error", text: errorText(answer) })); return; }
    const b = answer.body;
    if (what === "buffer") {
      const rows = el("div");
      const log = new RepairLog(repairsPath(scope.value, name, Object.fromEntries(ids())));
      await log.sync(true);
      log.shown = { first: Math.max(b.count - b.messages.length, 0), count: b.messages.length };
      renderConversation(rows, { rows: b.messages, total: b.count, windowStart: null, log }, { violations: [] });
      const logBox = el("div", { id: "mem-repair-log", class: "card" });
      renderRepairLog(logBox, log);
      out.replaceChildren(el("h3", { text: `buffer ${name}: ${b.count} messages` }), said(b), rows, logBox);
    } else {
      out.replaceChildren(el("h3", { text: `record ${name}` }), said(b),
        el("p", { text: b.found ? "found" : "not found (absent, expired or refused)" }), el("pre", { id: "mem-value", text: json(b.value) }));
    }
  };
  const list = async (e, start) => {
    if (e) e.preventDefault();
    const params = ids();
    params.set("limit", "50");
    if (start) params.set("start", start);
    const answer = await api(`/v1/memory/${scope.value}?${params}`);
    if (!answer.ok) { listed.replaceChildren(el("p", { class: "error", text: errorText(answer) })); return; }
    const b = answer.body;
    const table = el("table", { id: "records" }, el("thead", {}, el("tr", {}, ["Record key", "Expires"].map((h) => el("th", { text: h })))),
      el("tbody", {}, b.data.map((r) => el("tr", {},
        el("td", { class: "mono" }, el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); read("record", r.key); }, text: r.key })),
        el("td", { text: r.expires_at === null ? "never" : `${when(r.expires_at)} (in ${Math.max(0, Math.round(r.expires_at - Date.now() / 1000))} s)` })))));
    listed.replaceChildren(said(b), b.data.length ? table : el("p", { class: "muted", text: "No live records." }),
      b.next_start ? el("button", { class: "secondary", onclick: () => list(null, b.next_start), text: "More →" }) : "");
  };
  view.append(el("h2", { text: "Memory" }), el("p", { class: "muted",
    text: "The scopes this token may read: user (its own user id), session (a session it may view), and with memory:shared the shared scopes (global, workflow, pipeline, execution)." }),
  el("form", { class: "filters card", id: "mem-list-form", onsubmit: list }, el("label", {}, "Scope", scope), el("label", {}, "Scope id", scopeId),
    el("button", { type: "submit", text: "List records" })),
  el("form", { class: "filters card", id: "mem-read-form", onsubmit: (e) => { e.preventDefault(); if (key.value) read(kind.value, key.value); } },
    el("label", {}, "Kind", kind), el("label", {}, "Key", key), el("button", { type: "submit", class: "secondary", text: "Read" })),
  el("div", { class: "grid2" }, listed, out));
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", () => logout());
  window.addEventListener("hashchange", route);
  route();
});
