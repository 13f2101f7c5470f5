// One function per page: each draws into the page element, from the API (console.js) and the live streams.
import { actionButton, ago, api, duration, el, follow, markStatic, problem, table, when } from "./console.js";

// ------------------------------------------------------------------------------------------------- overview
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

// A small chart of one or two series over the last hour: a line per series, the newest value in the title.
function chart(id, title, points, series, unit = "") {
  const width = 300, height = 70, pad = 2;
  const values = points.flatMap((p) => series.map((s) => p[s.key] ?? 0));
  const top = Math.max(...values, 0) || 1;
  const x = (i) => pad + i * (width - 2 * pad) / Math.max(1, points.length - 1);
  const y = (v) => height - pad - (v / top) * (height - 2 * pad);
  const drawing = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img",
                              "aria-label": `${title}, last hour` });
  drawing.append(svg("line", { x1: 0, x2: width, y1: height - pad, y2: height - pad, class: "axis" }));
  for (const s of series) {
    const path = points.map((p, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(p[s.key] ?? 0).toFixed(1)}`).join("");
    drawing.append(svg("path", { d: path, class: `series ${s.className}` }));
  }
  const newest = points.length ? points[points.length - 1] : {};
  const legend = series.map((s) => `${s.label} ${newest[s.key] ?? "-"}${unit}`).join(" · ");
  return el("figure", { class: "card chart-card", id },
    el("figcaption", {}, el("strong", {}, title), el("span", { class: "legend" }, legend)), drawing,
    el("p", { class: "scale" }, `max ${Math.round(top * 100) / 100}${unit}`));
}

function mib(bytes) {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

function overview(page) {
  const health = el("section", { class: "card", id: "health" });
  const numbers = el("dl", { class: "numbers", id: "numbers" });
  const charts = el("div", { class: "charts", id: "charts" });
  const adapters = el("section", { class: "card", id: "overview-adapters" });
  const other = el("section", { class: "card", id: "components" });
  page.append(el("div", { class: "overview-top" }, health, el("section", { class: "card" }, el("h2", {}, "Numbers"), numbers)),
    charts, adapters, other);
  follow("status", (s) => {
    health.replaceChildren(el("h2", {}, "Health"),
      el("p", { class: `health ${s.health}`, "data-health": s.health }, s.health),
      s.reasons.length ? el("ul", { class: "reasons" }, s.reasons.map((r) => el("li", {}, r))) : el("p", {}, "No problems."));
    const d = s.detail || {};
    const hour = s.hour || {};
    const recent = s.recent || [];
    const lastFull = recent.length > 1 ? recent[recent.length - 2] : {};
    const deliveries = s.deliveries || {};
    const memory = s.memory || {};
    const pairs = [["Uptime", duration(s.uptime_s)], ["Turns/min", lastFull.turns ?? 0],
      ["Turns (hour)", hour.turns ?? 0], ["Failed (hour)", hour.failed ?? 0],
      ["Latency p50 / p99", hour.p50 == null ? "-" : `${hour.p50}s / ${hour.p99}s`],
      ["Deliveries pending", (deliveries.pending ?? 0) + (deliveries.attempting ?? 0)],
      ["Deliveries failed", deliveries.failed ?? 0], ["Abandoned", deliveries.abandoned ?? 0],
      ["Memory (PSS)", memory.pss_bytes ? `${mib(memory.pss_bytes)} in ${memory.processes} processes` : "-"],
      ["Actors", `${s.actors_up} up, ${s.actors_restarting} restarting, ${s.actors_failed} failed`],
      ["Live sessions", s.sessions_live], ["Draining", s.draining ? "yes" : "no"]];
    numbers.replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]));
    charts.replaceChildren(
      chart("chart-turns", "Turns per minute", recent, [{ key: "turns", label: "now", className: "a" }]),
      chart("chart-failed", "Failed turns per minute", recent, [{ key: "failed", label: "now", className: "bad" }]),
      chart("chart-latency", "Reply latency", recent, [{ key: "p50", label: "p50", className: "a" },
                                                       { key: "p99", label: "p99", className: "b" }], "s"),
      chart("chart-restarts", "Restarts per minute", recent, [{ key: "restarts", label: "now", className: "b" }]));
    if (!s.metrics) charts.append(el("p", {}, "The metrics actor is off ([metrics] enabled = false): no charts."));
    adapters.replaceChildren(el("h2", {}, "Adapters"), adapterTable(d.adapters || []));
    const known = new Set(["actors", "pending_work", "fixed_tree_restarting", "adapters", "shards", "config", "recovery"]);
    const parts = Object.entries(d).filter(([k]) => !known.has(k));
    other.replaceChildren(el("h2", {}, "Components"), parts.length ? el("dl", { class: "facts" },
      parts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v))]))
      : el("p", {}, "No other components report."));
  });
}

function adapterTable(rows, actions = false) {
  // With actions (the adapters page): messages in/out of the adapter's life, and what `adapters ACTION NAME` does.
  const controls = (a) => a.state === "paused"
    ? [actionButton("Resume", "adapters.resume", { adapter: a.name })]
    : [actionButton("Pause", "adapters.pause", { adapter: a.name }),
       actionButton("Reconnect", "adapters.reconnect", { adapter: a.name })];
  const live = (a) => !["restarting", "failed", "stopped"].includes(a.state);
  return table(["Adapter", "Kind", "State", "Since", "Error", ...(actions ? ["In", "Out", "Actions"] : [])],
    rows.map((a) => el("tr", { dataset: { adapter: a.name } },
      el("td", {}, a.name), el("td", {}, a.kind), el("td", {}, el("span", { class: `state ${a.state}` }, a.state)),
      el("td", {}, a.since ? `${ago(a.since)} ago` : "-"),
      el("td", {}, a.error || a.last_restart || (a.paused_by ? `paused by ${a.paused_by}` : "")),
      ...(actions ? [el("td", { class: "messages-in" }, a.messages_in ?? "-"),
                     el("td", { class: "messages-out" }, a.messages_out ?? "-"),
                     el("td", {}, ...(live(a) ? controls(a) : []))] : []))));
}

// ----------------------------------------------------------------------------------------------------- tree
function tree(page) {
  const seen = new Map();      // node path -> {pid, restarts}: what the previous snapshot said
  const flashes = new Map();   // node path -> how many times it flashed
  let selected = "";
  let latest = null;
  const summary = el("p", { id: "tree-summary" });
  const drawing = el("div", { class: "tree-drawing", id: "tree" });
  const facts = el("aside", { class: "card facts-panel", id: "facts", hidden: true });
  page.append(summary, el("div", { class: "tree-layout" }, drawing, facts));

  function showFacts() {
    const n = latest && find(latest.root, "", selected);
    if (!n) { facts.hidden = true; return; }
    const rows = [["Kind", n.kind], ["Name", n.name], ["State", n.state], ["Pid", n.pid || "-"],
      ["Uptime", duration(n.uptime_s)], ["Started", when(n.started_at)], ["Restarts", n.restarts],
      ["Pending", n.pending], ["Last crash", n.last_exit || "-"], ...Object.entries(n.facts)];
    facts.hidden = false;
    facts.replaceChildren(el("h2", {}, `${n.kind} ${n.name}`),
      el("dl", { class: "facts" }, rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])),
      el("button", { type: "button", onclick: () => { selected = ""; facts.hidden = true; } }, "Close"));
  }

  function draw(n, path) {
    const key = `${path}/${n.name}`;
    const before = seen.get(key);
    if (before && (n.restarts > before.restarts || (n.pid && before.pid && n.pid !== before.pid))) {
      flashes.set(key, (flashes.get(key) || 0) + 1);
    }
    seen.set(key, { pid: n.pid, restarts: n.restarts });
    const flashed = flashes.get(key) || 0;
    const button = el("button", {
      type: "button", class: `node state-${n.state}${flashed ? ` flash flash-${flashed % 2}` : ""}`,
      "aria-pressed": key === selected ? "true" : "false",
      dataset: { path: key, name: n.name, kind: n.kind, state: n.state, pid: n.pid, restarts: n.restarts, flashed },
      onclick: () => { selected = key; showFacts(); },
    }, el("span", { class: "label" }, n.name),
      n.kind.toLowerCase() === n.name.toLowerCase() ? null : el("span", { class: "kind" }, n.kind),
      el("span", { class: "state" }, n.state),
      el("span", { class: "meta" }, `pid ${n.pid || "-"} · up ${duration(n.uptime_s)}` +
        (n.restarts ? ` · ${n.restarts} restart${n.restarts > 1 ? "s" : ""}` : "") +
        (n.facts.cells !== undefined ? ` · ${n.facts.cells} cells` : "")),
      n.last_exit ? el("span", { class: "crash" }, `last crash: ${n.last_exit}`) : null);
    const kids = n.children.map((c) => draw(c, key));
    if (n.hidden) kids.push(el("li", { class: "hidden-cells" }, n.hidden));
    return el("li", {}, button, kids.length ? el("ul", {}, kids) : null);
  }

  follow("tree", (view) => {
    latest = view;
    const c = view.counts;
    summary.textContent = `${c.actors} actors: ${c.up} up, ${c.restarting} restarting, ${c.failed} failed`;
    drawing.replaceChildren(el("ul", { class: "tree" }, draw(view.root, "")));
    if (selected) showFacts();
  });
}

function find(n, path, key) {
  const here = `${path}/${n.name}`;
  if (here === key) return n;
  for (const c of n.children) {
    const found = find(c, here, key);
    if (found) return found;
  }
  return null;
}

// ------------------------------------------------------------------------------------------------- adapters
function adapters(page) {
  const body = el("section", { class: "card", id: "adapters" });
  const pacing = el("section", { class: "card", id: "pacing" });
  page.append(body, pacing);
  follow("status", (s) => {
    body.replaceChildren(el("h2", {}, "Connections"), adapterTable((s.detail || {}).adapters || [], true));
    const rows = Object.entries(s.platforms || {});
    pacing.replaceChildren(el("h2", {}, "Turns and pacing, since the metrics actor started"), rows.length
      ? table(["Platform", "Turns", "Rate limits (429) waited", "Seconds held"], rows.map(([p, v]) => el("tr", {},
        el("td", {}, p), el("td", {}, v.turns), el("td", {}, v.rate_limit_waits), el("td", {}, v.seconds_waited))))
      : el("p", {}, s.metrics ? "No turns yet." : "The metrics actor is off ([metrics] enabled = false)."));
  });
}

// ---------------------------------------------------------------------------------------------------- chats
async function chats(page, rest) {
  markStatic();
  if (rest.length) return transcript(page, rest[0]);
  const form = el("form", { class: "search", role: "search" },
    el("label", { for: "q" }, "Search transcripts"), el("input", { id: "q", name: "q", type: "search", maxlength: 200 }),
    el("button", { type: "submit" }, "Search"));
  const list = el("section", { class: "card", id: "sessions" });
  const kept = el("section", { class: "card", id: "kept-tasks", hidden: true });
  page.append(form, list, kept);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = form.q.value.trim();
    if (!q) return load();
    const found = await api(`/api/search?q=${encodeURIComponent(q)}`).catch((e) => problem(e.message));
    if (!found) return;
    list.replaceChildren(el("h2", {}, `Found: ${found.hits.length}`), table(["Session", "Event", "Text"],
      found.hits.map((h) => el("tr", {}, el("td", {}, el("a", { href: `/chats/${encodeURIComponent(h.session_id)}` },
        h.session_key)), el("td", {}, `#${h.seq} ${h.role}`), el("td", {}, h.snippet)))));
  });
  async function load() {
    const data = await api("/api/sessions?limit=100");
    list.replaceChildren(el("h2", {}, "Sessions"), table(["Session", "State", "Updated", "Title"],
      data.sessions.map((s) => el("tr", { dataset: { session: s.session_id } },
        el("td", {}, el("a", { href: `/chats/${encodeURIComponent(s.session_id)}` }, s.session_key)),
        el("td", {}, s.state), el("td", {}, when(s.updated_at)), el("td", {}, s.title || "")))));
  }
  await load();
  // Delegation records: results of background tasks that ended after their chat was reset, kept from the chat.
  const records = await api("/api/tasks?state=kept&limit=50");
  kept.hidden = !records.tasks.length;
  kept.replaceChildren(el("h2", {}, "Kept task results"), taskList(records.tasks, true));
}

// A chat's background tasks (or the kept ones of every chat): each with its state, its result behind a click.
function taskList(tasks, withChat = false) {
  return el("ul", { class: "tasks" }, tasks.map((t) => el("li", { class: `task ${t.state}`, dataset: { task: t.task_key } },
    el("details", {},
      el("summary", {}, `#${t.number} `, el("span", { class: `state ${t.state}` }, t.state), ` · ${when(t.started_at)} · `,
        withChat ? el("a", { href: `/chats/${encodeURIComponent(t.chat)}` }, t.chat) : t.prompt.slice(0, 80)),
      el("p", { class: "prompt" }, `Prompt: ${t.prompt}`),
      t.state === "kept" ? el("p", {}, "Finished after the chat's conversation was reset: kept here, not delivered.") : null,
      t.result === null ? el("p", {}, "No result yet.") : el("pre", { class: "text result" }, t.result)))));
}

async function transcript(page, id) {
  const data = await api(`/api/transcript?session=${encodeURIComponent(id)}&limit=200`);
  const s = data.session;
  const actions = el("p", { class: "actions" },
    actionButton("Suspend", "sessions.suspend", { session: s.session_id }, () => location.reload()),
    actionButton("Resume", "sessions.resume", { session: s.session_id }, () => location.reload()),
    actionButton("Stop the turn", "sessions.stop", { session: s.session_id }),
    actionButton("Reset", "sessions.reset", { session: s.session_id }, () => location.reload()),
    el("button", { type: "button", id: "export", onclick: () => exportJson(data) }, "Export (JSON)"));
  page.append(el("section", { class: "card" }, el("h2", {}, s.session_key),
    el("p", {}, `${s.state} · ${s.session_id}${s.title ? ` · ${s.title}` : ""}`), actions),
    el("ol", { class: "transcript", id: "transcript" }, (data.events || []).map(eventItem)));
  if ((data.tasks || []).length) {
    const tasks = await api(`/api/tasks?session=${encodeURIComponent(s.session_id)}`);
    page.append(el("section", { class: "card", id: "tasks" }, el("h2", {}, "Background tasks"), taskList(tasks.tasks)));
  }
}

// One event of a transcript: a message's text, a tool call with its arguments, a tool's result.
function eventItem(e) {
  const p = e.payload && typeof e.payload === "object" ? e.payload : { text: e.payload };
  const body = [];
  if (p.name) body.push(el("p", { class: "tool" }, `⚙ ${p.name}`));
  if (p.arguments !== undefined) {
    body.push(el("pre", { class: "args" }, typeof p.arguments === "string" ? p.arguments : JSON.stringify(p.arguments, null, 1)));
  }
  const text = p.text ?? p.result ?? (p.name ? null : JSON.stringify(p));
  if (text !== null && text !== undefined) body.push(el("pre", { class: "text" }, String(text)));
  for (const file of p.attachments || []) {
    const label = `📎 ${file.name || file.kind || "file"}${file.mime ? ` (${file.mime})` : ""}`;
    if (!file.cache_key) body.push(el("p", { class: "file" }, `${label}: ${file.state || "not kept"}`));
    else if (file.kind === "photo") {
      body.push(el("a", { href: `/api/media/${file.cache_key}`, class: "file", target: "_blank", rel: "noopener" },
        el("img", { src: `/api/media/${file.cache_key}`, alt: file.name || "photo", class: "thumb", loading: "lazy" })));
    } else body.push(el("p", { class: "file" }, el("a", { href: `/api/media/${file.cache_key}` }, label)));
  }
  return el("li", { class: `event ${e.role} ${e.kind}`, dataset: { seq: e.seq } },
    el("span", { class: "who" }, `${e.role} · ${e.kind}`), el("span", { class: "when" }, when(e.created_at)), body);
}

function exportJson(data) {
  const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
  const link = el("a", { href: URL.createObjectURL(blob), download: `session-${data.session.session_id.slice(0, 12)}.json` });
  link.click();
}

// ----------------------------------------------------------------------------------------------- deliveries
async function deliveries(page) {
  markStatic();
  const filter = el("select", { id: "state", "aria-label": "State" },
    ["", "pending", "attempting", "failed", "abandoned", "delivered"].map((s) => el("option", { value: s }, s || "all")));
  const body = el("section", { class: "card", id: "deliveries" });
  page.append(el("p", {}, filter), body);
  async function load() {
    const data = await api(`/api/deliveries?limit=100${filter.value ? `&state=${filter.value}` : ""}`);
    const counts = Object.entries(data.counts || {}).map(([k, v]) => `${k} ${v}`).join(" · ");
    body.replaceChildren(el("h2", {}, "Deliveries"), el("p", {}, counts || "none"),
      table(["Id", "State", "Chat", "Attempts", "Reason", "Reply", ""], data.deliveries.map((d) =>
        el("tr", { dataset: { obligation: d.obligation_id, state: d.state } },
          el("td", {}, el("code", { title: d.obligation_id }, d.obligation_id.slice(0, 16))), el("td", {}, d.state),
          el("td", {}, `${d.target.platform}:${d.target.chat_id}`), el("td", {}, d.attempts),
          el("td", {}, [d.last_error || "", d.ambiguous ? " (outcome unknown: a copy may be in the chat)" : ""].join("")),
          el("td", {}, d.content_preview || ""),
          el("td", {}, ["failed", "abandoned"].includes(d.state) ? actionButton("Retry", "deliveries.retry", { id: d.obligation_id }, load) : null,
            ["pending", "failed"].includes(d.state) ? actionButton("Abandon", "deliveries.abandon", { id: d.obligation_id }, load) : null)))));
  }
  filter.addEventListener("change", () => load().catch((e) => problem(e.message)));
  await load();
}

// -------------------------------------------------------------------------------------------------- pairing
async function pairing(page) {
  markStatic();
  const body = el("section", { class: "card", id: "pairing" });
  page.append(body);
  async function load() {
    const data = await api("/api/pairing");
    body.replaceChildren(el("h2", {}, "Pending codes"),
      data.pending.length ? table(["Code", "Who", "Expires in", ""], data.pending.map((c) =>
        el("tr", { dataset: { code: c.code } }, el("td", {}, el("code", {}, c.code)),
          el("td", {}, `${c.adapter}:${c.user_id}${c.user_name ? ` (${c.user_name})` : ""}`),
          el("td", {}, duration(c.expires_in_s)),
          el("td", {}, actionButton("Approve", "pairing.approve", { code: c.code }, load),
            actionButton("Deny", "pairing.deny", { code: c.code }, load))))) : el("p", {}, "No pending codes."),
      el("h2", {}, "Granted"),
      data.grants.length ? table(["Who", "By", "When"], data.grants.map((g) => el("tr", {},
        el("td", {}, `${g.adapter}:${g.user_id}${g.user_name ? ` (${g.user_name})` : ""}`), el("td", {}, g.granted_by),
        el("td", {}, when(g.granted_at))))) : el("p", {}, "No grants."));
  }
  await load();
}

// ----------------------------------------------------------------------------------------------------- cron
async function cron(page) {
  markStatic();
  const body = el("section", { class: "card", id: "cron" });
  page.append(body);
  async function load() {
    const data = await api("/api/cron");
    body.replaceChildren(el("h2", {}, "Jobs"), data.jobs.length ? table(["Job", "Schedule", "Target", "Next run", "Last runs", ""],
      data.jobs.map((j) => el("tr", { dataset: { job: j.job } }, el("td", {}, j.job), el("td", {}, `${j.schedule} (${j.timezone})`),
        el("td", {}, `${j.adapter}:${j.chat}`),
        el("td", {}, !j.enabled ? "disabled" : j.paused ? "paused" : when(j.next_at)),
        el("td", {}, j.runs.length ? el("ul", { class: "runs" }, j.runs.map((r) => el("li", {},
          `${when(r.scheduled_at)} ${r.origin}: ${r.outcome === "skipped" ? `skipped (${r.reason || ""})` : r.inbox_state || "pruned"}`)))
          : "none yet"),
        el("td", {}, actionButton("Run now", "cron.run", { job: j.job }, load)))))
      : el("p", {}, "No jobs: add [cron.NAME] tables to the configuration (docs/cron.md)."));
  }
  await load();
}

// ----------------------------------------------------------------------------------------------------- logs
async function logs(page) {
  // The tail once, then the new lines as the gateway writes them (server-sent events), both filtered on the
  // gateway's side; the page keeps at most LOG_LINES_KEPT lines.
  const LOG_LINES_KEPT = 300;
  const level = el("select", { id: "level", "aria-label": "Level and above" },
    ["", "DEBUG", "INFO", "WARNING", "ERROR"].map((l) => el("option", { value: l }, l ? `${l} and above` : "every level")));
  const actor = el("input", { id: "actor", type: "search", placeholder: "actor (Console, TelegramAdapter…)", "aria-label": "Actor", maxlength: 200 });
  const words = el("input", { id: "words", type: "search", placeholder: "words", "aria-label": "Words", maxlength: 200 });
  const out = el("pre", { class: "log", id: "log" });
  const live = document.getElementById("live");
  page.append(el("p", { class: "filters" }, level, actor, words), out);
  let lines = [];
  let source = null;
  function show(more) {
    const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 8;
    lines = lines.concat(more).slice(-LOG_LINES_KEPT);
    out.textContent = lines.join("\n");
    if (atEnd) out.scrollTop = out.scrollHeight;
  }
  async function load() {
    const q = new URLSearchParams();
    if (level.value) q.set("level", level.value);
    if (actor.value) q.set("actor", actor.value);
    if (words.value) q.set("q", words.value);
    if (source) { source.close(); source = null; live.dataset.connected = "no"; }
    const data = await api(`/api/logs?${q}`);
    lines = [];
    if (data.error) { out.textContent = data.error; return; }
    show(data.lines);
    q.set("topic", "logs");
    q.set("from", data.position);   // where the tail ended: a line written meanwhile comes by the stream
    source = new EventSource(`/api/stream?${q}`);
    source.onopen = () => { live.dataset.connected = "yes"; live.textContent = "Live"; };
    source.onerror = () => { live.dataset.connected = "no"; live.textContent = "Reconnecting…"; };
    source.onmessage = (event) => {
      const d = JSON.parse(event.data);
      show((d.skipped ? [`… ${d.skipped} bytes of log skipped (written faster than shown)`] : []).concat(d.lines));
    };
  }
  const reload = () => load().catch((e) => problem(e.message));
  level.addEventListener("change", reload);
  actor.addEventListener("change", reload);
  words.addEventListener("change", reload);
  await load();
  window.addEventListener("pagehide", () => source && source.close());
}

export const PAGES = { overview, tree, adapters, chats, deliveries, pairing, cron, logs };
