// The conversation's DOM: one list item per message. A visitor's own text is shown as typed (textContent); an
// answer is the HTML the gateway rendered and sanitised for it (actors/adapters/webchat/formatting.py), the only
// HTML this page ever places, plus a copy button per code block made here.

const raw = new WeakMap();   // answer item -> the gateway's text of it, to match a history entry with its operation

export function addMessage(log, role, text, attributes = {}) {
  const item = document.createElement("li");
  item.className = `message ${role}`;
  const who = document.createElement("span");
  who.className = "visually-hidden";  // read out by screen readers, the bubble's side shows it to the eye
  who.textContent = role === "user" ? "You: " : "Agent: ";
  const body = document.createElement(role === "user" ? "span" : "div");
  body.className = "text";
  item.append(who, body);
  for (const [key, value] of Object.entries(attributes)) item.dataset[key] = value;
  if (role === "user") body.textContent = text;
  log.append(item);
  return item;
}

// ``view``: an operation or a history entry, with ``text``, ``html`` and ``tool`` (protocol.py).
export function setAnswer(item, view, final) {
  raw.set(item, view.text || "");
  const body = item.querySelector(".text");
  if (typeof view.html === "string") {
    body.innerHTML = view.html;
  } else {
    body.textContent = view.text || "";   // a gateway of an older version: no HTML, the plain text
  }
  for (const pre of body.querySelectorAll("pre")) addCopyButton(pre);
  if (view.file) showFile(item, view.file);
  let toolLine = item.querySelector(".tool");
  const tool = final ? "" : view.tool || "";
  if (tool) {
    if (!toolLine) {
      toolLine = document.createElement("span");
      toolLine.className = "tool";
      item.append(toolLine);
    }
    showToolLine(toolLine, tool);
  } else if (toolLine) {
    toolLine.remove();
  }
  item.classList.toggle("streaming", !final);
  item.dataset.final = final ? "yes" : "no";
  showChoices(item, view.buttons || []);
}

// A tool approval's question (protocol.py, ``buttons``): Approve and Deny under it, built from DOM nodes (labels as
// text). An operation without buttons takes them away; a press disables them until the gateway has answered.
function showChoices(item, buttons) {
  let row = item.querySelector(".choices");
  if (!buttons.length) {
    if (row) row.remove();
    return;
  }
  if (!row) {
    row = document.createElement("div");
    row.className = "choices";
    item.append(row);
  }
  row.replaceChildren(...buttons.map((b) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `choice ${String(b.label).toLowerCase()}`;
    button.textContent = b.label;
    button.dataset.data = b.data;
    return button;
  }));
}

// What became of a question (a ``settled`` frame): its buttons gone, the line saying so under it.
export function settleChoices(log, approvalId, line) {
  const items = new Set(Array.from(log.querySelectorAll("button.choice"))
    .filter((button) => button.dataset.data.startsWith(`ap:${approvalId}:`))
    .map((button) => button.closest(".message")));
  for (const item of items) {
    item.querySelector(".choices").remove();
    let span = item.querySelector(".settled");
    if (!span) {
      span = document.createElement("span");
      span.className = "settled";
      item.append(span);
    }
    span.textContent = line;
  }
}

// The gateway starts the line that says the model has sent nothing yet with an hourglass emoji, which a system
// without an emoji font draws as an empty box: the page draws its own hourglass instead.
const WAITING_MARK = "\u23f3 ";

function showToolLine(node, tool) {
  if (!tool.startsWith(WAITING_MARK)) {
    node.textContent = tool;
    return;
  }
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "icon waiting");
  svg.setAttribute("aria-hidden", "true");
  const use = document.createElementNS("http://www.w3.org/2000/svg", "use");
  use.setAttribute("href", "#icon-hourglass");
  svg.append(use);
  node.replaceChildren(svg, document.createTextNode(" " + tool.slice(WAITING_MARK.length)));
}

// The files of a visitor's message: the ones it uploaded (``file``: the upload id, also its media key) or the
// history's (``url``).
export function showFiles(item, files) {
  for (const f of files) showFile(item, f.url ? f : { url: `media/${f.file}`, kind: f.kind, name: f.name });
}

// A file (protocol.py, FILE): a photo shown inline, a voice note in a player, anything else offered to download.
// Built from DOM nodes, never HTML: the name is text; the URL is the gateway's own /media/KEY.
function showFile(item, file) {
  const url = "media/" + String(file.url || "").replace(/^media\//, "").replace(/[^0-9a-f]/g, "");
  if (Array.from(item.querySelectorAll(".file")).some((node) => node.dataset.url === url)) return;
  let node;
  if (file.kind === "photo") {
    node = document.createElement("img");
    node.src = url;
    node.alt = file.name || "image";
    node.loading = "lazy";
    if (file.width && file.height) {
      node.width = file.width;
      node.height = file.height;
    }
  } else if (file.kind === "voice") {
    node = document.createElement("audio");   // a voice note: played in the page
    node.src = url;
    node.controls = true;
    node.preload = "none";
    node.title = file.name || "voice note";
  } else {
    node = document.createElement("a");
    node.href = url;
    node.download = file.name || "file";
    node.textContent = file.name || "file";   // style.css draws the download arrow
  }
  node.classList.add("file");
  node.dataset.url = url;
  item.querySelector(".text").before(node);
}

export function rawText(item) {
  return raw.get(item);
}

// A bar above each code block: its language and a copy button. Both labels are drawn by CSS, so the block's text
// stays exactly the code.
function addCopyButton(pre) {
  const block = document.createElement("div");
  block.className = "code-block";
  const head = document.createElement("div");
  head.className = "code-head";
  const language = /(?:^|\s)language-(\S+)/.exec(pre.querySelector("code")?.className || "");
  head.dataset.language = language ? language[1] : "";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.title = "Copy the code";
  button.setAttribute("aria-label", "Copy the code");
  head.append(button);
  pre.replaceWith(block);
  block.append(head, pre);
}

// Delegated: the buttons are made anew with every rendering of a streaming answer.
export function handleCopyClicks(log) {
  log.addEventListener("click", async (event) => {
    const button = event.target.closest("button.copy");
    if (!button) return;
    const code = button.closest(".code-block").querySelector("pre");
    const text = code ? code.textContent : "";
    let copied = false;
    try {
      await navigator.clipboard.writeText(text);
      copied = true;
    } catch (_) {
      copied = copyBySelection(code);   // no clipboard API: a page served over plain HTTP beyond loopback
    }
    button.dataset.copied = copied ? "yes" : "no";
    setTimeout(() => { delete button.dataset.copied; }, 2000);
  });
}

function copyBySelection(node) {
  if (!node) return false;
  const range = document.createRange();
  range.selectNodeContents(node);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  try {
    return document.execCommand("copy");
  } catch (_) {
    return false;
  } finally {
    selection.removeAllRanges();
  }
}

export function setNote(item, note) {
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

export function botMessage(log, messageId) {
  return Array.from(log.querySelectorAll(".message.assistant")).find((m) => m.dataset.id === messageId);
}

export function userMessage(log, clientId) {
  return Array.from(log.querySelectorAll(".message.user")).find((m) => m.dataset.clientId === clientId);
}

// A failed turn's answer (``kind`` "error", protocol.py) is shown as an error: its own colours and a "⚠ Error" label
// drawn by CSS (the text stays the gateway's).
export function showKind(item, kind) {
  item.classList.toggle("error", kind === "error");
}

// The Retry button: on the conversation's last message when it is a failed answer, nowhere else (``/retry`` answers
// the visitor's last message, so an older failure cannot be retried once something followed it).
export function offerRetry(log) {
  const items = log.querySelectorAll(".message");
  const last = items[items.length - 1];
  for (const button of log.querySelectorAll("button.retry")) {
    if (button.closest(".message") !== last) button.remove();
  }
  if (!last || !last.classList.contains("error") || last.querySelector("button.retry")) return;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "retry";
  button.textContent = "Retry";
  button.title = "Send your last message again (/retry)";
  last.append(button);
}
