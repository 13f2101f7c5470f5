// The web chat page: one WebSocket to the gateway (protocol in actors/adapters/webchat/protocol.py).
// Survives reloads and gateway restarts: who the visitor is lives in the cookie the server set with this page
// (HttpOnly: this script never sees it), the messages not yet acknowledged in localStorage, and the conversation
// itself comes back from the server's history on every (re)connect.
"use strict";

const UNACKED_KEY = "agent-gateway.unacked";
const CURSOR = " ▍";                        // the gateway's streaming cursor; the page draws its own
const TOOL_LINE = /\n\n(⚙ [^\n]*)$/;         // tool progress the gateway appends to a streaming preview
const RETRY_SEND_MS = 2000;
const TYPING_SHOWN_MS = 4000;

const log = document.getElementById("messages");
const connection = document.getElementById("connection");
const typing = document.getElementById("typing");
const problem = document.getElementById("problem");
const form = document.getElementById("composer");
const input = document.getElementById("input");

const unacked = loadUnacked();                // client message id -> text, in send order
let socket = null;
let failures = 0;
let awaitingHistory = false;
let opsDuringHistory = [];
let typingTimer = null;

function randomId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function loadUnacked() {
  try {
    const saved = JSON.parse(localStorage.getItem(UNACKED_KEY) || "[]");
    return new Map(saved.filter((e) => Array.isArray(e) && e.length === 2));
  } catch (_) {
    return new Map();
  }
}

function saveUnacked() {
  localStorage.setItem(UNACKED_KEY, JSON.stringify(Array.from(unacked)));
}

// ------------------------------------------------------------------------------------------------ rendering
function atBottom() {
  const main = log.parentElement;
  return main.scrollHeight - main.scrollTop - main.clientHeight < 80;
}

function keepScrolled(wasAtBottom) {
  if (wasAtBottom) log.parentElement.scrollTop = log.parentElement.scrollHeight;
}

function addMessage(role, text, attributes = {}) {
  const item = document.createElement("li");
  item.className = `message ${role}`;
  const who = document.createElement("span");
  who.className = "visually-hidden";  // read out by screen readers, the bubble's side shows it to the eye
  who.textContent = role === "user" ? "You: " : "Agent: ";
  const body = document.createElement("span");
  body.className = "text";
  item.append(who, body);
  for (const [key, value] of Object.entries(attributes)) item.dataset[key] = value;
  setText(item, text, true);
  log.append(item);
  return item;
}

function setText(item, text, final) {
  const fromAgent = item.classList.contains("assistant");
  let shown = fromAgent && text.endsWith(CURSOR) ? text.slice(0, -CURSOR.length) : text;
  let tool = "";
  const match = fromAgent && !final ? shown.match(TOOL_LINE) : null;
  if (match) {
    tool = match[1];
    shown = shown.slice(0, match.index);
  }
  item.querySelector(".text").textContent = shown;
  let toolLine = item.querySelector(".tool");
  if (tool) {
    if (!toolLine) {
      toolLine = document.createElement("span");
      toolLine.className = "tool";
      item.append(toolLine);
    }
    toolLine.textContent = tool;
  } else if (toolLine) {
    toolLine.remove();
  }
  item.classList.toggle("streaming", !final);
  item.dataset.final = final ? "yes" : "no";
}

function setNote(item, note) {
  let span = item.querySelector(".note");
  if (!note) {
    if (span) span.remove();
    return;
  }
  if (!span) {
    span = document.createElement("span");
    span.className = "note";
    item.append(span);
  }
  span.textContent = note;
}

function botMessage(messageId) {
  return Array.from(log.querySelectorAll(".message.assistant")).find((m) => m.dataset.id === messageId);
}

function userMessage(clientId) {
  return Array.from(log.querySelectorAll(".message.user")).find((m) => m.dataset.clientId === clientId);
}

function showProblem(text) {
  problem.textContent = text;
  problem.hidden = !text;
}

function showTyping(on) {
  clearTimeout(typingTimer);
  typing.hidden = !on;
  if (on) typingTimer = setTimeout(() => { typing.hidden = true; }, TYPING_SHOWN_MS);
}

function setConnection(state, text) {
  connection.dataset.state = state;
  connection.textContent = text;
}

// -------------------------------------------------------------------------------------------- server frames
function renderHistory(frame) {
  log.replaceChildren();
  const known = new Set();
  for (const m of frame.messages || []) {
    const item = addMessage(m.role === "user" ? "user" : "assistant", m.text || "");
    if (m.id) {
      item.dataset.clientId = m.id;
      known.add(m.id);
    }
    if (m.queued) setNote(item, "waiting for its turn");
  }
  for (const m of frame.live || []) {
    const item = addMessage("assistant", m.text || "", { id: m.message_id });
    setText(item, m.text || "", false);
  }
  for (const [id, text] of unacked) {
    if (known.has(id)) {
      unacked.delete(id);  // it reached the inbox; only its acknowledgement was lost
    } else {
      setNote(addMessage("user", text, { clientId: id }), "sending…");
    }
  }
  saveUnacked();
  keepScrolled(true);
}

function applyOp(op) {
  const wasAtBottom = atBottom();
  if (op.action === "typing") {
    showTyping(true);
    return;
  }
  let item = op.message_id ? botMessage(op.message_id) : null;
  if (op.action === "delete") {
    if (item) item.remove();
    return;
  }
  showTyping(false);
  if (!item && op.final) item = adoptFromHistory(op);
  if (!item) item = addMessage("assistant", "", { id: op.message_id });
  setText(item, op.text || "", op.final);
  keepScrolled(wasAtBottom);
}

// A final answer can reach the transcript (and so the history) a moment before its last operation reaches the
// page: the history's copy then takes the operation's id instead of the answer being shown twice.
function adoptFromHistory(op) {
  const candidates = Array.from(log.querySelectorAll(".message.assistant")).filter((m) => !m.dataset.id);
  const match = candidates.reverse().find((m) => m.querySelector(".text").textContent === op.text);
  if (match) match.dataset.id = op.message_id;
  return match || null;
}

function onFrame(frame) {
  switch (frame.type) {
    case "hello":
      return;
    case "history":
      renderHistory(frame);
      awaitingHistory = false;
      opsDuringHistory.splice(0).forEach(applyOp);
      flushUnacked();
      return;
    case "op":
      if (awaitingHistory && frame.action !== "typing") opsDuringHistory.push(frame);
      else applyOp(frame);
      return;
    case "ack":
      acknowledged(frame.id);
      return;
    case "error":
      onError(frame);
      return;
    default:
      return;
  }
}

function acknowledged(id) {
  unacked.delete(id);
  saveUnacked();
  const item = userMessage(id);
  if (item) setNote(item, "");
}

function onError(frame) {
  const item = frame.id ? userMessage(frame.id) : null;
  if (frame.retry) {
    if (item) setNote(item, "not sent yet, retrying…");
    if (frame.id) setTimeout(() => sendUnacked(frame.id), RETRY_SEND_MS);
    else if (awaitingHistory) setTimeout(requestHistory, RETRY_SEND_MS);
    return;
  }
  if (frame.id && unacked.delete(frame.id)) saveUnacked();
  if (item) {
    item.classList.add("failed");
    setNote(item, `not sent: ${frame.error}`);
  }
  showProblem(`The gateway refused a message: ${frame.error}`);
}

// ------------------------------------------------------------------------------------------------ the socket
function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/ws`);
  socket = ws;
  ws.addEventListener("open", () => {
    failures = 0;
    setConnection("connected", "Connected");
    showProblem("");
    requestHistory();
  });
  ws.addEventListener("message", (event) => {
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch (_) {
      return;
    }
    onFrame(frame);
  });
  ws.addEventListener("close", () => {
    if (socket !== ws) return;
    socket = null;
    showTyping(false);
    failures += 1;
    // Backoff with jitter, capped: a restarting gateway is back within seconds; many tabs must not hammer it.
    const delay = Math.min(10000, 300 * 2 ** Math.min(failures - 1, 6)) * (0.5 + Math.random() / 2);
    setConnection("reconnecting", `Disconnected, reconnecting in ${Math.ceil(delay / 1000)} s…`);
    setTimeout(connect, delay);
  });
}

function sendFrame(frame) {
  if (!socket || socket.readyState !== WebSocket.OPEN) return false;
  socket.send(JSON.stringify(frame));
  return true;
}

function requestHistory() {
  awaitingHistory = true;
  opsDuringHistory = [];
  sendFrame({ type: "history" });
}

function sendUnacked(id) {
  if (unacked.has(id)) sendFrame({ type: "message", id, text: unacked.get(id) });
}

function flushUnacked() {
  for (const id of unacked.keys()) sendUnacked(id);
}

// ------------------------------------------------------------------------------------------------- composer
form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value;
  if (!text.trim()) return;
  const id = randomId();
  unacked.set(id, text);
  saveUnacked();
  const item = addMessage("user", text, { clientId: id });
  setNote(item, socket ? "sending…" : "will be sent when the connection is back");
  keepScrolled(true);
  input.value = "";
  input.focus();
  if (!awaitingHistory) sendUnacked(id);  // else it goes right after the history, in order
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    form.requestSubmit();
  }
});

input.focus();
connect();
