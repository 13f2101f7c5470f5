// The web chat page: one WebSocket to the gateway (protocol in actors/adapters/webchat/protocol.py).
// Survives reloads and gateway restarts: who the visitor is lives in the cookie the server set with this page
// (HttpOnly: this script never sees it), the messages not yet acknowledged in localStorage, and the conversation
// itself comes back from the server's history on every (re)connect.
//
// Stop and New chat are the gateway's own commands, sent as messages (/stop, /new): the page shows them as the
// buttons' effect, not as messages. After New chat, everything of the previous conversation still arriving (the
// answer the /new interrupted) is left out until the answer to the /new itself arrives (its reply_to).
import { addMessage, botMessage, handleCopyClicks, rawText, setAnswer, setNote, showFiles, userMessage }
  from "./messages.js";
import { onEarlierFrame, setupEarlier } from "./conversations.js";
import { setupThemeToggle, showWelcome } from "./looks.js";
import { offerRetry, settleChoices, showKind } from "./messages.js";

const UNACKED_KEY = "agent-gateway.unacked";
const NEW_CHAT_KEY = "agent-gateway.new-chat";   // the id of a /new whose answer has not arrived yet
const CONTROLS = { "/stop": "stop", "/new": "new", "/reset": "new", "/retry": "retry" };
const RETRY_SEND_MS = 2000;
const TYPING_SHOWN_MS = 4000;

const log = document.getElementById("messages");
const status = document.getElementById("status");
const typing = document.getElementById("typing");
const problem = document.getElementById("problem");
const form = document.getElementById("composer");
const input = document.getElementById("input");
const stopButton = document.getElementById("stop");
const newButton = document.getElementById("new-chat");
const attachInput = document.getElementById("attach");
const attachButton = document.getElementById("attach-button");
const attachedList = document.getElementById("attached");
const hint = document.getElementById("hint");
const HINT = hint.textContent;

const unacked = loadUnacked();                // client message id -> {text, files}, in send order
let attached = [];                            // uploaded, not sent yet: {file, name, kind}
let uploading = 0;
const awaiting = new Map();                   // acknowledged message id -> true, until its answer starts
const answered = new Set();                   // ids whose answer started (an answer can beat its message's ack)
const dropped = new Set();                    // answer ids of a conversation the visitor left with New chat
let pendingNew = localStorage.getItem(NEW_CHAT_KEY);
let stopping = null;                          // the id of a /stop sent while an answer ran, until that answer ends
let stopped = false;                          // the last answer was stopped (shown until the next message)
let socket = null;
let everConnected = false;
let reconnectAt = 0;
let failures = 0;
let awaitingHistory = false;
let opsDuringHistory = [];
let typingTimer = null;
let maxTextChars = 0;                         // [gateway] max_text_chars, from the hello frame (0: not told yet)

function randomId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function loadUnacked() {
  try {
    const saved = JSON.parse(localStorage.getItem(UNACKED_KEY) || "[]");
    // An entry is [id, {text, files}] ([id, text] from a page of an earlier version).
    return new Map(saved.filter((e) => Array.isArray(e) && e.length === 2)
      .map(([id, v]) => [id, typeof v === "string" ? { text: v, files: [] } : v]));
  } catch (_) {
    return new Map();
  }
}

function saveUnacked() {
  localStorage.setItem(UNACKED_KEY, JSON.stringify(Array.from(unacked)));
}

function controlOf(text) {
  return CONTROLS[String(text).trim().toLowerCase()] || null;
}

// ----------------------------------------------------------------------------------------------------- state
function atBottom() {
  const main = log.parentElement;
  return main.scrollHeight - main.scrollTop - main.clientHeight < 80;
}

function keepScrolled(wasAtBottom) {
  if (wasAtBottom) log.parentElement.scrollTop = log.parentElement.scrollHeight;
}

function showProblem(text) {
  problem.textContent = text;
  problem.hidden = !text;
}

function showTyping(on) {
  clearTimeout(typingTimer);
  typing.hidden = !on;
  if (on) typingTimer = setTimeout(() => { typing.hidden = true; showState(); }, TYPING_SHOWN_MS);
}

function answerInProgress() {
  return awaiting.size > 0 || !typing.hidden || log.querySelector(".message.assistant.streaming") !== null;
}

// One line says what the chat is doing: connecting, answering, interrupted (stopped, or the connection lost), idle.
function showState() {
  const connected = socket !== null && socket.readyState === WebSocket.OPEN && !awaitingHistory;
  let state = "idle", reason = "", text = "Ready";
  if (!connected && !everConnected) {
    [state, text] = ["connecting", "Connecting…"];
  } else if (!connected) {
    const seconds = Math.ceil((reconnectAt - Date.now()) / 1000);
    [state, reason] = ["interrupted", "lost"];
    text = socket === null && seconds > 0 ? `Connection lost, reconnecting in ${seconds} s…`
      : "Connection lost, reconnecting…";
  } else if (pendingNew) {
    [state, text] = ["answering", "Starting a new conversation…"];
  } else if (stopping) {
    [state, text] = ["answering", "Stopping…"];
  } else if (answerInProgress()) {
    [state, text] = ["answering", "Answering…"];
  } else if (stopped) {
    [state, reason, text] = ["interrupted", "stopped", "Stopped"];
  }
  status.dataset.state = state;
  status.dataset.reason = reason;
  status.dataset.connected = connected ? "yes" : "no";
  status.textContent = text;
  stopButton.disabled = !(state === "answering" && !pendingNew && !stopping);
  newButton.disabled = Boolean(pendingNew);
}

function answerStarted(replyTo) {
  answered.add(replyTo);
  if (!awaiting.has(replyTo)) return;   // e.g. the answer to a command, or to a message of an earlier visit
  for (const id of Array.from(awaiting.keys())) {   // in send order: an answer to one covers those before it
    awaiting.delete(id);
    if (id === replyTo) break;
  }
  if (answered.size > 500) answered.delete(answered.values().next().value);
}

function newChatDone() {
  pendingNew = null;
  localStorage.removeItem(NEW_CHAT_KEY);
}

// -------------------------------------------------------------------------------------------- server frames
function renderHistory(frame) {
  const messages = frame.messages || [];
  const ids = new Set(messages.map((m) => m.id).filter(Boolean));
  // A /new neither waiting nor unsent was carried out: this history is the new conversation's already.
  if (pendingNew && !unacked.has(pendingNew) && !ids.has(pendingNew)) newChatDone();
  log.replaceChildren();
  awaiting.clear();
  for (const m of pendingNew ? [] : messages) {
    if (m.role === "user") {
      if (controlOf(m.text)) continue;
      const item = addMessage(log, "user", m.text || "", m.id ? { clientId: m.id } : {});
      showFiles(item, m.files || []);
      if (m.queued) {
        setNote(item, "waiting for its turn");
        if (m.id) awaiting.set(m.id, true);
      }
    } else {
      const item = addMessage(log, "assistant", "");
      setAnswer(item, m, true);
      showKind(item, m.kind);
    }
  }
  for (const m of frame.live || []) {
    if (pendingNew) {
      dropped.add(m.message_id);
      continue;
    }
    const item = addMessage(log, "assistant", "", { id: m.message_id });
    setAnswer(item, m, false);
  }
  for (const [id, entry] of unacked) {
    if (ids.has(id)) {
      unacked.delete(id);  // it reached the inbox; only its acknowledgement was lost
    } else if (!controlOf(entry.text)) {
      const item = addMessage(log, "user", entry.text, { clientId: id });
      showFiles(item, entry.files || []);
      setNote(item, "sending…");
    }
  }
  saveUnacked();
  offerRetry(log);
  keepScrolled(true);
}

function applyOp(op) {
  const wasAtBottom = atBottom();
  if (op.action === "typing") {
    if (!pendingNew) showTyping(true);
    return;
  }
  if (dropped.has(op.message_id)) return;
  let item = op.message_id ? botMessage(log, op.message_id) : null;
  if (pendingNew && !item) {
    if (op.action !== "send" || op.reply_to !== pendingNew) {   // the previous conversation's, still arriving
      if (op.message_id) dropped.add(op.message_id);
      return;
    }
    newChatDone();
  }
  if (op.action === "delete") {
    if (item) item.remove();
    return;
  }
  showTyping(false);
  if (op.reply_to) answerStarted(op.reply_to);
  if (!item && op.final) item = adoptFromHistory(op);
  if (!item) {
    item = addMessage(log, "assistant", "", { id: op.message_id });
    stopped = false;   // a new answer: the stopped one is history
  }
  setAnswer(item, op, op.final);
  if (op.final) showKind(item, op.kind);
  offerRetry(log);
  if (op.final && stopping) {
    stopped = op.reply_to !== stopping;   // the answer to the /stop itself says nothing was running
    stopping = null;
  }
  keepScrolled(wasAtBottom);
}

// A final answer can reach the transcript (and so the history) a moment before its last operation reaches the
// page: the history's copy then takes the operation's id instead of the answer being shown twice.
function adoptFromHistory(op) {
  const candidates = Array.from(log.querySelectorAll(".message.assistant")).filter((m) => !m.dataset.id);
  const match = candidates.reverse().find((m) => rawText(m) === op.text);
  if (match) match.dataset.id = op.message_id;
  return match || null;
}

function onFrame(frame) {
  switch (frame.type) {
    case "history":
      renderHistory(frame);
      awaitingHistory = false;
      everConnected = true;
      opsDuringHistory.splice(0).forEach(applyOp);
      flushUnacked();
      break;
    case "op":
      if (awaitingHistory && frame.action !== "typing") opsDuringHistory.push(frame);
      else applyOp(frame);
      break;
    case "ack":
      acknowledged(frame);
      break;
    case "press":
      pressAnswered(frame);
      break;
    case "settled":
      settleChoices(log, frame.approval, frame.line);
      break;
    case "error":
      onError(frame);
      break;
    case "hello":
      onHello(frame);
      showWelcome(document.getElementById("welcome"), frame);
      break;
    case "conversations":
    case "conversation":
      onEarlierFrame(frame);
      break;
    default:
      return;
  }
  showState();
}

function acknowledged(frame) {
  const entry = unacked.get(frame.id);
  unacked.delete(frame.id);
  saveUnacked();
  if (entry !== undefined && !controlOf(entry.text) && !frame.duplicate && !answered.has(frame.id)) {
    awaiting.set(frame.id, true);
  }
  const item = userMessage(log, frame.id);
  if (item) setNote(item, "");
}

function onError(frame) {
  const item = frame.id ? userMessage(log, frame.id) : null;
  if (frame.retry) {
    if (item) setNote(item, "not sent yet, retrying…");
    if (frame.id) setTimeout(() => sendUnacked(frame.id), RETRY_SEND_MS);
    else if (awaitingHistory) setTimeout(requestHistory, RETRY_SEND_MS);
    return;
  }
  if (frame.id && unacked.delete(frame.id)) saveUnacked();
  if (frame.id && frame.id === pendingNew) newChatDone();
  if (frame.id && frame.id === stopping) stopping = null;
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
  showState();
  ws.addEventListener("open", () => {
    failures = 0;
    showProblem("");
    requestHistory();
    showState();
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
    reconnectAt = Date.now() + delay;
    showState();
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
  const entry = unacked.get(id);
  if (!entry) return;
  const frame = { type: "message", id, text: entry.text };
  if (entry.files && entry.files.length) frame.files = entry.files.map((f) => f.file);
  sendFrame(frame);
}

function flushUnacked() {
  for (const id of unacked.keys()) sendUnacked(id);
}

// ------------------------------------------------------------------------------------------ composer, buttons
function queue(text, files = []) {
  const id = randomId();
  unacked.set(id, { text, files });
  saveUnacked();
  if (!awaitingHistory) sendUnacked(id);  // else it goes right after the history, in order
  return id;
}

function stopAnswer() {
  stopping = queue("/stop");
  stopped = false;
  showState();
}

function newChat() {
  if (pendingNew) return;
  for (const [id, entry] of Array.from(unacked)) {   // not sent yet: they belonged to the conversation left
    if (!controlOf(entry.text)) unacked.delete(id);
  }
  for (const item of log.querySelectorAll(".message.assistant")) if (item.dataset.id) dropped.add(item.dataset.id);
  log.replaceChildren();
  awaiting.clear();
  [stopping, stopped] = [null, false];
  showTyping(false);
  showProblem("");
  pendingNew = queue("/new");
  localStorage.setItem(NEW_CHAT_KEY, pendingNew);
  showState();
  input.focus();
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value;
  if (uploading) return showProblem("Wait for the files to finish uploading.");
  if (!text.trim() && !attached.length) return;
  const tooLong = overLimit(text);
  if (tooLong) return showProblem(tooLong);   // the text stays in the composer, to be sent in parts
  input.value = "";
  input.focus();
  const control = attached.length ? null : controlOf(text);
  if (control === "stop") return stopAnswer();
  if (control === "new") return newChat();
  if (control === "retry") return retryLast();
  stopped = false;
  const files = attached;
  attached = [];
  showAttached();
  const id = queue(text, files);
  const item = addMessage(log, "user", text, { clientId: id });
  showFiles(item, files);
  // A socket still connecting (a reconnect attempt while the gateway is down) is not a connection yet.
  const open = socket && socket.readyState === WebSocket.OPEN;
  setNote(item, open ? "sending…" : "will be sent when the connection is back");
  offerRetry(log);
  keepScrolled(true);
  showState();
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    form.requestSubmit();
  }
});

// ------------------------------------------------------------------------------------------------ text limit
// The composer takes any length (a maxlength would cut a paste without a word); a message over the gateway's limit
// is not sent: the visitor is told, as the gateway tells every platform's sender, and keeps the text. The gateway
// refuses it too (an error frame naming the message), for a page that was not told the limit.
function onHello(frame) {
  maxTextChars = Number.isInteger(frame.max_text_chars) && frame.max_text_chars > 0 ? frame.max_text_chars : 0;
  showLength();
}

function characters(text) {
  let count = 0;
  for (const _ of text) count += 1;   // code points, as the gateway counts them (an emoji is one, not two)
  return count;
}

function overLimit(text) {
  const length = maxTextChars ? characters(text) : 0;
  if (length <= maxTextChars) return "";
  return `Your message is ${length.toLocaleString("en")} characters long; the gateway takes at most `
    + `${maxTextChars.toLocaleString("en")} characters in one message, so it was not sent. Send it in shorter parts.`;
}

function showLength() {
  const over = maxTextChars > 0 && input.value.length > maxTextChars && overLimit(input.value) !== "";
  input.setAttribute("aria-invalid", over ? "true" : "false");
  const limit = maxTextChars.toLocaleString("en");
  hint.textContent = over ? `${characters(input.value).toLocaleString("en")} characters: over the limit of ${limit}.`
    : HINT;
  hint.classList.toggle("over", over);
}

input.addEventListener("input", showLength);

// ------------------------------------------------------------------------------------------------ attachments
// Each file is uploaded on its own as it is picked (POST upload): the message then names the uploads, so a resend
// after a reconnect sends their ids again, never the bytes.
async function upload(file) {
  const body = new FormData();
  body.append("file", file, file.name);
  uploading += 1;
  showAttached();
  try {
    const response = await fetch("upload", { method: "POST", body, credentials: "same-origin" });
    const answer = await response.json().catch(() => ({ error: `upload failed (${response.status})` }));
    if (!response.ok || !answer.file) throw new Error(answer.error || `upload failed (${response.status})`);
    attached.push({ file: answer.file, name: answer.name, kind: answer.kind });
    showProblem("");
  } catch (error) {
    showProblem(`${file.name}: ${error.message}`);
  } finally {
    uploading -= 1;
    showAttached();
  }
}

function showAttached() {
  attachedList.replaceChildren(...attached.map((f, index) => {
    const chip = document.createElement("li");
    chip.append(attachIcon(), f.name);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "✕";
    remove.setAttribute("aria-label", `Remove ${f.name}`);
    remove.addEventListener("click", () => { attached.splice(index, 1); showAttached(); });
    chip.append(remove);
    return chip;
  }));
  if (uploading) {
    const note = document.createElement("li");
    note.textContent = "uploading…";
    attachedList.append(note);
  }
}

// The paperclip of a chip: the page's own drawing (index.html), not a character an emoji font may lack.
function attachIcon() {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "icon");
  svg.setAttribute("aria-hidden", "true");
  const use = document.createElementNS("http://www.w3.org/2000/svg", "use");
  use.setAttribute("href", "#icon-attach");
  svg.append(use);
  return svg;
}

attachButton.addEventListener("click", () => attachInput.click());
attachInput.addEventListener("change", () => {
  for (const file of Array.from(attachInput.files || [])) upload(file);
  attachInput.value = "";
});
// Retry (the button on a failed answer, or /retry typed): the gateway answers the visitor's last message again, in
// place of the failed answer, which leaves the page as it leaves the conversation's history.
function retryLast() {
  const answers = log.querySelectorAll(".message.assistant");
  const failed = answers[answers.length - 1];
  if (failed && failed.classList.contains("error")) failed.remove();
  stopped = false;
  showProblem("");
  awaiting.set(queue("/retry"), true);   // answered with its own id as reply_to, like a message
  showState();
}

// A press of a question's button (protocol.py): its row disabled until the gateway answers; the notice shown when
// the press was not kept (already answered, expired); the buttons go when the question is settled.
const presses = new Map();   // press id -> the row of buttons pressed

function press(button) {
  const row = button.closest(".choices");
  const id = randomId();
  if (!sendFrame({ type: "press", id, data: button.dataset.data })) {
    return showProblem("Not connected: press again once the chat is back.");
  }
  for (const b of row.querySelectorAll("button")) b.disabled = true;
  presses.set(id, row);
}

function pressAnswered(frame) {
  const row = presses.get(frame.id);
  presses.delete(frame.id);
  if (!row || frame.kept) return;
  setNote(row.closest(".message"), frame.notice || "");
}

log.addEventListener("click", (event) => {
  if (event.target.closest("button.retry")) retryLast();
  const choice = event.target.closest("button.choice");
  if (choice && !choice.disabled) press(choice);
});
stopButton.addEventListener("click", stopAnswer);
newButton.addEventListener("click", newChat);
handleCopyClicks(log);
handleCopyClicks(document.getElementById("earlier-log"));
setupEarlier(sendFrame, form);
setupThemeToggle(document.getElementById("theme"));
setInterval(() => { if (socket === null && everConnected) showState(); }, 1000);   // the reconnect countdown
input.focus();
connect();
