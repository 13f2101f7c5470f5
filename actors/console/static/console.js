// The console's shell: which page the path names, the API, the live streams, and the small DOM helpers the
// pages share (pages.js). No framework and no build step; every string from the gateway goes in as text.
import { PAGES } from "./pages.js";

const session = { csrf: "", allowActions: false, who: "" };

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor(s % 3600 / 60)).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor(s % 86400 / 3600)).padStart(2, "0")}h`;
}

export function ago(ts) {
  return duration(Date.now() / 1000 - ts);
}

export function when(ts) {
  return ts ? new Date(ts * 1000).toLocaleString() : "-";
}

export function problem(text) {
  const p = document.getElementById("problem");
  p.textContent = text || "";
  p.hidden = !text;
}

export async function api(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

export function actionsAllowed() {
  return session.allowActions;
}

export async function act(name, args) {
  // Every action carries this page's CSRF token; a gateway restarted since the page loaded issues a new one.
  for (let attempt = 0; attempt < 2; attempt++) {
    const response = await fetch(`/api/actions/${name}`, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Console-CSRF": session.csrf },
      body: JSON.stringify(args),
    });
    const body = await response.json().catch(() => ({ error: response.statusText }));
    if (response.ok) return body;
    if (response.status === 403 && attempt === 0 && /CSRF/.test(body.error || "")) {
      await loadSession();
      continue;
    }
    throw new Error(body.error || `HTTP ${response.status}`);
  }
}

export function actionButton(label, name, args, done) {
  const button = el("button", { type: "button", class: "action", "data-action": name, disabled: !session.allowActions,
                                title: session.allowActions ? "" : "read-only: [console] allow_actions = false" }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await act(name, args);
      problem("");
      if (done) await done();
    } catch (error) {
      problem(`${label}: ${error.message}`);
    } finally {
      button.disabled = !session.allowActions;
    }
  });
  return button;
}

export function follow(topic, onData) {
  const live = document.getElementById("live");
  const source = new EventSource(`/api/stream?topic=${encodeURIComponent(topic)}`);
  source.onopen = () => { live.dataset.connected = "yes"; live.textContent = "Live"; };
  source.onerror = () => { live.dataset.connected = "no"; live.textContent = "Reconnecting…"; };
  source.onmessage = (event) => onData(JSON.parse(event.data));
  window.addEventListener("pagehide", () => source.close());
  return source;
}

export function markStatic() {
  const live = document.getElementById("live");
  live.dataset.connected = "yes";
  live.textContent = "";
}

// A table that, on a phone, stacks each row as a card with each cell under its column's name (console.css).
export function table(headers, rows) {
  for (const row of rows) {
    Array.from(row.children).forEach((cell, i) => { if (headers[i]) cell.dataset.label = headers[i]; });
  }
  return el("div", { class: "scroll" },
    el("table", { class: "stack" }, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)));
}

async function loadSession() {
  const info = await api("/api/session");
  session.csrf = info.csrf;
  session.allowActions = info.allow_actions;
  session.who = info.who;
  document.getElementById("mode").textContent =
    `${info.allow_actions ? "Actions allowed" : "Read-only"} · you are ${info.who}`;
}

async function main() {
  const parts = location.pathname.split("/").filter(Boolean);
  const name = parts[0] || "overview";
  const page = document.getElementById("page");
  page.dataset.page = name;
  document.title = `${name[0].toUpperCase()}${name.slice(1)} · Gateway console`;
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.page === name) link.setAttribute("aria-current", "page");
  }
  try {
    await loadSession();
    await (PAGES[name] || PAGES.overview)(page, parts.slice(1).map(decodeURIComponent));
  } catch (error) {
    problem(error.message);
  }
  page.dataset.ready = "yes";
}

main();
