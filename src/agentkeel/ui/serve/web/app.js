// keel serve's web app: plain JS on the JSON API and the SSE streams (no build step, no framework).
"use strict";
const $ = (id) => document.getElementById(id);
function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}
async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  };
  const res = await fetch(path, init);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || `${res.status} ${res.statusText}`);
  return data;
}
function flash(message) { $("conn").textContent = message; }

// --- rendering one event into a transcript ------------------------------------------------
function textOf(content) {
  return (content || []).filter((b) => b.type === "text").map((b) => b.text).join("");
}
function diffLines(oldText, newText) {
  const a = (oldText || "").split("\n"), b = (newText || "").split("\n");
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length, endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA--; endB--; }
  const out = [];
  for (const line of a.slice(Math.max(0, start - 2), start)) out.push(["ctx", "  " + line]);
  for (const line of a.slice(start, endA)) out.push(["del", "- " + line]);
  for (const line of b.slice(start, endB)) out.push(["add", "+ " + line]);
  for (const line of a.slice(endA, endA + 2)) out.push(["ctx", "  " + line]);
  return out;
}
function diffBlock(rows) {
  const box = el("div", "diff");
  for (const [cls, text] of rows) box.append(el("div", cls, text));
  return box;
}
function toolLabel(name, input) {
  const target = input.file_path || input.path || input.command || input.pattern || input.url || input.description || "";
  return `${name}(${String(target).slice(0, 120)})`;
}
// Where each file-writing tool's (old, new) text is in its input, from the server (/api/info,
// keel's tools/views.py EDIT_SHAPES): {new, old?, items?}. No tool is named here.
let editShapes = {};
function addedLines(text) {
  return String(text || "").replace(/\n$/, "").split("\n").map((l) => ["add", "+ " + l]);
}
function toolDiff(name, input) {
  const shape = editShapes[name];
  if (!shape) return null;
  const entries = shape.items ? (Array.isArray(input[shape.items]) ? input[shape.items] : []) : [input];
  return diffBlock(entries.flatMap((e) => shape.old ? diffLines(e[shape.old], e[shape.new]) : addedLines(e[shape.new])));
}

// A user message is the prompt as typed, then what was added to it before the model saw it (hook
// output, keel's <memory-context>), each in its own text block: the prompt is shown, the rest folded.
const INJECTED = /\n*(?=<(memory-context|system-reminder)[\s>])/;
function promptParts(content) {
  const texts = (content || []).filter((b) => b.type === "text").map((b) => b.text);
  if (!texts.length) return null;
  const first = texts[0].split(INJECTED);  // context glued into the prompt's own block, if ever
  const prompt = first[0];
  const extra = [texts[0].slice(prompt.length).replace(/^\n+/, ""), ...texts.slice(1)].filter((t) => t.trim());
  return {prompt, extra};
}
function injectedLabel(extra) {
  const memory = extra.some((t) => t.trimStart().startsWith("<memory-context"));
  const other = extra.filter((t) => !t.trimStart().startsWith("<memory-context")).length;
  const parts = [];
  if (memory) parts.push("memory");
  if (other) parts.push(`hook output (${other})`);
  return `context added to this prompt: ${parts.join(", ")}`;
}
function userBubble(content) {
  const parts = promptParts(content);
  if (!parts) return null;
  const bubble = el("div", "msg user");
  bubble.append(el("div", "prompt", parts.prompt));
  if (parts.extra.length) {
    const fold = el("details", "injected");
    fold.append(el("summary", "", injectedLabel(parts.extra)));
    for (const t of parts.extra) fold.append(el("pre", "", t));
    bubble.append(fold);
  }
  return bubble;
}

class Transcript {
  constructor(box) { this.box = box; this.clear(); }
  clear() { this.box.replaceChildren(); this.streaming = null; this.tools = new Map(); }
  settle() {  // a reply cut short keeps what was streamed, marked as such
    if (this.streaming) { this.streaming.className = "msg assistant cut"; this.streaming = null; }
  }
  note(text, level) { this.box.append(el("div", "note " + (level || ""), text)); }
  tool(id, name, input) {
    let t = this.tools.get(id);
    if (t) return t;
    t = el("details", "tool");
    t.dataset.id = id;
    t.dataset.name = name;
    const head = el("summary", "", toolLabel(name, input || {}));
    t.append(head);
    const diff = toolDiff(name, input || {});
    if (diff) { t.append(diff); t.open = true; }
    this.box.append(t);
    this.tools.set(id, t);
    return t;
  }
  add(ev) {
    const box = this.box;
    switch (ev.type) {
      case "user": {
        const bubble = userBubble(ev.message.content);
        if (bubble) box.append(bubble);
        break;
      }
      case "text_delta":
        if (!this.streaming) { this.streaming = el("div", "msg assistant streaming", ""); box.append(this.streaming); }
        this.streaming.textContent += ev.text;
        break;
      case "stream_retry":
        if (this.streaming) { this.streaming.remove(); this.streaming = null; }
        this.note(`retrying: ${ev.error}`, "warning");
        break;
      case "assistant": {
        const text = textOf(ev.message.content);
        if (this.streaming) {
          this.streaming.className = "msg assistant";
          this.streaming.textContent = text;
          if (!text) this.streaming.remove();
          this.streaming = null;
        } else if (text) box.append(el("div", "msg assistant", text));
        for (const b of ev.message.content) if (b.type === "tool_use") this.tool(b.id, b.name, b.input);
        break;
      }
      case "tool_start": this.tool(ev.tool_use_id, ev.name, ev.input); break;
      case "tool_end": {
        const t = this.tool(ev.tool_use_id, ev.name, ev.input);
        t.classList.add(ev.is_error ? "error" : "ok");
        const code = ev.metadata && ev.metadata.exit_code !== undefined ? ` · exit ${ev.metadata.exit_code}` : "";
        t.querySelector("summary").textContent += `  ${ev.is_error ? "✗" : "✓"} ${ev.duration_ms} ms${code}`;
        break;
      }
      case "tool_results":
        for (const b of ev.message.content) {
          if (b.type !== "tool_result") continue;
          const t = this.tools.get(b.tool_use_id);
          const out = typeof b.content === "string" ? b.content : textOf(b.content);
          if (t) t.append(el("pre", "output", out.length > 4000 ? out.slice(0, 4000) + "\n…" : out));
        }
        break;
      case "permission": if (ev.decision !== "allow" || ev.source === "ask") this.note(`${ev.tool_name}: ${ev.decision} (${ev.reason})`); break;
      case "notice": this.note(ev.message, ev.level); break;
      case "interrupted":
        this.settle();
        this.note(`interrupted during ${ev.during}`, "warning");
        break;
      case "result":
        this.settle();
        this.note(`${ev.subtype} · ${ev.num_turns} turns · $${(ev.total_cost_usd || 0).toFixed(4)} · ${ev.duration_ms} ms`,
          ev.is_error ? "error" : "");
        break;
      case "session_start": this.note(`session ${ev.session_id.slice(0, 8)} · ${ev.model} · ${ev.cwd} (${ev.source})`); break;
      case "rewind": {  // the conversation starts over from the turns before the rewound one
        this.clear();
        for (const m of ev.messages || []) {
          if (m.role === "user") this.add({type: m.content.some((b) => b.type === "tool_result") ? "tool_results" : "user", message: m});
          else this.add({type: "assistant", message: m});
        }
        this.note(`rewound to before turn #${ev.turn_index} (${ev.mode})`, "warning");
        break;
      }
      case "compaction": this.note(`conversation compacted (${ev.trigger})`); break;
      case "todos": this.note("todos: " + ev.todos.map((t) => `[${t.status}] ${t.content}`).join(" · ")); break;
      default:
        if (ev.type && ev.type.startsWith("session_")) this.note(ev.type.replace("_", " "));
    }
    box.scrollTop = box.scrollHeight;
  }
}

// --- the session page ---------------------------------------------------------------------
const state = {current: null, live: false, source: null, events: [], asks: new Map()};
const transcript = new Transcript($("transcript"));

function setStatus(text, cls) {
  const s = $("s-status");
  s.textContent = text;
  s.className = "badge " + (cls || "");
}
function showAsk() {
  const first = state.asks.values().next().value;
  $("ask").classList.toggle("hidden", !first);
  if (!first) return;
  $("ask").dataset.ask = first.ask_id;
  $("ask-text").textContent = `keel wants to use ${first.tool}: ${first.reason}`;
  $("ask-input").textContent = JSON.stringify(first.input, null, 2);
}
function onFrame(frame) {
  switch (frame.kind) {
    case "permission_request": state.asks.set(frame.ask_id, frame); showAsk(); break;
    case "permission_answered": state.asks.delete(frame.ask_id); showAsk(); break;
    case "idle": setStatus("idle", "live"); break;
    case "closed": setStatus("closed"); stopStream(); state.live = false; refreshLists(); break;
    case "mode": $("s-mode").value = frame.mode; break;
    case "reset": transcript.clear(); transcript.note("some events were no longer buffered; showing what is", "warning"); break;
    case "error": transcript.note(frame.message, "error"); break;
    case "warning": transcript.note(frame.message, "warning"); break;
    default:
      if (frame.event) {
        transcript.add(frame.event);
        if (frame.event.type === "user" || frame.event.type === "request_start") setStatus("working", "busy");
      }
  }
}
function stopStream() { if (state.source) { state.source.close(); state.source = null; } }
function follow(id) {
  stopStream();
  const source = new EventSource(`/api/sessions/${id}/stream`);
  source.onmessage = (m) => onFrame(JSON.parse(m.data));
  source.onopen = () => flash("live");
  source.onerror = () => flash("reconnecting…");
  state.source = source;
}
async function openSession(id, live) {
  state.current = id; state.live = live; state.asks.clear(); state.events = [];
  showAsk();
  transcript.clear();
  $("empty").classList.add("hidden");
  $("session").classList.remove("hidden");
  $("timeline").classList.add("hidden");
  $("s-title").textContent = id;
  $("s-resume").classList.toggle("hidden", live);
  for (const b of ["s-interrupt", "s-close", "send", "s-mode"]) $(b).disabled = !live;
  document.querySelectorAll(".row").forEach((r) => r.classList.toggle("on", r.dataset.id === id));
  if (live) {
    const info = await api(`/api/sessions/${id}`);
    $("s-mode").value = info.mode;
    setStatus(info.busy ? "working" : "idle", info.busy ? "busy" : "live");
    follow(id);
  } else {
    stopStream();
    setStatus("saved");
    const log = await api(`/api/sessions/${id}/events`);
    state.events = log.events;
    for (const ev of log.events) transcript.add(ev);
  }
  loadSetup();
}
async function refreshLists() {
  const data = await api("/api/sessions");
  $("live-list").replaceChildren(...data.live.map((s) => sessionRow(s.session_id, s.first_prompt || "(new session)", `${s.busy ? "working" : "idle"} · ${s.cwd}`, true)));
  const open = new Set(data.live.map((s) => s.session_id));
  $("saved-list").replaceChildren(...data.saved.filter((s) => !open.has(s.session_id)).map((s) =>
    sessionRow(s.session_id, s.title || s.first_prompt || "(no prompt yet)", s.last_activity, false)));
}
function sessionRow(id, title, meta, live) {
  const r = el("div", "row session" + (id === state.current ? " on" : ""));
  r.dataset.id = id;
  r.dataset.live = live ? "1" : "0";
  r.append(el("div", "", title), el("div", "meta", `${id.slice(0, 8)} · ${meta}`));
  r.addEventListener("click", () => openSession(id, live).catch((e) => flash(e.message)));
  return r;
}
$("new-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try {
    const s = await api("/api/sessions", {cwd: $("new-cwd").value || null, permission_mode: $("new-mode").value || null});
    await refreshLists();
    await openSession(s.session_id, true);
    $("prompt").focus();
  } catch (e) { flash(e.message); }
});
$("composer").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || !state.live) return;
  try { await api(`/api/sessions/${state.current}/messages`, {text}); $("prompt").value = ""; }
  catch (e) { transcript.note(e.message, "error"); }
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) $("composer").requestSubmit();
});
document.querySelectorAll("#ask button").forEach((b) => b.addEventListener("click", async () => {
  const ask = $("ask").dataset.ask;
  try { await api(`/api/sessions/${state.current}/permissions/${ask}`, {answer: b.dataset.answer}); }
  catch (e) { transcript.note(e.message, "error"); }
}));
$("s-interrupt").addEventListener("click", () => api(`/api/sessions/${state.current}/interrupt`, {}).catch((e) => flash(e.message)));
$("s-close").addEventListener("click", async () => {
  await api(`/api/sessions/${state.current}/close`, {}).catch((e) => flash(e.message));
  await refreshLists();
});
$("s-mode").addEventListener("change", () =>
  api(`/api/sessions/${state.current}/mode`, {mode: $("s-mode").value}).catch((e) => flash(e.message)));
$("s-resume").addEventListener("click", async () => {
  try {
    const s = await api("/api/sessions", {resume: state.current});
    await refreshLists();
    await openSession(s.session_id, true);
  } catch (e) { flash(e.message); }
});

// --- replay timeline with fork -------------------------------------------------------------
const timeline = {source: null};
function replayTo(n) {
  transcript.clear();
  for (const ev of state.events.slice(0, n)) transcript.add(ev);
  $("tl-pos").textContent = `event ${n} of ${state.events.length}`;
}
$("s-timeline").addEventListener("click", async () => {
  const box = $("timeline");
  if (!box.classList.contains("hidden")) {  // closing it: back to the session as it is now
    box.classList.add("hidden");
    await openSession(state.current, state.live);
    return;
  }
  stopStream();  // the timeline shows the log; the live view comes back on reopening the session
  const log = await api(`/api/sessions/${state.current}/events`);
  state.events = log.events;
  const range = $("tl-range");
  range.max = String(state.events.length);
  range.value = String(state.events.length);
  replayTo(state.events.length);
  const turns = await api(`/api/sessions/${state.current}/turns`).catch(() => []);
  $("tl-turns").replaceChildren(...turns.map((t) => {
    const row = el("div", "tl-turn");
    const at = state.events.findIndex((e) => e.uuid === t.event_uuid);
    const jump = el("button", "", "Go");
    jump.addEventListener("click", () => { range.value = String(at + 1); replayTo(at + 1); });
    const fork = el("button", "tl-fork", "Fork before this");
    fork.dataset.turn = String(t.index);
    fork.addEventListener("click", async () => {
      try {
        const made = await api(`/api/sessions/${state.current}/fork`, {at_turn: t.index});
        const s = await api("/api/sessions", {resume: made.session_id, cwd: made.cwd});
        await refreshLists();
        await openSession(s.session_id, true);
      } catch (e) { flash(e.message); }
    });
    row.append(el("span", "", `#${t.index} ${t.text}`), jump, fork);
    if (state.live) {  // code and conversation back to just before this turn, as appended events
      const back = el("button", "tl-rewind", "Rewind here");
      back.dataset.turn = String(t.index);
      back.addEventListener("click", async () => {
        try {
          const done = await api(`/api/sessions/${state.current}/rewind`, {turn: t.index, mode: "both"});
          await openSession(state.current, true);
          const files = done.restored_files.length + done.removed_files.length;
          transcript.note(`${files} file(s) restored${done.warning ? ": " + done.warning : ""}`, done.warning ? "warning" : "");
        } catch (e) { flash(e.message); }
      });
      row.append(back);
    }
    return row;
  }));
  box.classList.remove("hidden");
});
$("tl-range").addEventListener("input", () => replayTo(Number($("tl-range").value)));
$("tl-play").addEventListener("click", () => {  // the server re-emits the log, paced as it happened (x4)
  if (timeline.source) { timeline.source.close(); timeline.source = null; return; }
  transcript.clear();
  let n = 0;
  const source = new EventSource(`/api/sessions/${state.current}/replay?speed=4`);
  source.onmessage = (m) => {
    const frame = JSON.parse(m.data);
    if (frame.kind === "replay_end") { source.close(); timeline.source = null; return; }
    transcript.add(frame.event);
    n += 1;
    $("tl-range").value = String(n);
    $("tl-pos").textContent = `event ${n} of ${state.events.length}`;
  };
  timeline.source = source;
});

// --- setup (permissions, hooks, skills, MCP) ----------------------------------------------
function table(title, rows, cols) {
  const wrap = el("div");
  wrap.append(el("h4", "", `${title} (${rows.length})`));
  if (!rows.length) { wrap.append(el("div", "meta", "none")); return wrap; }
  const t = el("table");
  const head = el("tr");
  for (const c of cols) head.append(el("th", "", c));
  t.append(head);
  for (const r of rows) {
    const tr = el("tr");
    for (const c of cols) tr.append(el("td", "", typeof r[c] === "object" ? JSON.stringify(r[c]) : String(r[c] ?? "")));
    t.append(tr);
  }
  wrap.append(t);
  return wrap;
}
async function loadSetup() {
  if (!state.live) return;
  const c = await api(`/api/sessions/${state.current}/config`).catch(() => null);
  if (!c) return;
  $("setup").replaceChildren(
    el("p", "meta", `${c.model} · ${c.cwd} · ${c.trusted ? "trusted" : "untrusted"} · mode ${c.permissions.mode}`),
    table("Permission rules", c.permissions.rules, ["kind", "rule", "scope", "source"]),
    table("Hooks", c.hooks, ["event", "matcher", "type", "handler", "scope", "source"]),
    table("Skills", c.skills, ["name", "description", "source"]),
    table("MCP servers", c.mcp, ["name", "status"]),
    table("Tools", c.tools.map((name) => ({name})), ["name"]),
  );
}

// --- memory (the `keel mem web` API, mounted under /memory) -------------------------------
let memorySource = null;
function memRow(e) {
  const r = el("div", "row");
  r.append(el("div", "", `${e.type}: ${e.summary}`), el("div", "meta", `[${e.id}] ${e.timestamp} · ${e.session || "-"}`));
  r.addEventListener("click", async () => {
    if (r.querySelector("pre")) return;
    const got = await api(`/memory/api/get?ids=${encodeURIComponent(e.id)}`);
    if (got.length) r.append(el("pre", "", got[0].text));
  });
  return r;
}
async function openMemory() {
  try {
    const s = await api("/memory/api/stats");
    $("mem-stats").textContent = `${s.entries} entries · ${s.sessions} sessions · ${s.vectors} vectors`;
  } catch (e) { $("mem-stats").textContent = e.message; return; }
  const sessions = await api("/memory/api/sessions");
  $("mem-sessions").replaceChildren(...sessions.map((s) => {
    const r = el("div", "row");
    r.append(el("div", "", s.prompt || "(no prompt)"), el("div", "meta", `${s.session} · ${s.entries} entries · ${s.last}`));
    return r;
  }));
  if (memorySource) return;
  memorySource = new EventSource("/memory/api/stream");
  memorySource.addEventListener("entry", (m) => {
    $("mem-feed").prepend(memRow(JSON.parse(m.data)));
    while ($("mem-feed").childElementCount > 200) $("mem-feed").lastChild.remove();
  });
  memorySource.onopen = () => { $("mem-live").textContent = "live: new observations appear at the top"; };
}
$("mem-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const hits = await api(`/memory/api/search?q=${encodeURIComponent($("mem-q").value)}`).catch((e) => { flash(e.message); return []; });
  $("mem-results").replaceChildren(...(hits.length ? hits.map(memRow) : [el("p", "meta", "nothing found")]));
});

// --- tabs and start-up ---------------------------------------------------------------------
document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => {
  document.querySelectorAll("nav button").forEach((x) => x.classList.toggle("on", x === b));
  for (const t of ["sessions", "memory", "setup"]) $("page-" + t).classList.toggle("hidden", t !== b.dataset.tab);
  if (b.dataset.tab === "memory") openMemory();
  if (b.dataset.tab === "setup") loadSetup();
}));
const started = api("/api/info").then((info) => {
  editShapes = info.edit_shapes || {};
  if (info.bypass) return;  // bypassPermissions only when the owner started the server allowing it
  document.querySelectorAll("option").forEach((o) => { if (o.textContent === "bypassPermissions") o.remove(); });
}).catch((e) => flash(e.message));
started.then(refreshLists).then(() => {  // a transcript is drawn once the tools' edit shapes are known
  const wanted = new URLSearchParams(location.hash.slice(1)).get("session");
  const row = wanted && document.querySelector(`.row[data-id="${wanted}"]`);
  if (row) row.click();
}).catch((e) => flash(e.message));
setInterval(() => refreshLists().catch(() => flash("server unreachable")), 3000);
